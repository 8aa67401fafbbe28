package server

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/metriclabel"
)

var connectionsShed = promauto.NewCounter(prometheus.CounterOpts{
	Name: "herald_http_connections_shed_total",
	Help: "Connections answered 503 unavailable at once because the listener held HERALD_MAX_CONNECTIONS (their requests are also in herald_http_requests_total, route connection_limit).",
})

var idleConnectionsClosed = promauto.NewCounter(prometheus.CounterOpts{
	Name: "herald_http_idle_connections_closed_total",
	Help: "Keep-alive connections idle for a second or more closed at HERALD_MAX_CONNECTIONS so that a new connection could take their place instead of being shed.",
})

// connLimiter bounds the connections the HTTP server holds. net/http costs a goroutine and 8 KiB of
// buffers per connection, more while a request is served; a client that opens connections faster than
// they are answered (any client past capacity: its requests wait, so it opens more) would otherwise grow
// the process without bound, and the collector's work with it, until the whole replica stalls.
//
// Past max open connections, a new connection does not reach the server: a small goroutine reads its
// request, answers 503 unavailable with Retry-After and "Connection: close", and closes it — a few hundred
// bytes for a millisecond. These connections are paced (shedRate): those that come faster wait in the
// kernel's accept queue for their turn. The probes and the metrics (GET /healthz, /readyz, /metrics) are
// let through past the bound, so that a replica at its bound is not restarted or taken out for it.
//
// Connections within the bound keep alive: closing them at the bound, so that idle ones would give their
// places up, made every request under overload open a connection of its own, and the accepted rate fell
// (docs/benchmarks.md, "With the admission bounds"). But a connection idle for idleEvictAfter gives its
// place up to a new connection that would be shed: otherwise idle keep-alive connections (a client's pool
// at rest, or connections opened only to hold places) would keep every new client out until IdleTimeout.
type connLimiter struct {
	net.Listener
	max  int64
	open atomic.Int64

	mu     sync.Mutex
	idle   list.List                  // of idleConn: the server's connections between two requests, the longest idle first
	idleOf map[net.Conn]*list.Element // their places in idle

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

func newConnLimiter(ln net.Listener, maxConns int) *connLimiter {
	return &connLimiter{Listener: ln, max: int64(maxConns), idleOf: map[net.Conn]*list.Element{}, handback: make(chan net.Conn),
		accepted: make(chan acceptResult), done: make(chan struct{})}
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
	pace := pacer{every: time.Second / shedRate, burst: shedBurst, now: time.Now, sleep: time.Sleep}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if !l.deliver(acceptResult{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
			continue // the server decides: it retries temporary errors and returns on the others
		}
		if l.open.Add(1) > l.max && !l.closeLongestIdle() {
			l.open.Add(-1)
			pace.wait()
			go l.shed(c)
			continue
		}
		if !l.deliver(acceptResult{c: c}) {
			return
		}
	}
}

// shedRate and shedBurst pace the connections shed past the bound: a burst of shedBurst is answered at
// once, then one every 1/shedRate s, while the connections that come faster wait in the kernel's accept
// queue (which costs nothing) until their turn.
//
// Why: a connection shed costs far more than a request shed on a kept connection (a TCP handshake and
// teardown on both sides, an accept, a goroutine), and the client a 503 closes a connection on opens a new
// one at once. In the benchmark at twice the capacity, unpaced, the accepted rate fell as the connections
// shed a second rose, and varied from run to run with them. Paced, their CPU is bounded and the rest of the
// overload is shed in-band, on kept connections, and the accepted rate holds near capacity. The price is
// the wait of a connection queued behind others: the accept queue holds at most net.core.somaxconn (4,096
// by default), so 2 s at worst — the chart's probe timeout, and a probe needs three failures in a row to
// count. docs/benchmarks.md, "Overload: shedding at the connection bound, paced", has the figures.
const (
	shedRate  = 2000
	shedBurst = 64
)

// pacer spaces events at least every apart, after a burst.
type pacer struct {
	every time.Duration
	burst int
	next  time.Time
	now   func() time.Time
	sleep func(time.Duration)
}

// wait returns when the next event may happen.
func (p *pacer) wait() {
	now := p.now()
	if floor := now.Add(-time.Duration(p.burst-1) * p.every); p.next.Before(floor) {
		p.next = floor // unused turns add up to a burst, no more
	}
	if d := p.next.Sub(now); d > 0 {
		p.sleep(d)
	}
	p.next = p.next.Add(p.every)
}

// idleEvictAfter is how long a connection must have waited for its next request before a new connection
// may take its place at the bound: far longer than a client in use leaves a kept connection between two
// requests, so that under overload the bound still keeps the connections in use alive and sheds the new
// ones. The place changes hands at once; the count falls back once the server has seen the close.
const idleEvictAfter = time.Second

// idleConn is a connection of the server's between two requests, since when.
type idleConn struct {
	c     net.Conn
	since time.Time
}

// closeLongestIdle closes the connection idle the longest if it has been idle for idleEvictAfter, and
// reports whether it did. A connection serving a request is never idle here. A request that arrives just
// as its connection is closed fails as it would at IdleTimeout: the race of every keep-alive close,
// which clients retry (RFC 9112 §9.3.1).
func (l *connLimiter) closeLongestIdle() bool {
	l.mu.Lock()
	e := l.idle.Front()
	if e == nil || time.Since(e.Value.(idleConn).since) < idleEvictAfter {
		l.mu.Unlock()
		return false
	}
	ic := l.idle.Remove(e).(idleConn)
	delete(l.idleOf, ic.c)
	l.mu.Unlock()
	_ = ic.c.Close()
	idleConnectionsClosed.Inc()
	return true
}

// setIdle records whether a connection of the server's is between two requests.
func (l *connLimiter) setIdle(c net.Conn, idle bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.idleOf[c]; ok {
		l.idle.Remove(e)
		delete(l.idleOf, c)
	}
	if idle {
		l.idleOf[c] = l.idle.PushBack(idleConn{c: c, since: time.Now()})
	}
}

// closed counts a connection of the server's as gone (its ConnState hook: closed or hijacked).
func (l *connLimiter) closed() { l.open.Add(-1) }

// shedTimeout bounds how long a shed connection may take to send its request and to go away.
const shedTimeout = 2 * time.Second

// shedRead is the most of a shed connection's request that is read: a send is a few hundred bytes.
const shedRead = 2048

// shed answers a connection past the bound: 503 for anything but a probe, which is handed to the server.
//
// It reads the request whole when it is small and says how long it is (a send's is a few hundred bytes),
// answers, and closes at once: nothing unread is left for the kernel to reset the connection over, so the
// client reads its answer, and the goroutine lives as long as one read. Otherwise (a large or chunked body,
// Expect: 100-continue, a request still coming) it half-closes after the answer and reads what the client
// still sends until the client closes its side. That wait is on the client, and a starved client closes
// late: in a benchmark at twice the capacity, on a machine the load generator shares, waiting so for
// every shed connection let goroutines pile up until the ingress reached its memory budget and spent its
// CPU collecting (docs/benchmarks.md, "Overload: shedding at the connection bound, paced").
func (l *connLimiter) shed(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(shedTimeout))
	var buf [shedRead]byte
	n := 0
	whole := false
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		var more bool
		whole, more = requestRead(buf[:n])
		if err != nil || !more {
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
	httpRequests.WithLabelValues("connection_limit", metriclabel.Method(string(method)), "503").Inc()
	_, _ = c.Write(overloadedResponse())
	if !whole {
		// Half-close and read what the client still sends until it closes its side, so that closing does
		// not reset the connection (which may discard the answer before the client has read it).
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			for {
				if _, err := c.Read(buf[:]); err != nil {
					break
				}
			}
		}
	}
	_ = c.Close()
}

