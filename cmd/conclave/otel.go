package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// OTelConfig is [otel]: OpenTelemetry traces over OTLP/HTTP.
type OTelConfig struct {
	// Endpoint is the collector's base URL (as OTEL_EXPORTER_OTLP_ENDPOINT:
	// /v1/traces is added); empty: $OTEL_EXPORTER_OTLP_ENDPOINT, and
	// without it no traces are exported.
	Endpoint string `toml:"endpoint"`
	// CaptureContent puts prompts, replies and tool arguments and results
	// in the spans.
	CaptureContent bool `toml:"capture_content"`
}

// otelBatchTimeout is how long spans wait to be sent together.
const otelBatchTimeout = 2 * time.Second

// openTracing starts the OTLP/HTTP exporter when an endpoint is set and
// returns the tracer of conclave's spans and what flushes and stops it;
// without an endpoint, a nil tracer (no exporter, no cost).
func openTracing(ctx context.Context, c OTelConfig, getenv func(string) string, log *slog.Logger) (trace.Tracer, func(), error) {
	endpoint := cmp.Or(c.Endpoint, getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if endpoint == "" {
		return nil, func() {}, nil
	}
	target, err := tracesURL(endpoint)
	if err != nil {
		return nil, nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	if err != nil {
		return nil, nil, fmt.Errorf("otel: exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "conclave"), attribute.String("service.version", buildVersion()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(otelBatchTimeout)), sdktrace.WithResource(res))
	u, _ := url.Parse(target)
	log.Info("otel: exporting traces over OTLP/HTTP", slog.String("endpoint", u.Scheme+"://"+u.Host+u.Path),
		slog.Bool("capture_content", c.CaptureContent))
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("otel: spans not flushed at shutdown", slog.Any(logErr, err))
		}
	}
	return tp.Tracer("github.com/conclavehq/conclave"), stop, nil
}

// tracesURL is the traces endpoint under an OTLP base URL.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("otel: endpoint %q is not an http(s) URL", redactURL(endpoint))
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/traces"
	return u.String(), nil
}

// redactURL is a URL without its user-info and query, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unreadable URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// buildVersion is the version the build carries ("dev" when none), as
// service.version.
func buildVersion() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return cmp.Or(v, "dev")
}
