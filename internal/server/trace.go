package server

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/tracing"
)

// untracedProvider is the global tracer provider before anything installed one (tracing.Setup does when
// an OTLP endpoint is configured, a test may): a no-op. While it is still the provider, a request without
// a traceparent has no trace to record or to continue, and traceRequests leaves it alone — the span it
// would open records nothing, yet its context, its copy of the request and its attributes cost the send
// CPU for nothing (docs/benchmarks.md, "Keys found by their index, an asynchronous mark, no empty spans").
var untracedProvider = otel.GetTracerProvider()

// traceRequests opens a server span per request (continuing the caller's trace when it sends a W3C
// traceparent), named after the route pattern once the router has matched it, so that everything the
// request causes — its log lines, the envelope it publishes, the worker's delivery — belongs to one trace.
// Probes and metrics scrapes are not traced.
func traceRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz", "/readyz", "/metrics":
			next.ServeHTTP(w, r)
			return
		}
		if otel.GetTracerProvider() == untracedProvider && r.Header.Get("Traceparent") == "" {
			// Nothing would be recorded and there is no trace to continue: no span.
			next.ServeHTTP(w, r)
			return
		}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracing.Tracer().Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			span.SetName(r.Method + " " + rc.RoutePattern())
			span.SetAttributes(attribute.String("http.route", rc.RoutePattern()))
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(sw.status))
		}
	})
}
