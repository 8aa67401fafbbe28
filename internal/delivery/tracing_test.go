package delivery_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/heraldhq/herald/internal/dev/sim"
)

// One trace runs from POST /v1/send to the platform call: the request's span, then — through the W3C trace
// context in the envelope's Kafka headers — the worker's delivery with its claim and its sendMessage.
func TestOneTraceFromTheSendToThePlatformCall(t *testing.T) {
	// Not parallel: it installs the process's tracer provider.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	e := newEnv(t, sim.Options{})
	e.user("u1", 7101, true)
	e.start(e.fastOptions())
	id, _ := e.send("u1", "traced", 5)
	e.waitStatus(id, "delivered", 30*time.Second)

	// The envelope carries the request's trace context.
	var traceparent string
	for _, m := range e.broker.Messages(t, prefix+".notifications.normal") {
		for _, h := range m.Headers {
			if h.Key == "traceparent" {
				traceparent = string(h.Value)
			}
		}
	}
	if traceparent == "" {
		t.Fatal("the envelope has no traceparent header")
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		byName := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans.GetSpans().Snapshots() {
			byName[s.Name()] = s
		}
		req, deliver, claim, call := byName["POST /v1/send"], byName["deliver"], byName["claim"], byName["sendMessage"]
		if req != nil && deliver != nil && claim != nil && call != nil {
			trace := req.SpanContext().TraceID()
			for _, s := range []sdktrace.ReadOnlySpan{deliver, claim, call} {
				if s.SpanContext().TraceID() != trace {
					t.Errorf("span %q is in trace %s, want the request's %s", s.Name(), s.SpanContext().TraceID(), trace)
				}
			}
			if deliver.Parent().SpanID() != req.SpanContext().SpanID() || !deliver.Parent().IsRemote() {
				t.Errorf("the delivery's parent is %v, want the request's span, received from the Kafka headers", deliver.Parent())
			}
			if call.Parent().SpanID() != deliver.SpanContext().SpanID() || claim.Parent().SpanID() != deliver.SpanContext().SpanID() {
				t.Error("claim and sendMessage are not children of the delivery")
			}
			if traceparent[3:35] != trace.String() {
				t.Errorf("traceparent %q does not name the request's trace %s", traceparent, trace)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans recorded: %v; want the request's, deliver, claim and sendMessage", keysOf(byName))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func keysOf(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
