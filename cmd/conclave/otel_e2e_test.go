package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/conclavehq/conclave/bot/fakeslack"
	"github.com/conclavehq/conclave/memory/redistest"
)

// otlpReceiver is an OTLP/HTTP collector in the test: it decodes the
// protobuf export requests the SDK sends and keeps their spans.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []*tracepb.Span
	resource []*commonpb.KeyValue
	paths    []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, _ := io.ReadAll(body)
		var export collectortrace.ExportTraceServiceRequest
		if req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(raw, &export) != nil {
			http.Error(w, "not an OTLP protobuf export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		for _, rs := range export.ResourceSpans {
			r.resource = rs.GetResource().GetAttributes()
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) received() ([]*tracepb.Span, []*commonpb.KeyValue, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), r.resource, append([]string(nil), r.paths...)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetArrayValue() != nil:
			var parts []string
			for _, e := range v.GetArrayValue().Values {
				parts = append(parts, e.GetStringValue())
			}
			out[kv.Key] = strings.Join(parts, ",")
		case v.GetStringValue() != "":
			out[kv.Key] = v.GetStringValue()
		default:
			out[kv.Key] = fmt.Sprint(v.GetIntValue())
		}
	}
	return out
}

// otelConversation runs a conversation with an expert's tool call, with
// spans exported to an in-test collector, and returns the spans received
// once conclave stopped (which flushes them).
func otelConversation(t *testing.T, capture bool) ([]*tracepb.Span, []*commonpb.KeyValue, []string) {
	t.Helper()
	return otelConversationSaying(t, capture, "")
}

// otelConversationSaying is otelConversation with more words in the
// person's question.
func otelConversationSaying(t *testing.T, capture bool, more string) ([]*tracepb.Span, []*commonpb.KeyValue, []string) {
	t.Helper()
	db := redistest.New(t)
	r := newRig(t, fakeslack.Options{EchoPosts: true})
	lookupModel(r)
	rx := newOTLPReceiver(t)
	otel := fmt.Sprintf("\n[otel]\nendpoint = %q\ncapture_content = %v\n", rx.srv.URL, capture)
	path := r.config(t, otel+redisSection(db.URL, db.Prefix)+lookupSections(httpSection(t, "crm", "10s")))
	p := start(t, path, toolEnv)
	root := r.slack.SendMessage(fakeslack.Message{Channel: testChannel, User: testPerson, Text: claudineENS + ", what cover does Ada Lovelace have?" + more})
	r.waitPosts(t, p, 2)
	waitTraces(t, toolEnv, path, permalink(root.TS), 2) // both turns are committed: their spans are made
	if code := p.stop(t); code != 0 {
		t.Fatalf("conclave exited with %d:\n%s", code, p.logs)
	}
	return rx.received()
}

