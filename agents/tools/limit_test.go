package tools_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/conclavehq/conclave/agents/tools"
)

// TestResultTooLarge: an answer past tools.max_result_bytes fails the
// call with "result too large", over either transport, and an answer
// within it still comes; the session is usable afterwards.
func TestResultTooLarge(t *testing.T) {
	const limit = 1 << 20
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			srv := httpServer(t, "crm")
			if transport == "stdio" {
				srv, _ = stdioServer(t, "crm")
			}
			srv.Timeout = time.Minute // a loaded machine under the race detector is slow to make 3 MB
			h, _, c := runWith(t, tools.Options{MaxResultBytes: limit}, srv)
			ctx := t.Context()
			if got, err := h.Call(ctx, "crm__big", `{"bytes":1000}`); err != nil || len(got) != 1000 {
				t.Fatalf("a small answer: %d bytes, %v", len(got), err)
			}
			if _, err := h.Call(ctx, "crm__big", fmt.Sprintf(`{"bytes":%d}`, 3*limit)); err == nil || err.Error() != "result too large" {
				t.Errorf("an answer of three times the bound: %v, want result too large", err)
			}
			eventually(t, "the server to answer again", func() bool {
				got, err := h.Call(ctx, "crm__lookup_customer", `{"name":"Ada Lovelace"}`)
				return err == nil && got == "C45653"
			})
			if got := c.list(); len(got) < 2 || got[1] != "crm/big/failed" {
				t.Errorf("counted %v, want the big call failed", got)
			}
		})
	}
}

// TestResultTooLargeKeepsTheHeap: a 50 MB answer from a stdio server
// (another process, so that only the reading side counts) fails without
// the heap growing by anything near it.
func TestResultTooLargeKeepsTheHeap(t *testing.T) {
	srv, _ := stdioServer(t, "crm")
	srv.Timeout = 5 * time.Minute // making 50 MB is slow under the race detector on a loaded machine
	h, _, _ := runWith(t, tools.Options{}, srv)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := h.Call(t.Context(), "crm__big", `{"bytes":50000000}`)
	runtime.ReadMemStats(&after)
	if err == nil || err.Error() != "result too large" {
		t.Errorf("a 50 MB answer: %v, want result too large", err)
	}
	if grew := int64(after.TotalAlloc) - int64(before.TotalAlloc); grew > 100<<20 {
		t.Errorf("reading the answer allocated %d MB, want under 100 MB", grew>>20)
	}
}
