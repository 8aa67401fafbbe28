package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// With no tracer provider installed, a request that carries a traceparent still continues its trace (the
// envelope it publishes carries the caller's trace context on), and one that carries none gets no span.
func TestUntracedRequestsContinueOnlyTheCallersTrace(t *testing.T) {
	if otel.GetTracerProvider() != untracedProvider {
		t.Fatal("a tracer provider is installed; this test needs the default")
	}
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{}) // as tracing.Setup does
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	var got trace.SpanContext
	var seen *http.Request
	h := traceRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, seen = trace.SpanContextFromContext(r.Context()), r
	}))

	r := httptest.NewRequest("POST", "/v1/send", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("with a traceparent, the handler's trace is %v, want the caller's", got.TraceID())
	}

	got = trace.SpanContext{}
	plain := httptest.NewRequest("POST", "/v1/send", nil)
	h.ServeHTTP(httptest.NewRecorder(), plain)
	if got.IsValid() {
		t.Errorf("without a traceparent or a provider, the handler has a span context %v", got)
	}
	if seen != plain {
		t.Error("without a traceparent or a provider, the request was copied for a span that records nothing")
	}
}
