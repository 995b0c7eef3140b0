package llmfake

import (
	"net/http"
	"net/http/httptest"
)

// Do answers req in process, as the server would over the network: the
// Server is then an HTTP client (llm.WithHTTPClient) that opens no
// socket, for tests that run in a testing/synctest bubble, where a
// goroutine waiting on the network is never durably blocked. A reply
// held back (Delay, Pace) blocks Do the same way.
func (s *Server) Do(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	s.serve(rec, req)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
