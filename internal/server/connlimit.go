package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/apierror"
)

var connectionsShed = promauto.NewCounter(prometheus.CounterOpts{
	Name: "herald_http_connections_shed_total",
	Help: "Connections answered 503 unavailable at once because the listener held HERALD_MAX_CONNECTIONS (their requests are also in herald_http_requests_total, route connection_limit).",
})

// connLimiter bounds the connections the HTTP server holds. net/http costs a goroutine and 8 KiB of
// buffers per connection, more while a request is served; a client that opens connections faster than
// they are answered (any client past capacity: its requests wait, so it opens more) would otherwise grow
// the process without bound, and the collector's work with it, until the whole replica stalls.
//
// Past max open connections, a new connection does not reach the server: a small goroutine reads its
// request line, answers 503 unavailable with Retry-After and "Connection: close", and closes it — a few
// hundred bytes for a millisecond. The probes and the metrics (GET /healthz, /readyz, /metrics) are let
// through past the bound, so that a replica at its bound is not restarted or taken out for it.
//
// Connections within the bound keep alive: closing them at the bound, so that idle ones would give their
// places up, made every request under overload open a connection of its own, and the accepted rate fell
// by a third. An idle connection holds its place until IdleTimeout.
type connLimiter struct {
	net.Listener
	max  int64
	open atomic.Int64

	handback chan net.Conn // probes read past the bound, for the server
	accepted chan acceptResult
	start    sync.Once
	done     chan struct{}
	stop     sync.Once
}

type acceptResult struct {
	c   net.Conn
	err error
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: int64(max), handback: make(chan net.Conn), accepted: make(chan acceptResult),
		done: make(chan struct{})}
}

// Close closes the listener and stops handing connections over.
func (l *connLimiter) Close() error {
	l.stop.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept returns the next connection for the server: one accepted within the bound, or a probe let
// through past it.
func (l *connLimiter) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case r := <-l.accepted:
		return r.c, r.err
	case c := <-l.handback:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// deliver hands a result to Accept, or drops it once the listener is closed.
func (l *connLimiter) deliver(r acceptResult) bool {
	select {
	case l.accepted <- r:
		return true
	case <-l.done:
		if r.c != nil {
			_ = r.c.Close()
		}
		return false
	}
}

func (l *connLimiter) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !l.deliver(acceptResult{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // the server decides: it retries temporary errors and returns on the others
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			go l.shed(c)
			continue
		}
		if !l.deliver(acceptResult{c: c}) {
			return
		}
	}
}

// closed counts a connection of the server's as gone (its ConnState hook: closed or hijacked).
func (l *connLimiter) closed() { l.open.Add(-1) }

// shedTimeout bounds how long a shed connection may take to send its request line and to go away.
const shedTimeout = 2 * time.Second

// shed answers a connection past the bound: 503 for anything but a probe, which is handed to the server.
func (l *connLimiter) shed(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(shedTimeout))
	var buf [512]byte
	n := 0
	for n < len(buf) && !bytes.Contains(buf[:n], []byte("\r\n")) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	if probe(buf[:n]) {
		l.open.Add(1)
		_ = c.SetDeadline(time.Time{})
		select {
		case l.handback <- &prefixConn{Conn: c, prefix: append([]byte(nil), buf[:n]...)}:
			return
		case <-l.done:
			l.open.Add(-1)
			_ = c.Close()
			return
		}
	}
	connectionsShed.Inc()
	// Counted with the requests too, so that the error-rate alerts and dashboards see these 503s.
	method, _, _ := bytes.Cut(buf[:n], []byte(" "))
	httpRequests.WithLabelValues("connection_limit", MethodLabel(string(method)), "503").Inc()
	_, _ = c.Write(overloadedResponse())
	// Half-close and read what the client still sends until it closes its side, so that closing does
	// not reset the connection (which may discard the answer before the client has read it).
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10))
	}
	_ = c.Close()
}

// probe reports whether a request line is GET /healthz, /readyz or /metrics.
func probe(line []byte) bool {
	for _, p := range [...]string{"GET /healthz ", "GET /readyz ", "GET /metrics ", "GET /healthz?", "GET /readyz?", "GET /metrics?"} {
		if bytes.HasPrefix(line, []byte(p)) {
			return true
		}
	}
	return false
}

// overloadedResponse is apierror.Overloaded as a whole HTTP/1.1 answer, with a request id of its own.
func overloadedResponse() []byte {
	rid := newRequestID()
	e := apierror.Overloaded
	body, _ := json.Marshal(apierror.Body{Error: e.Code, Message: e.Message, RequestID: rid})
	body = append(body, '\n')
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n" +
		"Retry-After: " + strconv.Itoa(int(max(time.Second, e.RetryAfter)/time.Second)) + "\r\nX-Request-Id: " + rid +
		"\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body))
}

// prefixConn is a connection whose first bytes were read already.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// trackConns is the server's ConnState hook for l.
func (l *connLimiter) trackConns(_ net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		l.closed()
	}
}
