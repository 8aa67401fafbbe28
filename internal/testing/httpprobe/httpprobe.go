// Package httpprobe is for tests: it plays the clients an HTTP server must survive — connections that
// trickle their request a byte at a time (slowloris), and requests with oversized headers or URLs — against
// a real listener, so that every server Herald runs (ingress, webhook, worker, dev, sim) is checked the same
// way.
package httpprobe

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Trickle is a set of connections that send a request one byte at a time and never finish its headers.
type Trickle struct {
	conns  []net.Conn
	closed atomic.Int64
	wg     sync.WaitGroup
	stop   chan struct{}
}

// StartTrickle opens n connections to addr; each sends "GET / HTTP/1.1\r\nX-Slow: " and then one byte every
// interval, forever, until the server closes it or Stop is called.
func StartTrickle(t testing.TB, addr string, n int, interval time.Duration) *Trickle {
	t.Helper()
	tr := &Trickle{stop: make(chan struct{})}
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tr.Stop()
			t.Fatalf("opening trickling connection %d: %v", len(tr.conns)+1, err)
		}
		tr.conns = append(tr.conns, c)
	}
	for _, c := range tr.conns {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
				tr.closed.Add(1)
				return
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-tr.stop:
					return
				case <-tick.C:
				}
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write([]byte("a")); err != nil {
					tr.closed.Add(1)
					return
				}
				// A server that gave up may have answered (408) and closed: reading shows it at once.
				_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
				var b [1]byte
				if _, err := c.Read(b[:]); err != nil && !isTimeout(err) {
					tr.closed.Add(1)
					return
				} else if err == nil {
					tr.closed.Add(1) // an answer before the headers ended: the server cut the request short
					return
				}
			}
		}()
	}
	t.Cleanup(tr.Stop)
	return tr
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Closed is how many of the connections the server has closed (or answered) so far.
func (tr *Trickle) Closed() int { return int(tr.closed.Load()) }

// Len is the number of connections.
func (tr *Trickle) Len() int { return len(tr.conns) }

// Stop closes every connection.
func (tr *Trickle) Stop() {
	select {
	case <-tr.stop:
		return
	default:
	}
	close(tr.stop)
	for _, c := range tr.conns {
		_ = c.Close()
	}
	tr.wg.Wait()
}

// WaitClosed waits until the server has closed every connection, for at most within; it reports how long
// that took, and fails the test when it did not happen.
func (tr *Trickle) WaitClosed(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for tr.Closed() < tr.Len() {
		if time.Since(start) > within {
			t.Fatalf("%d of %d trickling connections still open after %s: the server does not bound slow clients",
				tr.Len()-tr.Closed(), tr.Len(), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// RawStatus sends a raw request to addr and returns the status code of the answer (0 when the server
// closed the connection without one).
func RawStatus(t testing.TB, addr, request string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = c.Write([]byte(request)) }()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// CheckOversized sends requests with a huge header, a huge URL and very many headers, and fails the test
// unless each is answered with a 4xx (never a 5xx, never a dropped connection).
func CheckOversized(t testing.TB, addr, path string) {
	t.Helper()
	big := strings.Repeat("a", 1<<20)
	many := strings.Repeat("X-Many: 1\r\n", 20000)
	for name, req := range map[string]string{
		"a 1 MiB header":   fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", path, big),
		"a 64 KiB header":  fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", path, big[:64<<10]),
		"a 1 MiB URL":      fmt.Sprintf("GET %s?q=%s HTTP/1.1\r\nHost: x\r\n\r\n", path, big),
		"a 64 KiB URL":     fmt.Sprintf("GET %s/%s HTTP/1.1\r\nHost: x\r\n\r\n", path, big[:64<<10]),
		"20,000 headers":   fmt.Sprintf("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, many),
		"a malformed line": "GET\x00/ HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		if code := RawStatus(t, addr, req); code < 400 || code > 499 {
			t.Errorf("%s: status %d, want a 4xx", name, code)
		}
	}
}
