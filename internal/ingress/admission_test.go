package ingress_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// heldRequest is a request whose headers and the first part of its body are sent, and whose handler waits
// for the rest: it holds its place among the requests in flight until finished or abandoned.
type heldRequest struct {
	t    testing.TB
	c    net.Conn
	rest string
}

// hold sends method path with key, a body of declared length, and only the first half of body.
func (e *env) hold(method, path, key string, declared int, body string) *heldRequest {
	e.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		method, path, key, declared)
	half := len(body) / 2
	if _, err := c.Write([]byte(head + body[:half])); err != nil {
		e.t.Fatal(err)
	}
	return &heldRequest{t: e.t, c: c, rest: body[half:]}
}

// finish sends the rest of the body and returns the answer's status.
func (h *heldRequest) finish() int {
	h.t.Helper()
	_ = h.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := h.c.Write([]byte(h.rest)); err != nil {
		h.t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(h.c), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// Past HERALD_MAX_IN_FLIGHT concurrent /v1 requests, the next one is answered 503 unavailable with
// Retry-After at once, stores nothing, and the place is free again once the request in flight is answered.
func TestInFlightCapShedsWith503AndRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *ingress.Options) { o.MaxInFlight = 1 })
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	send := map[string]any{"user_id": "u1", "message": "hello"}

	body := `{"user_id":"u1","message":"held in flight"}`
	held := e.hold("POST", "/v1/send", key, len(body), body)
	wait.Until(e.t, 5*time.Second, "the held send is in flight", func() bool { return ingress.RequestsInFlight(e.api) == 1 })
	before := e.countRows(`SELECT count(*) FROM notifications`)
	r := e.do("POST", "/v1/send", key, send)
	expectError(t, r, http.StatusServiceUnavailable, "unavailable")
	if ra := r.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1", ra)
	}
	// Any /v1 route, not only sends.
	expectError(t, e.do("GET", "/v1/notifications", key, nil), http.StatusServiceUnavailable, "unavailable")
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != before {
		t.Errorf("a shed send stored something: %d notifications, want %d", n, before)
	}
	if code := held.finish(); code != http.StatusAccepted {
		t.Fatalf("the request in flight: %d, want 202", code)
	}
	if r := e.do("POST", "/v1/send", key, send); r.status != http.StatusAccepted {
		t.Errorf("after the request in flight was answered: %d %s, want 202", r.status, r.body)
	}
}

// Past HERALD_MAX_IN_FLIGHT_BYTES of request bodies in flight (counted by Content-Length when the request
// arrives), a request is answered 503 unavailable with Retry-After without its body being read, and stores
// nothing; the bytes are given back when the request holding them is answered or abandoned. One tenant
// holds at most half of the bytes (bodybudget_test.go): it takes two to fill them.
func TestInFlightBytesShedWith503AndRetryAfter(t *testing.T) {
	t.Parallel()
	// The least the budget may be is two full batches' bodies, which the held batches below declare.
	e := newEnvWith(t, func(o *ingress.Options) { o.MaxInFlightBytes = 1 })
	acme := e.tenant("acme", "Acme", nil)
	globex := e.tenant("globex", "Globex", nil)
	key := e.tenant("initech", "Initech", nil)
	e.fx.VerifiedUser(e.t, "initech", "u1", 1001)
	send := map[string]any{"user_id": "u1", "message": "hello"}

	held := e.hold("POST", "/v1/send/batch", acme, ingress.MaxBatchBodyBytes, `{"notifications":[{"user_id":"u1","message":"a"}]}`)
	e.hold("POST", "/v1/send/batch", globex, ingress.MaxBatchBodyBytes, `{"notifications":[{"user_id":"u1","message":"a"}]}`)
	wait.Until(e.t, 5*time.Second, "the held batches hold the bytes", func() bool { used, most := ingress.BodyBytesInFlight(e.api); return used == most })
	before := e.countRows(`SELECT count(*) FROM notifications`)
	r := e.do("POST", "/v1/send", key, send)
	expectError(t, r, http.StatusServiceUnavailable, "unavailable")
	if ra := r.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1", ra)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != before {
		t.Errorf("a shed send stored something: %d notifications, want %d", n, before)
	}
	// A request without a body takes nothing from the budget.
	if r := e.do("GET", "/v1/notifications", key, nil); r.status != http.StatusOK {
		t.Errorf("GET /v1/notifications with the bytes in flight taken: %d %s, want 200", r.status, r.body)
	}
	// A client gives up on a held batch: its bytes come back.
	_ = held.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := e.do("POST", "/v1/send", key, send)
		if r.status == http.StatusAccepted {
			break
		}
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after the held batch was abandoned: %d %s, want 202", r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
