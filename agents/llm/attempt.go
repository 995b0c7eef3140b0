package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/conclavehq/conclave/internal/backoff"
)

// retryAfterMax bounds a server's Retry-After before it is compared with
// the deadline, so absurd values cannot overflow.
const retryAfterMax = 24 * time.Hour

// retryPolicy gives the wait before retry n (1-based): b = 0.5 s·2^(n-1),
// capped at 10 s, then drawn from [b/2, b] by jitter ("equal jitter"), so
// replicas that failed together do not retry together; a Retry-After
// replaces it.
var retryPolicy = backoff.Policy{Base: 500 * time.Millisecond, Cap: 10 * time.Second}

// retryAfter reads the server's wait: retry-after-ms (OpenAI's), else
// Retry-After in seconds (fractions accepted) or as an HTTP date. Zero when
// absent, unreadable or not in the future.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return secondsToDuration(ms / 1000)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return secondsToDuration(s)
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), retryAfterMax)
	}
	return 0
}

func secondsToDuration(s float64) time.Duration {
	if s > retryAfterMax.Seconds() {
		return retryAfterMax
	}
	return time.Duration(s * float64(time.Second))
}

// trace is what the HTTP layer saw of one attempt; go-openai's errors do not
// carry response headers, and do not say whether anything was sent.
type trace struct {
	body       []byte // the request's body, as sent
	sent       bool
	status     int
	retryAfter time.Duration
	netErr     error
}

type traceKey struct{}

// doer sits between go-openai and the HTTP client: it adds the profile's
// headers and notes status and Retry-After in the attempt's trace.
type doer struct {
	next   HTTPDoer
	header http.Header
	now    func() time.Time
}

func canonicalHeader(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	for k, vs := range d.header {
		req.Header[k] = vs
	}
	tr, _ := req.Context().Value(traceKey{}).(*trace)
	if tr != nil && req.GetBody != nil {
		tr.body = copyBody(req)
	}
	resp, err := d.next.Do(req)
	if tr != nil {
		tr.sent = true
		tr.netErr = err
		if resp != nil {
			tr.status = resp.StatusCode
			tr.retryAfter = retryAfter(resp.Header, d.now())
		}
	}
	return resp, err
}

// copyBody reads a copy of the request's body (GetBody gives a fresh
// reader over the bytes go-openai encoded), in one allocation when its
// length is known.
func copyBody(req *http.Request) []byte {
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	if n := req.ContentLength; n > 0 {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil
		}
		return b
	}
	b, _ := io.ReadAll(body)
	return b
}

// outcome is one attempt's result, classified.
type outcome struct {
	reply      openai.ChatCompletionResponse
	reasoning  string // removed from the reply (tidyReply)
	body       []byte // the request's, as sent
	usage      usage
	sent       bool // the request reached the HTTP client
	status     int
	retryAfter time.Duration
	reason     string // "" on success, else a Reason constant
	retry      bool
	msg        string // what went wrong, not yet redacted
	cause      error
}

type usage struct{ prompt, completion int }

func (u *usage) add(v usage) {
	u.prompt += v.prompt
	u.completion += v.completion
}

