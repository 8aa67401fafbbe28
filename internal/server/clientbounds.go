package server

import (
	"log/slog"
	"net/http"
	"time"
)

// ClientBounds bound what one client can hold of a server: a connection that trickles its headers (slowloris),
// a body that never ends, an answer it never reads, a keep-alive connection it never uses again, headers
// and URLs of any size. Past them the connection is closed, or the request refused with a 4xx (431 for
// headers and URLs over MaxHeaderBytes), so that slow or hostile clients cost a bounded number of
// goroutines and bytes, and never delay the others.
type ClientBounds struct {
	ReadHeaderTimeout time.Duration // from the connection's first byte to the end of the headers
	ReadTimeout       time.Duration // to the end of the body
	WriteTimeout      time.Duration // to the end of the answer; 0: none (long polls, streamed profiles)
	IdleTimeout       time.Duration // a keep-alive connection between two requests
	MaxHeaderBytes    int           // request line and headers together
}

// DefaultClientBounds apply to every HTTP server Herald runs: ingress, webhook, worker and dev through
// ServeListener, herald sim and the pprof listener through NewHTTPServer. The request line and headers of
// the API and the webhook are well under 32 KiB; bodies are capped per route (64 KiB for /v1, 1 MiB for
// updates). IdleTimeout stays above the idle timeouts of common load balancers (60 s), so that a balancer
// never reuses a connection Herald has just closed.
var DefaultClientBounds = ClientBounds{
	ReadHeaderTimeout: 5 * time.Second,
	ReadTimeout:       15 * time.Second,
	WriteTimeout:      30 * time.Second,
	IdleTimeout:       120 * time.Second,
	MaxHeaderBytes:    32 << 10,
}

// NewHTTPServer returns an http.Server for h under the limits, logging the server's own errors (TLS
// handshakes, accept errors) as warnings.
func NewHTTPServer(h http.Handler, logger *slog.Logger, l ClientBounds) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
