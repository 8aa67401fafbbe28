package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRequestRead(t *testing.T) {
	const post = "POST /v1/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	for _, c := range []struct {
		name        string
		in          string
		whole, more bool
	}{
		{"the request line only", "POST /v1/send HTTP/1.1\r\n", false, true},
		{"headers not complete", post + "Content-Length: 2\r\n", false, true},
		{"no body", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", true, false},
		{"the body in", post + "Content-Length: 2\r\n\r\n{}", true, false},
		{"a header named in another case", post + "content-length:  2 \r\n\r\n{}", true, false},
		{"the body still coming", post + "Content-Length: 10\r\n\r\n{\"a\"", false, true},
		{"a body larger than what is read", post + "Content-Length: 4096\r\n\r\n{", false, false},
		{"more than the body: a second request", post + "Content-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\n", false, false},
		{"chunked", post + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", false, false},
		{"Expect: 100-continue", post + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n", false, false},
		{"a bad length", post + "Content-Length: -1\r\n\r\n", false, false},
	} {
		whole, more := requestRead([]byte(c.in))
		if whole != c.whole || more != c.more {
			t.Errorf("%s: whole %v, more %v; want %v, %v", c.name, whole, more, c.whole, c.more)
		}
	}
}

// The pacer lets a burst through at once, then one event per interval; turns left unused add up to a
// burst and no more.
func TestPacerSpacesEventsAfterABurst(t *testing.T) {
	now := time.Unix(1000, 0)
	var slept []time.Duration
	p := pacer{every: 10 * time.Millisecond, burst: 3, now: func() time.Time { return now },
		sleep: func(d time.Duration) { slept = append(slept, d); now = now.Add(d) }}
	for range 3 {
		p.wait()
	}
	if len(slept) != 0 {
		t.Fatalf("the burst slept %v, want no wait", slept)
	}
	p.wait()
	p.wait()
	if len(slept) != 2 || slept[0] != 10*time.Millisecond || slept[1] != 10*time.Millisecond {
		t.Fatalf("after the burst: slept %v, want 10ms twice", slept)
	}
	now = now.Add(time.Hour) // idle for long: a burst again, not an hour's worth
	slept = nil
	for range 4 {
		p.wait()
	}
	if len(slept) != 1 || slept[0] != 10*time.Millisecond {
		t.Fatalf("after an idle hour: slept %v, want the fourth event to wait 10ms", slept)
	}
}

// Whatever shape its request has, a connection past the bound reads a whole 503 and then the end of the
// connection — never a reset, which could discard the answer before the client reads it. Past the
// pacer's burst they are still all answered.
func TestShedConnectionsReadTheirAnswerWhole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	go func() {
		stopped <- ServeListener(ctx, ln, h, slog.New(slog.DiscardHandler), ServeOptions{MaxConnections: 1})
	}()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	addr := ln.Addr().String()
	// The one place, taken by an unfinished request.
	holder, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the listener counts it before the others come

	const post = "POST /v1/send HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	big := strings.Repeat("x", 64<<10)
	shapes := map[string][]string{
		"small, whole":           {post + "Content-Length: 2\r\n\r\n{}"},
		"in two parts":           {post + "Content-Length: 2\r\n\r\n", "{}"},
		"a body of 64 KiB":       {post + "Content-Length: 65536\r\n\r\n" + big},
		"chunked":                {post + "Transfer-Encoding: chunked\r\n\r\n", "2\r\n{}\r\n0\r\n\r\n"},
		"Expect: 100-continue":   {post + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n"},
		"two requests pipelined": {post + "Content-Length: 2\r\n\r\n{}" + post + "Content-Length: 2\r\n\r\n{}"},
	}
	for name, parts := range shapes {
		t.Run(name, func(t *testing.T) { shedOnce(t, addr, parts) })
	}
	// More than the pacer's burst at once: every one answered 503.
	var wg sync.WaitGroup
	for range shedBurst + 50 {
		wg.Go(func() { shedOnce(t, addr, shapes["small, whole"]) })
	}
	wg.Wait()
}

func shedOnce(t *testing.T, addr string, parts []string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i, p := range parts {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := c.Write([]byte(p)); err != nil {
			t.Errorf("write: %v", err)
			return
		}
	}
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Errorf("reading the answer: %v", err)
		return
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"unavailable"`) {
		t.Errorf("answer %d %q (%v), want 503 unavailable", res.StatusCode, body, err)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("after the answer: %v, want the end of the connection", err)
	}
}

// A memory limit below what the connection bound holds past capacity is said at start; one that holds it
// is not.
func TestALowMemoryLimitIsSaidAtStart(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, c := range []struct {
		limit int64
		conns int
		warn  bool
	}{
		{64 << 20, 1024, true},
		{128 << 20, 1024, false},
		{64 << 20, 256, false},
		{math.MaxInt64, 100_000, false},
	} {
		debug.SetMemoryLimit(c.limit)
		var out bytes.Buffer
		warnIfMemoryLimitTooLow(slog.New(slog.NewTextHandler(&out, nil)), c.conns)
		if got := strings.Contains(out.String(), "GOMEMLIMIT is below"); got != c.warn {
			t.Errorf("GOMEMLIMIT %d MiB, %d connections: warned %v, want %v (%s)", c.limit>>20, c.conns, got, c.warn, out.String())
		}
	}
}