func (out outcome) response(model string, attempts int, used usage) Response {
	choice := out.reply.Choices[0]
	var calls []ToolCall
	for _, tc := range choice.Message.ToolCalls {
		calls = append(calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return Response{
		Content:          choice.Message.Content,
		Reasoning:        out.reasoning,
		ToolCalls:        calls,
		FinishReason:     string(choice.FinishReason),
		Model:            cmp.Or(out.reply.Model, model),
		PromptTokens:     used.prompt,
		CompletionTokens: used.completion,
		Attempts:         attempts,
		Sent:             out.body,
	}
}

// attempt makes one call, and classifies its result: a plain call is
// bounded by timeout, a streamed one (onText set) by the profile's
// IdleTimeout between chunks. A successful reply is tidied (tidyReply)
// before it is judged empty.
func (ep *endpoint) attempt(ctx context.Context, call openai.ChatCompletionRequest, timeout time.Duration, onText func(string)) outcome {
	var tr trace
	base := context.WithValue(ctx, traceKey{}, &tr)
	var actx context.Context
	var cancel context.CancelFunc
	if onText == nil {
		actx, cancel = context.WithTimeout(base, timeout)
	} else {
		actx, cancel = context.WithCancel(base) // bounded by its silences instead (stream)
	}
	defer cancel()
	var reply openai.ChatCompletionResponse
	var err error
	if onText != nil {
		reply, err = ep.stream(actx, call, onText)
	} else {
		reply, err = ep.api.CreateChatCompletion(actx, call)
	}
	out := outcome{body: tr.body, sent: tr.sent, status: tr.status, retryAfter: tr.retryAfter, cause: err}
	if err == nil {
		out.reasoning = tidyReply(&reply, len(call.Tools) > 0)
		out.reply = reply
		out.usage = usage{reply.Usage.PromptTokens, reply.Usage.CompletionTokens}
		switch {
		case len(reply.Choices) == 0:
			out.reason, out.retry, out.cause = ReasonEmpty, true, ErrEmptyReply
			out.msg = "empty reply: no choice"
		case strings.TrimSpace(reply.Choices[0].Message.Content) == "" && len(reply.Choices[0].Message.ToolCalls) == 0:
			out.reason, out.cause = emptyReason(reply.Choices[0].FinishReason), ErrEmptyReply
			out.retry = out.reason == ReasonEmpty // a limit or a filter stops the next try too
			out.msg = fmt.Sprintf("empty reply: blank content (finish_reason %q)", reply.Choices[0].FinishReason)
		}
		return out
	}

	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case ctx.Err() != nil:
		out.reason, out.msg = ReasonCanceled, ctx.Err().Error()
	case errors.Is(err, errIdle):
		out.reason, out.retry = ReasonTimeout, true
		out.msg = fmt.Sprintf("no chunk for %s (idle_timeout)", ep.profile.IdleTimeout)
	case actx.Err() != nil:
		out.reason, out.retry = ReasonTimeout, true
		out.msg = fmt.Sprintf("no reply within %s", timeout.Round(time.Millisecond))
	case tr.netErr != nil:
		out.reason, out.retry, out.msg = ReasonConnection, true, tr.netErr.Error()
	case errors.Is(err, errStreamCut):
		out.reason, out.retry, out.msg = ReasonConnection, true, clipQuote(err.Error(), 200)
	case errors.As(err, &apiErr):
		out.msg = fmt.Sprintf("status %d: %s", apiErr.HTTPStatusCode, clipQuote(apiErr.Message, 300))
		out.reason, out.retry = classifyStatus(apiErr.HTTPStatusCode)
	case errors.As(err, &reqErr):
		out.msg = fmt.Sprintf("status %d", reqErr.HTTPStatusCode)
		if body := clipQuote(string(reqErr.Body), 200); body != "" {
			out.msg += ": " + body
		}
		out.reason, out.retry = classifyStatus(reqErr.HTTPStatusCode)
	case tr.sent && tr.status >= 200 && tr.status < 300:
		out.reason, out.retry = ReasonMalformed, true
		out.msg = "unreadable reply: " + clipQuote(err.Error(), 200)
	case tr.sent:
		out.reason, out.retry, out.msg = ReasonConnection, true, err.Error()
	default: // refused by the library before sending
		out.reason, out.msg = ReasonInvalid, err.Error()
	}
	return out
}

// emptyReason classifies a blank reply by its finish reason: the length
// limit and the content filter say why, and would stop a retry too.
func emptyReason(finish openai.FinishReason) string {
	switch finish {
	case openai.FinishReasonLength:
		return ReasonLength
	case openai.FinishReasonContentFilter:
		return ReasonFiltered
	}
	return ReasonEmpty
}

// classifyStatus says why a status failed and whether to try again: 429
// and 5xx may pass, other statuses will not.
func classifyStatus(status int) (reason string, retry bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return ReasonRateLimited, true
	case status >= 500 && status <= 599:
		return ReasonServer, true
	default:
		return ReasonRejected, false
	}
}
