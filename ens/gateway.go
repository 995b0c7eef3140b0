package ens

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A CCIP-Read gateway URL comes from whoever controls a name's resolver, so
// anyone can make conclave fetch any URL by naming an agent. The gateway
// client refuses what would turn that into a port scanner of conclave's
// own network: plain http (unless allowed), and any address that is not a
// public unicast one, checked after DNS resolution at dial time so that a
// name re-bound between two look-ups cannot slip through.

// ErrGatewayRefused reports a gateway conclave will not fetch: a URL that
// is not https (or http when allowed), an address that is not public, too
// many redirects, an answer over 1 MiB. What a Slack user sees of it is
// this error's text only.
var ErrGatewayRefused = errors.New("gateway refused")

// ErrGatewayUnreachable reports a gateway that could not be reached or did
// not answer as EIP-3668 says (a dial error, a timeout, a 5xx, an answer
// that is not {"data": "0x…"}). What a Slack user sees of it is this
// error's text only.
var ErrGatewayUnreachable = errors.New("gateway unreachable")

// maxGatewayRedirects bounds the redirects followed for one gateway request.
const maxGatewayRedirects = 3

// GatewayOptions configure the CCIP-Read gateway client.
type GatewayOptions struct {
	// AllowHTTP lets gateways be fetched over plain http
	// (ens.gateway_allow_http).
	AllowHTTP bool
	// AllowPrivate lets gateways be on any address that is not public
	// (publicAddress): loopback, private, link-local, CGNAT, unspecified,
	// multicast and the special ranges (ens.gateway_allow_private), for
	// tests and private deployments. An address with an IPv6 zone is
	// refused all the same.
	AllowPrivate bool

	// Resolver looks gateway host names up; default net.DefaultResolver.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
	// Dial connects to an address the guard allowed ("ip:port"); default a
	// net.Dialer. Tests use it to see every address a connection was
	// attempted to.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS is the TLS configuration of gateway connections (tests give their
	// own root CAs); default the system's.
	TLS *tls.Config
}

// specialPrefixes are networks that pass the standard library's
// global-unicast test but are not the public internet: 0.0.0.0/8 ("this
// network"), CGNAT, the IETF protocol block, benchmarking, reserved (with
// broadcast), IPv4-compatible IPv6, the NAT64 prefixes, well-known and
// local-use (which reach IPv4 addresses, private ones included), SIIT's
// IPv4-translated addresses and Teredo (the same), 6to4 (the same) and IPv6
// site-local. IPv4-mapped addresses (::ffff:0:0/96) are judged as the IPv4
// address they carry (publicAddress), which is how resolvers hand IPv4 out.
var specialPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
}

// publicAddress reports whether a gateway may be dialled at ip when
// private addresses are not allowed. It is an allow-list: a global unicast
// address that is not private (RFC 1918, RFC 4193) and not in
// specialPrefixes. An address with an IPv6 zone is never public (and
// netip.Prefix.Contains is false for every zoned address, so a deny-list
// would let it through). An IPv4-mapped IPv6 address is judged as the IPv4
// address it carries.
func publicAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.Zone() != "" || !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return false
	}
	for _, p := range specialPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// gatewayDialer resolves a gateway's host and dials only the addresses the
// guard allows, in the resolver's order.
type gatewayDialer struct {
	opts GatewayOptions
}

func (d gatewayDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: address %q: %w", ErrGatewayRefused, addr, err)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = d.opts.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("%w: look up %s: %w", ErrGatewayUnreachable, host, err)
		}
	}
	var errs []error
	for _, ip := range ips {
		if ip.Zone() != "" {
			// Refused even with AllowPrivate: a zone names an interface of
			// this host, which no gateway URL has a business choosing.
			errs = append(errs, fmt.Errorf("%w: %s is an address with an IPv6 zone", ErrGatewayRefused, host))
			continue
		}
		if !d.opts.AllowPrivate && !publicAddress(ip) {
			errs = append(errs, fmt.Errorf("%w: %s resolves to %s, not a public address", ErrGatewayRefused, host, ip))
			continue
		}
		conn, err := d.opts.Dial(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("%w: %w", ErrGatewayUnreachable, err))
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: %s has no address", ErrGatewayUnreachable, host)
	}
	return nil, errors.Join(errs...)
}

// newGatewayClient builds the HTTP client gateways are fetched with. It
// never uses a proxy (a proxy would dial on conclave's behalf, past the
// address check).
func newGatewayClient(opts GatewayOptions, timeout time.Duration) *http.Client {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{Timeout: timeout}).DialContext
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            gatewayDialer{opts}.DialContext,
		TLSClientConfig:        opts.TLS,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConns:           16,
		IdleConnTimeout:        time.Minute,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxGatewayRedirects {
				return fmt.Errorf("%w: more than %d redirects", ErrGatewayRefused, maxGatewayRedirects)
			}
			return checkGatewayURL(req.URL, opts.AllowHTTP)
		},
	}
}

// checkGatewayURL refuses what is not https (or http when allowed).
func checkGatewayURL(u *url.URL, allowHTTP bool) error {
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	case u.Scheme == "http":
		return fmt.Errorf("%w: %s is plain http (ens.gateway_allow_http is off)", ErrGatewayRefused, u.Redacted())
	default:
		return fmt.Errorf("%w: %q is not an https URL", ErrGatewayRefused, u.Scheme+"://"+u.Host)
	}
	if u.Host == "" {
		return fmt.Errorf("%w: a URL without a host", ErrGatewayRefused)
	}
	if strings.Contains(u.Hostname(), "%") {
		return fmt.Errorf("%w: a host with an IPv6 zone", ErrGatewayRefused)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("%w: port %q", ErrGatewayRefused, p)
		}
	}
	return nil
}
