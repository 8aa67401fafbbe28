// Package server is the HTTP plumbing every Herald process shares: one listen address serving the
// component's routes plus /healthz, /readyz and /metrics; request ids, access logs and request metrics;
// timeouts; graceful shutdown that finishes in-flight requests.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/metriclabel"
)

var (
	httpRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_http_requests_total",
		Help: "HTTP requests by route pattern, method and status code.",
	}, []string{"route", "method", "status"})
	httpDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_http_request_duration_seconds",
		Help:    "HTTP request latency by route pattern.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"route", "method"})
)

// ReadyCheck reports whether a dependency is reachable; /readyz fails while any check fails.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// NewRouter returns a router with the shared middleware and the health, readiness and metrics routes.
// Components mount their routes on it.
func NewRouter(logger *slog.Logger, checks ...ReadyCheck) chi.Router {
	r := chi.NewRouter()
	r.Use(traceRequests, requestContext(logger))
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		apierror.Write(w, apierror.NotFound.With("no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		if allow := allowedMethods(r, req); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
		}
		apierror.Write(w, apierror.MethodNotAllowed)
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 3*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "application/json")
		for _, c := range checks {
			if err := c.Check(ctx); err != nil {
				logger.Warn("not ready", "dependency", c.Name, "err", err)
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprintf(w, `{"status":"unavailable","dependency":%q}`+"\n", c.Name)
				return
			}
		}
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	r.Method(http.MethodGet, "/metrics", promhttp.Handler())
	return r
}

// routeMethods are the methods a route can be registered for, in the order Allow lists them.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions}

// allowedMethods are the methods r routes for the request's path: the Allow header of a 405 (RFC 9110
// §15.5.6). chi knows them but hands them only to its default 405 handler, not to a custom one.
func allowedMethods(r chi.Routes, req *http.Request) []string {
	path := req.URL.RawPath
	if path == "" {
		path = req.URL.Path
	}
	var allow []string
	for _, m := range routeMethods {
		if r.Match(chi.NewRouteContext(), m, path) {
			allow = append(allow, m)
		}
	}
	return allow
}

type ctxKey struct{}

// RequestID returns the request id of a request context ("" outside a request).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// newRequestID mints a request id: 16 hex digits, random.
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestContext assigns a request id (a sane incoming X-Request-Id is kept), recovers panics as 500
// internal_error, records metrics by route pattern and writes one access log line. It never logs bodies or
// headers: they carry keys, tokens and phone numbers.
func requestContext(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			id := r.Header.Get("X-Request-Id")
			if !requestIDPattern.MatchString(id) {
				id = newRequestID()
			}
			w.Header().Set("X-Request-Id", id)
			r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, id))
			sw := &statusWriter{ResponseWriter: w}
			defer func() {
				if p := recover(); p != nil {
					//nolint:errorlint // a panic value, not a returned error: net/http panics with this very value
					if p == http.ErrAbortHandler {
						panic(p)
					}
					logger.Error("panic serving request", "request_id", id, "panic", fmt.Sprint(p))
					if sw.status == 0 {
						apierror.Write(sw, apierror.Internal)
					}
				}
				route := "unmatched"
				if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
					route = rc.RoutePattern()
				}
				if sw.status == 0 {
					sw.status = http.StatusOK
				}
				elapsed := time.Since(start)
				method := metriclabel.Method(r.Method)
				httpRequests.WithLabelValues(route, method, strconv.Itoa(sw.status)).Inc()
				httpDuration.WithLabelValues(route, method).Observe(elapsed.Seconds())
				if route != "/healthz" && route != "/readyz" && route != "/metrics" {
					logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
						slog.String("request_id", id), slog.String("method", method), slog.String("route", route),
						slog.Int("status", sw.status), slog.Duration("duration", elapsed))
				}
			}()
			next.ServeHTTP(sw, r)
		})
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ShutdownGrace is how long in-flight requests get to finish after SIGTERM.
const ShutdownGrace = 20 * time.Second

// ServeOptions tune how a server stops.
type ServeOptions struct {
	// ShutdownDelay: once ctx ends, keep serving for this long while /readyz answers 503 and every answer
	// closes its connection, so that load balancers stop routing to this replica (and clients reconnect
	// elsewhere) before its listener closes. 0 stops accepting at once.
	ShutdownDelay time.Duration
	// MetricsAddr (HERALD_METRICS_ADDR), when set, serves /metrics on an address of its own, and the main
	// listener answers 404 for it: an Ingress that publishes the API port never publishes the metrics.
	// Empty: /metrics is on the main listener.
	MetricsAddr string
	// MaxConnections (HERALD_MAX_CONNECTIONS), when above 0, bounds the connections the server holds, and
	// so the memory they hold: past it a new connection is answered 503 unavailable with Retry-After at
	// once, without reaching the server (the probes excepted; connlimit.go).
	MaxConnections int
}

// Serve listens on addr and serves h until ctx is done, then stops: see ServeListener.
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, opts ...ServeOptions) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("while listening on %s: %w", addr, err)
	}
	return ServeListener(ctx, ln, h, logger, opts...)
}

// ServeListener serves h on ln until ctx is done. Then /readyz answers 503 at once; after the
// ShutdownDelay the listener closes and in-flight requests finish (up to ShutdownGrace).
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler, logger *slog.Logger, opts ...ServeOptions) error {
	var o ServeOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	var draining atomic.Bool
	var limiter *connLimiter
	if o.MaxConnections > 0 {
		limiter = newConnLimiter(ln, o.MaxConnections)
		ln = limiter
		warnIfMemoryLimitTooLow(logger, o.MaxConnections)
	}
	inner := h
	var metrics *http.Server
	if o.MetricsAddr != "" {
		mln, err := net.Listen("tcp", o.MetricsAddr)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("while listening on %s for metrics: %w", o.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.Handler())
		metrics = NewHTTPServer(mux, logger, DefaultClientBounds)
		go func() { _ = metrics.Serve(mln) }()
		logger.Info("serving metrics", "addr", mln.Addr().String())
		defer func() { _ = metrics.Close() }()
	}
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if metrics != nil && r.URL.Path == "/metrics" {
			apierror.Write(w, apierror.NotFound.With("no such route"))
			return
		}
		if draining.Load() {
			w.Header().Set("Connection", "close")
			if r.URL.Path == "/readyz" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"status":"shutting down"}` + "\n"))
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	srv := NewHTTPServer(h, logger, DefaultClientBounds)
	if limiter != nil {
		srv.ConnState = limiter.trackConns
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("while serving HTTP: %w", err)
	case <-ctx.Done():
	}
	draining.Store(true)
	if o.ShutdownDelay > 0 {
		logger.Info("shutting down: not ready, still serving", "delay", o.ShutdownDelay)
		time.Sleep(o.ShutdownDelay)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("while shutting down HTTP: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
