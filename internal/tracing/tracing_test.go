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
