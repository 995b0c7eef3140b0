"use strict";
(function () {
  var button = document.getElementById("connect");
  var status = document.getElementById("status");
  var section = document.getElementById("message");
  var messageText = document.getElementById("message-text");
  var messageTitle = document.getElementById("message-title");
  // The page's own path, whatever prefix a proxy serves it under.
  var base = location.pathname.replace(/\/+$/, "");

  // The expiry, in the reader's own time.
  var expiry = document.querySelector("time");
  if (expiry) {
    var at = new Date(expiry.getAttribute("datetime"));
    if (!isNaN(at.getTime())) {
      expiry.textContent = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    }
  }

  function show(kind, text) {
    status.className = "status " + kind;
    status.textContent = text;
  }

  function setState(state) {
    document.body.setAttribute("data-state", state);
  }

  // personal_sign takes the message as hex-encoded UTF-8.
  function toHex(text) {
    var bytes = new TextEncoder().encode(text);
    var out = "0x";
    for (var i = 0; i < bytes.length; i++) {
      out += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
    }
    return out;
  }

  async function call(url, init) {
    var res = await fetch(url, init);
    var body = {};
    try { body = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) {
      throw new Error(body.error || "The server answered " + res.status + ".");
    }
    return body;
  }

  function reason(err) {
    if (err && err.code === 4001) {
      return "You declined the request in your wallet. Press the button to try again.";
    }
    return (err && err.message) || String(err);
  }

  async function link() {
    var eth = window.ethereum;
    if (!eth || typeof eth.request !== "function") {
      show("error", "No browser wallet found. Open this link in a browser with a wallet extension, or in your wallet app's browser.");
      setState("failed");
      return;
    }
    button.disabled = true;
    setState("working");
    try {
      show("", "Asking your wallet for an account…");
      var accounts = await eth.request({ method: "eth_requestAccounts" });
      if (!accounts || !accounts.length) {
        throw new Error("Your wallet shared no account.");
      }
      var address = accounts[0];
      var prepared = await call(base + "/message?address=" + encodeURIComponent(address), {
        headers: { "Accept": "application/json" }, cache: "no-store"
      });
      messageText.textContent = prepared.message;
      section.hidden = false;
      show("", "Sign the message in your wallet…");
      var signature = await eth.request({ method: "personal_sign", params: [toHex(prepared.message), address] });
      show("", "Checking the signature…");
      var done = await call(base, {
        method: "POST",
        headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify({ address: address, signature: signature })
      });
      show("ok", done.message);
      messageTitle.textContent = "Signed message";
      button.hidden = true;
      setState("linked");
    } catch (err) {
      show("error", reason(err));
      button.disabled = false;
      setState("failed");
    }
  }

  button.addEventListener("click", link);
})();