// requestRead reports whether b holds one whole request — its header block and the body its
// Content-Length declares, nothing after — and whether more of it is worth waiting for: the header block
// is not complete yet, or the declared body is still coming and fits what shed reads. A request with a
// Transfer-Encoding or an Expect header is never whole here (shed drains it instead).
func requestRead(b []byte) (whole, more bool) {
	head, body, ok := bytes.Cut(b, []byte("\r\n\r\n"))
	if !ok {
		return false, true
	}
	length := 0
	_, fields, _ := bytes.Cut(head, []byte("\r\n"))
	for len(fields) > 0 {
		var line []byte
		line, fields, _ = bytes.Cut(fields, []byte("\r\n"))
		name, value, _ := bytes.Cut(line, []byte(":"))
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(bytes.TrimSpace(value)))
			if err != nil || n < 0 {
				return false, false
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")), bytes.EqualFold(name, []byte("Expect")):
			return false, false
		}
	}
	return len(body) == length, len(body) < length && len(head)+4+length <= shedRead
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
func (l *connLimiter) trackConns(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateIdle:
		l.setIdle(c, true)
	case http.StateActive:
		l.setIdle(c, false)
	case http.StateClosed, http.StateHijacked:
		l.setIdle(c, false)
		l.closed()
	}
}

// connectionMemory is what the process holds at its connection bound, past capacity, by connection and
// besides: net/http's buffers (8 KiB), the connection's goroutine and, while a request is served, a second
// one that watches the connection, and the request itself, over what the ingress holds at capacity. The
// measured figures (on the ingress at 1,024 connections and twice its capacity) are in docs/benchmarks.md,
// "Overload: shedding at the connection bound, paced"; these are rounded up, so that the collector has room
// to work in.
const (
	connectionMemory = 64 << 10
	baseMemory       = 32 << 20
)

// warnIfMemoryLimitTooLow says at start when GOMEMLIMIT is below what max connections hold past capacity.
// The runtime then collects all the time, with up to half the CPU, just when the replica needs it most: in
// the benchmark at twice the capacity, the budget below that accepted less than the one above it, and
// before shedding was paced some runs collapsed (docs/benchmarks.md, "Overload: shedding at the connection
// bound, paced").
func warnIfMemoryLimitTooLow(logger *slog.Logger, maxConns int) {
	limit := debug.SetMemoryLimit(-1)
	need := int64(baseMemory) + int64(maxConns)*connectionMemory
	if limit < need {
		logger.Warn("GOMEMLIMIT is below what HERALD_MAX_CONNECTIONS connections hold past capacity: the collector will take the CPU then; raise the memory limit (or lower HERALD_MAX_CONNECTIONS)",
			"gomemlimit_mib", limit>>20, "max_connections", maxConns, "needs_mib", need>>20)
	}
}
