package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/heraldhq/herald/internal/testing/otlptest"
	"github.com/heraldhq/herald/internal/tracing"
)

func TestHeadersCarryTheTraceAndNothingWithoutOne(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if hs := tracing.Headers(context.Background()); hs != nil {
		t.Errorf("headers without a span: %v, want none (an untraced envelope costs nothing)", hs)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "request")
	defer span.End()
	hs := tracing.Headers(ctx)
	if len(hs) != 1 || hs[0].Key != "traceparent" || !strings.Contains(string(hs[0].Value), span.SpanContext().TraceID().String()) {
		t.Fatalf("headers %v, want a traceparent naming the trace", hs)
	}
	got := tracing.FromHeaders(context.Background(), hs)
	if sc := traceOf(got); sc != span.SpanContext().TraceID().String() {
		t.Errorf("extracted trace %s, want %s", sc, span.SpanContext().TraceID())
	}
}

func TestLogLinesNameTheirTrace(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "x")
	log.InfoContext(context.Background(), "untraced")
	if strings.Contains(buf.String(), "trace_id") {
		t.Errorf("a line without a span names a trace: %s", buf.String())
	}
	buf.Reset()
	ctx, span := sdktrace.NewTracerProvider().Tracer("t").Start(context.Background(), "request")
	defer span.End()
	log.InfoContext(ctx, "traced")
	if want := `"trace_id":"` + span.SpanContext().TraceID().String() + `"`; !strings.Contains(buf.String(), want) {
		t.Errorf("log line %s lacks %s", buf.String(), want)
	}
}

func traceOf(ctx context.Context) string {
	_, span := sdktrace.NewTracerProvider().Tracer("t").Start(ctx, "child")
	defer span.End()
	return span.SpanContext().TraceID().String()
}

// Setup is tested on the path production takes — the standard variables pointing the real OTLP/HTTP
// exporter at a receiver — because every other test installs a provider of its own and would not see
// Setup fail (as it did for every component when the SDK's default resource and Herald's named different
// semantic-convention schemas). Any error from Setup fails the test, whatever the next SDK upgrade brings.
func TestSetupExportsOverOTLPToTheConfiguredEndpoint(t *testing.T) {
	receiver := otlptest.New(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	// Setup installs a global provider: leave a no-op one behind (the SDK's is shut down below).
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	shutdown, err := tracing.Setup(context.Background(), "herald-test")
	if err != nil {
		t.Fatalf("Setup with OTEL_EXPORTER_OTLP_ENDPOINT set: %v", err)
	}
	_, span := tracing.Tracer().Start(context.Background(), "request")
	traceID := span.SpanContext().TraceID().String()
	span.End()
	// Shutdown flushes the batch: the span has been sent when it returns.
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	var found bool
	for _, s := range receiver.Spans() {
		if s.Name == "request" && s.TraceID == traceID {
			found = true
			if s.Service != "herald-test" {
				t.Errorf("span exported with service.name %q, want herald-test", s.Service)
			}
		}
	}
	if !found {
		t.Errorf("the receiver got %d span(s), none of trace %s", len(receiver.Spans()), traceID)
	}
}
