package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// keptConn is a client's keep-alive connection, spoken to one request at a time.
type keptConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialKept(t *testing.T, addr string) *keptConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &keptConn{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes a request for path.
func (k *keptConn) send(path string) {
	k.t.Helper()
	if _, err := k.c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		k.t.Fatal(err)
	}
}

// answer reads the answer's status, or the error that ended the connection.
func (k *keptConn) answer() (int, error) {
	_ = k.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

func (k *keptConn) get(path string) int {
	k.t.Helper()
	k.send(path)
	status, err := k.answer()
	if err != nil {
		k.t.Fatalf("GET %s: %v", path, err)
	}
	return status
}

// Idle keep-alive connections must not keep new clients out for the idle timeout: at the bound, a new
// connection takes the place of the one idle the longest, once it has been idle for idleEvictAfter (a
// client in use reuses its connections far sooner). A connection serving a request, or idle only briefly,
// keeps its place, and the new one is shed as before.
func TestANewConnectionTakesTheLongestIdlePlace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() {
		stopped <- ServeListener(ctx, ln, h, slog.New(slog.DiscardHandler), ServeOptions{MaxConnections: 3})
	}()
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failed test's busy request
		}
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	addr := ln.Addr().String()

	old := dialKept(t, addr)
	if status := old.get("/"); status != 200 {
		t.Fatalf("the first connection: %d", status)
	}
	busy := dialKept(t, addr)
	busy.send("/slow") // served until release: active all along
	time.Sleep(idleEvictAfter + 100*time.Millisecond)
	recent := dialKept(t, addr)
	if status := recent.get("/"); status != 200 {
		t.Fatalf("the third connection: %d", status)
	}

	// The bound is full: one idle for long, one serving, one idle for a moment. A new client is served in
	// place of the one idle for long, which is closed.
	newcomer := dialKept(t, addr)
	if status := newcomer.get("/"); status != 200 {
		t.Fatalf("a new client at the bound of idle connections: %d, want 200", status)
	}
	old.send("/")
	if status, err := old.answer(); err == nil {
		t.Errorf("the connection idle the longest still answers (%d), want it closed", status)
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !isReset(err) {
		t.Errorf("the connection idle the longest: %v, want its end", err)
	}

	// Now nothing has been idle for long: the next new client is shed, and no connection is closed for it.
	if status := dialKept(t, addr).get("/"); status != http.StatusServiceUnavailable {
		t.Errorf("a new client when no connection has been idle for long: %d, want 503", status)
	}
	close(release)
	if status, err := busy.answer(); err != nil || status != 200 {
		t.Errorf("the connection that was serving: %d %v, want its 200", status, err)
	}
	for name, k := range map[string]*keptConn{"the briefly idle connection": recent, "the newcomer": newcomer, "the busy one": busy} {
		if status := k.get("/"); status != 200 {
			t.Errorf("%s afterwards: %d, want 200", name, status)
		}
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}
