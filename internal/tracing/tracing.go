// Package tracing follows a notification across Herald's processes with OpenTelemetry: a span per HTTP
// request in the ingress and the webhook (internal/server), the W3C trace context carried in the Kafka
// message headers of its envelope (internal/outbox), and the worker continuing the trace through the
// claim, the platform call and the status write (internal/delivery). Log lines written with a request's
// context carry its trace id.
//
// Spans are exported over OTLP/HTTP when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, configured by the standard OTEL_* variables. Otherwise the
// global provider stays OpenTelemetry's no-op one: spans are not recorded, nothing is injected into
// messages, and the cost is a few nanoseconds per call.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of Herald's spans.
const Name = "github.com/heraldhq/herald"

// Tracer is Herald's tracer, from the global provider (set by Setup, or by a test).
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// Enabled reports whether an OTLP endpoint is configured.
func Enabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the W3C trace-context propagator and, when an OTLP endpoint is configured, a batching
// OTLP/HTTP exporter for service (herald-ingress, herald-worker, …). shutdown flushes the spans still
// buffered; call it on the way out.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("while creating the OTLP/HTTP exporter: %w", err)
	}
	// The service name carries no schema URL: merging two resources that name different semantic-convention
	// schemas is an error, and the SDK's default resource names the schema of whichever semconv version
	// the SDK was built with, which changes with every upgrade. A schemaless resource merges with any.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err != nil {
		return nil, fmt.Errorf("while building the resource of %s: %w", service, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// headerCarrier lets the propagator read and write Kafka message headers.
type headerCarrier struct{ headers *[]kafka.Header }

func (c headerCarrier) Get(key string) string {
	for _, h := range *c.headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	for i, h := range *c.headers {
		if h.Key == key {
			(*c.headers)[i].Value = []byte(value)
			return
		}
	}
	*c.headers = append(*c.headers, kafka.Header{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(*c.headers))
	for i, h := range *c.headers {
		keys[i] = h.Key
	}
	return keys
}

// Headers returns the Kafka headers carrying ctx's trace context (traceparent, tracestate), or nil when
// ctx carries no recording span — so an untraced envelope costs nothing.
func Headers(ctx context.Context) []kafka.Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	var hs []kafka.Header
	otel.GetTextMapPropagator().Inject(ctx, headerCarrier{&hs})
	return hs
}

// FromHeaders returns ctx with the trace context a message's headers carry (unchanged when none).
func FromHeaders(ctx context.Context, headers []kafka.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, headerCarrier{&headers})
}

// LogHandler adds trace_id and span_id to every record logged with a context that carries a span.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