// TestOpenTelemetry: a turn's spans — conclave.turn, chat <model> with the
// GenAI attributes, execute_tool <name>, slack.post — form one trace,
// linked to the slack.event span of the message that woke it; prompt text
// is in the spans only with otel.capture_content.
func TestOpenTelemetry(t *testing.T) {
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture_content=%v", capture), func(t *testing.T) {
			spans, resource, paths := otelConversation(t, capture)
			if len(paths) == 0 || paths[0] != "/v1/traces" {
				t.Fatalf("exports to %v, want /v1/traces", paths)
			}
			if res := attrs(resource); res["service.name"] != "conclave" || res["service.version"] == "" {
				t.Errorf("resource = %v", res)
			}
			byName := map[string][]*tracepb.Span{}
			for _, s := range spans {
				byName[s.Name] = append(byName[s.Name], s)
			}
			turns, events := byName["conclave.turn"], byName["slack.event"]
			if len(turns) != 2 || len(events) == 0 {
				t.Fatalf("spans %v: want two conclave.turn and a slack.event", names(spans))
			}
			var expert *tracepb.Span
			for _, s := range turns {
				if a := attrs(s.Attributes); a["conclave.agent"] == claudineENS {
					expert = s
					if a["conclave.role"] != "expert" || a["conclave.phase"] != "context-found" || a["conclave.outcome"] != "ok" {
						t.Errorf("expert turn attributes = %v", a)
					}
				}
			}
			if expert == nil {
				t.Fatalf("no conclave.turn of %s", claudineENS)
			}
			if len(expert.Links) != 1 || !bytes.Equal(expert.Links[0].SpanId, events[0].SpanId) || !bytes.Equal(expert.Links[0].TraceId, events[0].TraceId) {
				t.Errorf("the turn links to %v, want the slack.event span %s", expert.Links, hex.EncodeToString(events[0].SpanId))
			}
			if bytes.Equal(expert.TraceId, events[0].TraceId) || bytes.Equal(turns[0].TraceId, turns[1].TraceId) {
				t.Error("a turn's spans are not a trace of their own")
			}
			children := func(name string) []*tracepb.Span {
				var out []*tracepb.Span
				for _, s := range byName[name] {
					if bytes.Equal(s.TraceId, expert.TraceId) && bytes.Equal(s.ParentSpanId, expert.SpanId) {
						out = append(out, s)
					}
				}
				return out
			}
			chats := children("chat fake-model")
			if len(chats) != 3 {
				t.Fatalf("%d chat spans under the expert's turn, want 3 (spans: %v)", len(chats), names(spans))
			}
			a := attrs(chats[0].Attributes)
			for key, want := range map[string]string{
				"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "fake-model",
				"gen_ai.response.finish_reasons": "tool_calls",
			} {
				if a[key] != want {
					t.Errorf("chat span %s = %q, want %q (all: %v)", key, a[key], want, a)
				}
			}
			if a["gen_ai.usage.input_tokens"] == "0" || a["gen_ai.usage.input_tokens"] == "" || a["gen_ai.usage.output_tokens"] == "" {
				t.Errorf("chat span usage = %v", a)
			}
			tools := children("execute_tool crm__lookup_customer")
			if len(tools) != 1 || attrs(tools[0].Attributes)["gen_ai.tool.name"] != "crm__lookup_customer" {
				t.Errorf("execute_tool spans = %v", tools)
			}
			if len(children("slack.post")) != 1 {
				t.Errorf("slack.post spans under the turn: %d, want 1", len(children("slack.post")))
			}
			var all strings.Builder
			for _, s := range spans {
				fmt.Fprint(&all, attrs(s.Attributes))
			}
			hasPrompt := strings.Contains(all.String(), "what cover does Ada Lovelace have?")
			if hasPrompt != capture {
				t.Errorf("prompt text in the spans: %v, want %v", hasPrompt, capture)
			}
			if strings.Contains(all.String(), "crm-secret-value") || strings.Contains(all.String(), "sk-test-model-key") {
				t.Error("a secret is in a span")
			}
		})
	}
}

// TestOpenTelemetryMasksSecrets: with capture_content, a configured
// secret in a prompt (a person pasted the model key) is in no exported
// span attribute: the spans are built from the masked trace.
func TestOpenTelemetryMasksSecrets(t *testing.T) {
	spans, _, _ := otelConversationSaying(t, true, " Our key is sk-test-model-key and the CRM's Authorization is Bearer crm-secret-value.")
	masked := 0
	for _, s := range spans {
		for key, v := range attrs(s.Attributes) {
			if strings.Contains(v, "sk-test-model-key") || strings.Contains(v, "crm-secret-value") {
				t.Errorf("span %s attribute %s holds a secret", s.Name, key)
			}
			if strings.Contains(v, "[redacted]") {
				masked++
			}
			if len(v) > 16<<10+16 {
				t.Errorf("span %s attribute %s is %d bytes long, past the cap", s.Name, key, len(v))
			}
		}
	}
	if masked == 0 {
		t.Error("no attribute shows the masked prompt: content was not captured")
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// Without an endpoint nothing is exported; with a bad one conclave says so.
func TestOpenTelemetryEndpoint(t *testing.T) {
	tracer, stop, err := openTracing(t.Context(), OTelConfig{}, func(string) string { return "" }, slog.New(slog.DiscardHandler))
	if tracer != nil || err != nil {
		t.Errorf("no endpoint: tracer %v, err %v; want none", tracer, err)
	}
	stop()
	_, _, err = openTracing(t.Context(), OTelConfig{}, func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return "collector:4318"
		}
		return ""
	}, slog.New(slog.DiscardHandler))
	if err == nil || err.Error() != `otel: endpoint "collector:4318" is not an http(s) URL` {
		t.Errorf("bad endpoint from the environment: %v", err)
	}
	tracer, stop, err = openTracing(t.Context(), OTelConfig{}, func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return "http://127.0.0.1:1"
		}
		return ""
	}, slog.New(slog.DiscardHandler))
	if tracer == nil || err != nil {
		t.Errorf("endpoint from the environment: tracer %v, err %v", tracer, err)
	}
	stop()
}
