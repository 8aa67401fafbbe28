package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/server"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func TestReadinessFollowsDependencies(t *testing.T) {
	var down error
	r := server.NewRouter(discard(), server.ReadyCheck{Name: "postgresql", Check: func(context.Context) error { return down }})
	srv := httptest.NewServer(r)
	defer srv.Close()
	if res, _ := get(t, srv.URL+"/readyz"); res.StatusCode != 200 {
		t.Errorf("ready with a healthy dependency: %d", res.StatusCode)
	}
	down = errors.New("connection refused")
	res, body := get(t, srv.URL+"/readyz")
	if res.StatusCode != 503 || !strings.Contains(body, "postgresql") {
		t.Errorf("not ready must be 503 naming the dependency: %d %s", res.StatusCode, body)
	}
	if res, _ := get(t, srv.URL+"/healthz"); res.StatusCode != 200 {
		t.Errorf("liveness must not depend on dependencies: %d", res.StatusCode)
	}
}

func TestRequestIDsMetricsAndPanics(t *testing.T) {
	r := server.NewRouter(discard())
	r.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("bug") })
	r.Get("/teapot/{id}", func(w http.ResponseWriter, req *http.Request) {
		if server.RequestID(req.Context()) == "" {
			t.Error("no request id in the handler's context")
		}
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	res, _ := get(t, srv.URL+"/teapot/1", "X-Request-Id", "abc-123")
	if res.Header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("a sane incoming request id is kept: %q", res.Header.Get("X-Request-Id"))
	}
	res, _ = get(t, srv.URL+"/teapot/2", "X-Request-Id", "bad id\twith spaces")
	if id := res.Header.Get("X-Request-Id"); id == "" || strings.Contains(id, " ") {
		t.Errorf("an unsafe request id must be replaced: %q", id)
	}
	res, body := get(t, srv.URL+"/boom")
	if res.StatusCode != 500 || !strings.Contains(body, `"error":"internal_error"`) || strings.Contains(body, "bug") {
		t.Errorf("a panic must be a generic 500 JSON error: %d %s", res.StatusCode, body)
	}
	_, metrics := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`herald_http_requests_total{method="GET",route="/teapot/{id}",status="418"} 2`,
		`herald_http_requests_total{method="GET",route="/boom",status="500"} 1`,
		`herald_http_request_duration_seconds_bucket{method="GET",route="/teapot/{id}"`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestShutdownFinishesInFlightRequests(t *testing.T) {
	r := server.NewRouter(discard())
	started := make(chan struct{})
	r.Get("/slow", func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		_, _ = w.Write([]byte("done"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.ServeListener(ctx, ln, r, discard()) }()
	result := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		result <- string(b)
	}()
	<-started
	cancel() // SIGTERM
	if got := <-result; got != "done" {
		t.Errorf("the in-flight request got %q, want it finished", got)
	}
	if err := <-served; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("the server still accepts requests after shutdown")
	}
}

// On SIGTERM with a shutdown delay, the replica reports itself not ready at once but keeps serving for the
// delay, so the load balancer stops routing to it before its listener closes; requests made meanwhile
// still succeed (and are told to close their connection).
func TestShutdownDelayKeepsServingWhileNotReady(t *testing.T) {
	r := server.NewRouter(discard())
	r.Get("/work", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- server.ServeListener(ctx, ln, r, discard(), server.ServeOptions{ShutdownDelay: 500 * time.Millisecond})
	}()
	get := func(path string) (int, bool) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		return res.StatusCode, res.Close
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM = %d, want 200", code)
	}
	cancel() // SIGTERM
	deadline := time.Now().Add(2 * time.Second)
	for {
		code, _ := get("/readyz")
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz still 200 after SIGTERM")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, closing := get("/work"); code != http.StatusOK || !closing {
		t.Errorf("a request during the shutdown delay got %d (connection closing: %v), want 200 and close", code, closing)
	}
	if err := <-served; err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// With MaxConnections, a connection past the bound is answered 503 unavailable with Retry-After at once
// and closed, without reaching the handler; the probes pass; connections within the bound keep alive; once
// places come free, new connections are served again.
func TestMaxConnectionsShedsConnectionsPastTheBound(t *testing.T) {
	r := server.NewRouter(discard())
	var served atomic.Int64
	r.Get("/work", func(w http.ResponseWriter, _ *http.Request) { served.Add(1); _, _ = w.Write([]byte("ok")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- server.ServeListener(ctx, ln, r, discard(), server.ServeOptions{MaxConnections: 2}) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()

	type conn struct {
		c net.Conn
		r *bufio.Reader
	}
	dial := func() *conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return &conn{c, bufio.NewReader(c)}
	}
	send := func(c *conn, s string) {
		if _, err := c.c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(c *conn) (*http.Response, string) {
		t.Helper()
		res, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	closed := func(c *conn) bool {
		_, err := c.r.ReadByte()
		return errors.Is(err, io.EOF)
	}
	const get = "GET /work HTTP/1.1\r\nHost: x\r\n\r\n"

	a := dial()
	send(a, get)
	if res, _ := read(a); res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("within the bound: %d, closing %v; want 200 on a kept connection", res.StatusCode, res.Close)
	}
	// b takes the second place: its request is not finished.
	b := dial()
	send(b, "GET /work HTTP/1.1\r\nHost: x\r\n")
	// c comes past the bound (the listener accepts in order: b's place is taken first).
	c := dial()
	send(c, get)
	res, body := read(c)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" || !res.Close {
		t.Fatalf("past the bound: %d, Retry-After %q, closing %v; want 503, 1, close", res.StatusCode, res.Header.Get("Retry-After"), res.Close)
	}
	var e struct {
		Error     string `json:"error"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("past the bound: body %q (%v), Content-Type %q", body, err, res.Header.Get("Content-Type"))
	}
	if e.Error != "unavailable" || e.Message == "" || e.RequestID == "" || e.RequestID != res.Header.Get("X-Request-Id") {
		t.Errorf("past the bound: body %s, X-Request-Id %q; want the unavailable error with the request id", body, res.Header.Get("X-Request-Id"))
	}
	if !closed(c) {
		t.Error("past the bound: the connection stays open")
	}
	if served.Load() != 1 {
		t.Errorf("the handler served %d requests, want 1: a connection past the bound must not reach it", served.Load())
	}
	// The probes pass past the bound.
	p := dial()
	send(p, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, _ := read(p); res.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz past the bound: %d, want 200", res.StatusCode)
	}
	// At the bound, connections within it keep alive.
	send(a, get)
	if res, _ := read(a); res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("at the bound: %d, closing %v; want 200 on a kept connection", res.StatusCode, res.Close)
	}
	send(b, "\r\n")
	if res, _ := read(b); res.StatusCode != http.StatusOK {
		t.Fatalf("the unfinished request: %d, want 200", res.StatusCode)
	}
	_ = a.c.Close() // places come free
	_ = p.c.Close()
	// Places are free again: a new connection is served.
	deadline := time.Now().Add(2 * time.Second)
	for {
		d := dial()
		send(d, get)
		res, _ := read(d)
		if res.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after places came free: %d, want 200", res.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
