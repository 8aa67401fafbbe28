package ingress_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that writes the whole of an oversized body before it reads (Python's urllib and requests do)
// gets the 413, not a connection reset while it writes: the rest of the body is drained, up to a bound,
// before the answer.
func TestAnOversizedBodyWrittenWholeBeforeReadingGets413(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	body := `{"user_id":"u1","message":"` + strings.Repeat("a", 2<<20) + `"}`
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	head := fmt.Sprintf("POST /v1/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", key, len(body))
	// Over about a second, as over a real network (on loopback the kernel's buffers would take it all at
	// once and hide the reset).
	req := head + body
	for len(req) > 0 {
		n := min(len(req), 64<<10)
		if _, err := c.Write([]byte(req[:n])); err != nil {
			t.Fatalf("writing a 2 MB send before reading, %d bytes left: %v (the server stopped reading and reset the connection)", len(req), err)
		}
		req = req[n:]
		time.Sleep(30 * time.Millisecond)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", res.StatusCode)
	}
}
