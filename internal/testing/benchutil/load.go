package benchutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator of the HTTP benchmarks. It speaks HTTP/1.1 over a fixed pool of persistent
// connections with requests rendered in advance, because Go's net/http client costs several times the CPU
// of the server it measures, and every benchmark here shares two cores between the generator and the
// system under test.

// Request renders the i-th request's bytes (a complete HTTP/1.1 request with Content-Length).
type Request func(i int) []byte

// PostJSON renders a POST with a JSON body and extra headers ("Name: value" lines without CRLF).
func PostJSON(host, path string, body []byte, headers ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, host, len(body))
	for _, h := range headers {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// Result is what one phase of load measured.
type Result struct {
	Duration time.Duration
	Codes    map[int]int64 // answers by HTTP status; 0 counts transport errors
	// Latency of the 2xx answers: from the request's intended start in an open loop (so a stall of the
	// server is not hidden by the generator waiting for it), from its actual start in a closed loop.
	Latency Latencies
	// LatencyAll is the latency of every answer, whatever its status.
	LatencyAll Latencies
	// Conns is how many connections the open loop ended up with.
	Conns int
}

// OK is the number of 2xx answers.
func (r Result) OK() int64 {
	var n int64
	for c, v := range r.Codes {
		if c >= 200 && c < 300 {
			n += v
		}
	}
	return n
}

// Rate is 2xx answers per second.
func (r Result) Rate() float64 { return float64(r.OK()) / r.Duration.Seconds() }

// CodesString renders the answers by status, e.g. "202: 90000, 503: 12".
func (r Result) CodesString() string {
	codes := make([]int, 0, len(r.Codes))
	for c := range r.Codes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var b bytes.Buffer
	for i, c := range codes {
		if i > 0 {
			b.WriteString(", ")
		}
		name := strconv.Itoa(c)
		if c == 0 {
			name = "transport error"
		}
		fmt.Fprintf(&b, "%s: %d", name, r.Codes[c])
	}
	return b.String()
}

type shot struct {
	i        int
	intended time.Time
}

type recorder struct {
	mu    sync.Mutex
	codes map[int]int64
	ok    Latencies
	all   Latencies
}

func (r *recorder) add(code int, lat time.Duration) {
	r.mu.Lock()
	r.codes[code]++
	if code >= 200 && code < 300 {
		r.ok = append(r.ok, lat)
	}
	r.all = append(r.all, lat)
	r.mu.Unlock()
}

// ClosedLoop runs conns connections, each sending its next request as soon as the previous one is
// answered, for d.
func ClosedLoop(addr string, conns int, d time.Duration, req Request) Result {
	rec := &recorder{codes: map[int]int64{}}
	var seq atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c := &conn{addr: addr}
			defer c.close()
			for time.Now().Before(deadline) {
				i := int(seq.Add(1))
				t0 := time.Now()
				code := c.do(req(i))
				rec.add(code, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return Result{Duration: d, Codes: rec.codes, Latency: rec.ok, LatencyAll: rec.all}
}

// OpenLoop sends rate requests per second for d, whatever the answers do. It keeps conns connections and
// opens more, up to maxConns, when every one is busy, so that the server — not the generator — is where a
// request waits or is refused; past maxConns a request waits for a free connection. Latency counts from
// each request's intended start. The first conns connections are opened before the clock starts, as a
// client with a connection pool keeps them: the phase measures serving requests, not a burst of hundreds
// of TCP handshakes (and the server's new connection goroutines) in its first milliseconds.
func OpenLoop(addr string, conns, maxConns, rate int, d time.Duration, req Request) Result {
	rec := &recorder{codes: map[int]int64{}}
	shots := make(chan shot)
	var wg, dialled sync.WaitGroup
	worker := func(predial bool) {
		c := &conn{addr: addr}
		defer c.close()
		if predial {
			c.dial()
			dialled.Done()
		}
		for s := range shots {
			code := c.do(req(s.i))
			rec.add(code, time.Since(s.intended))
		}
	}
	workers := 0
	dialled.Add(conns)
	for ; workers < conns; workers++ {
		wg.Go(func() { worker(true) })
	}
	dialled.Wait()
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	total := int(d / interval)
	for i := range total {
		intended := start.Add(time.Duration(i) * interval)
		if w := time.Until(intended); w > 0 {
			time.Sleep(w)
		}
		s := shot{i: i, intended: intended}
		select {
		case shots <- s:
			continue
		default:
		}
		if workers < maxConns {
			workers++
			wg.Go(func() { worker(false) })
		}
		shots <- s
	}
	close(shots)
	wg.Wait()
	return Result{Duration: d, Codes: rec.codes, Latency: rec.ok, LatencyAll: rec.all, Conns: workers}
}

// conn is one persistent HTTP/1.1 connection.
type conn struct {
	addr string
	c    net.Conn
	r    *bufio.Reader
}

func (c *conn) close() {
	if c.c != nil {
		_ = c.c.Close()
		c.c = nil
	}
}

// do sends one request and returns the status (0 on a transport error, after which the connection is
// dialled again).
func (c *conn) do(req []byte) int {
	for attempt := 0; attempt < 2; attempt++ {
		if c.c == nil && !c.dial() {
			return 0
		}
		_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.c.Write(req); err != nil {
			c.close()
			continue // a kept-alive connection the server closed: dial again once
		}
		code, keep, err := readResponse(c.r)
		if err != nil {
			c.close()
			return 0
		}
		if !keep {
			c.close()
		}
		return code
	}
	return 0
}

var errMalformed = errors.New("malformed response")

// dial opens the connection; false when it cannot (the request then counts as a transport error).
func (c *conn) dial() bool {
	nc, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
	if err != nil {
		return false
	}
	c.c, c.r = nc, bufio.NewReaderSize(nc, 4096)
	return true
}

// readResponse reads one response: the status, whether the connection stays open, and the body (skipped).
func readResponse(r *bufio.Reader) (code int, keepAlive bool, err error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return 0, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, false, errMalformed
	}
	code, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, false, errMalformed
	}
	length, keepAlive := -1, true
	for {
		h, err := r.ReadSlice('\n')
		if err != nil {
			return 0, false, err
		}
		if len(h) <= 2 {
			break
		}
		name, value, _ := bytes.Cut(bytes.TrimRight(h, "\r\n"), []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, false, errMalformed
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keepAlive = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, false, errors.New("chunked responses are not supported by the load generator")
		}
	}
	if length < 0 {
		return 0, false, errMalformed
	}
	if _, err := r.Discard(length); err != nil {
		return 0, false, err
	}
	return code, keepAlive, nil
}

// Drain reads and discards everything from rd (for tests of the generator).
func Drain(rd io.Reader) { _, _ = io.Copy(io.Discard, rd) }
