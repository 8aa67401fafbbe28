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
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// trickle is an upload that a client started and never finishes: the headers, a declared Content-Length and
// the first bytes of its body, over a real TCP connection. Its answer, if the server gives one before the
// body is complete, arrives on answered.
type trickle struct {
	c        net.Conn
	answered chan int // the status, once the server answers
}

// trickle starts method path as key, declaring declared bytes of body and sending only its first 16.
func (e *env) trickle(method, path, key string, declared int) *trickle {
	e.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		method, path, key, declared)
	if _, err := c.Write([]byte(head + `{"notifications"`)); err != nil {
		e.t.Fatal(err)
	}
	tr := &trickle{c: c, answered: make(chan int, 1)}
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return // closed by the test
		}
		res.Body.Close()
		tr.answered <- res.StatusCode
	}()
	return tr
}

// held waits until the upload holds want bytes of the replica's in-flight bytes (it was let in), or is
// answered (refused before its body was read); it reports the status, 0 when held.
func (e *env) held(tr *trickle, want int64) int {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case status := <-tr.answered:
			return status
		default:
		}
		if used, _ := ingress.BodyBytesInFlight(e.api); used == want {
			return 0
		}
		if time.Now().After(deadline) {
			used, _ := ingress.BodyBytesInFlight(e.api)
			e.t.Fatalf("an upload is neither let in (in-flight bytes %d, want %d) nor answered after 5 s", used, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// paddedBatch is a batch body of n sends to user, padded with spaces (JSON allows them) to size bytes when
// size is larger.
func paddedBatch(n int, user string, size int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf(`{"user_id":%q,"message":"hello %d"}`, user, i)
	}
	b := `{"notifications":[` + strings.Join(items, ",") + `]}`
	return b + strings.Repeat(" ", max(0, size-len(b)))
}

// The attack of issue 26: tenant A trickles uploads — one batch declaring a full batch's body, then sends
// declaring 64 KiB each — and never finishes them. Each replica's in-flight bytes are shared by every
// tenant; A used to take them all for the 15 s a body may take, and every other tenant's POST was 503.
// Now A is held to its share (half the budget), and tenant B still sends — singles and a full batch.
func TestOneTenantsTrickledUploadsCannotRefuseAnotherTenantsSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // the default budget
	a := e.tenant("tenant-a", "A", nil)
	b := e.tenant("tenant-b", "B", nil)
	e.fx.VerifiedUser(e.t, "tenant-b", "u1", 1001)

	var holding int64
	if status := e.held(e.trickle("POST", "/v1/send/batch", a, ingress.MaxBatchBodyBytes), ingress.MaxBatchBodyBytes); status != 0 {
		t.Fatalf("tenant A's first upload, a full batch: answered %d, want let in", status)
	}
	holding = ingress.MaxBatchBodyBytes
	for {
		status := e.held(e.trickle("POST", "/v1/send", a, ingress.MaxBodyBytes), holding+ingress.MaxBodyBytes)
		if status != 0 {
			if status != http.StatusServiceUnavailable {
				t.Fatalf("tenant A's upload past what it may hold: %d, want 503", status)
			}
			break
		}
		holding += ingress.MaxBodyBytes
		if holding > 64<<20 {
			t.Fatal("tenant A holds 64 MiB of uploads: nothing bounds it")
		}
	}
	t.Logf("tenant A holds %d bytes of trickled uploads", holding)

	// Tenant B is unaffected: singles, and a full batch's body.
	for i := range 5 {
		r := e.do("POST", "/v1/send", b, map[string]any{"user_id": "u1", "message": fmt.Sprintf("hello %d", i)})
		if r.status != http.StatusAccepted {
			t.Fatalf("tenant B's send %d while tenant A trickles %d bytes: %d %s, want 202", i+1, holding, r.status, r.body)
		}
	}
	r := e.do("POST", "/v1/send/batch", b, paddedBatch(3, "u1", ingress.MaxBatchBodyBytes))
	if r.status != http.StatusOK {
		t.Fatalf("tenant B's full-size batch while tenant A trickles: %d %s, want 200", r.status, r.body)
	}
	// And A is bounded: half the budget, which holds its full batch.
	_, budget := ingress.BodyBytesInFlight(e.api)
	if holding > budget/2 || holding < ingress.MaxBatchBodyBytes {
		t.Errorf("tenant A held %d bytes of a %d-byte budget, want at most half and at least a full batch", holding, budget)
	}
	if budget != ingress.DefaultMaxInFlightBytes {
		t.Errorf("the budget is %d, want the default %d", budget, ingress.DefaultMaxInFlightBytes)
	}
}

// The same holds for the places among the requests in flight (HERALD_MAX_IN_FLIGHT) and among the batches
// in flight: a tenant holds at most half of each, so trickled uploads of small declared sizes cannot take
// them all either.
func TestOneTenantsTrickledUploadsCannotTakeEveryPlaceInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path string
		opts       func(*ingress.Options)
		share      int // three quarters of the requests, half of the batches
	}{
		{"requests", "/v1/send", func(o *ingress.Options) { o.MaxInFlight = 8 }, 6},
		{"batches", "/v1/send/batch", func(o *ingress.Options) { o.MaxInFlightBatches = 4 }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, tc.opts)
			a := e.tenant("tenant-a", "A", nil)
			b := e.tenant("tenant-b", "B", nil)
			e.fx.VerifiedUser(e.t, "tenant-b", "u1", 1001)
			const declared = 100
			let := 0
			for {
				tr := e.trickle("POST", tc.path, a, declared)
				if status := e.held(tr, int64((let+1)*declared)); status != 0 {
					if status != http.StatusServiceUnavailable {
						t.Fatalf("tenant A's upload past its places: %d, want 503", status)
					}
					break
				}
				if let++; let > 64 {
					t.Fatal("tenant A holds 64 uploads: nothing bounds it")
				}
			}
			if let != tc.share {
				t.Errorf("tenant A holds %d %s in flight, want %d, its share", let, tc.name, tc.share)
			}
			if r := e.do("POST", "/v1/send", b, map[string]any{"user_id": "u1", "message": "hello"}); r.status != http.StatusAccepted {
				t.Errorf("tenant B's send while tenant A holds %d places: %d %s, want 202", let, r.status, r.body)
			}
			if r := e.do("POST", "/v1/send/batch", b, paddedBatch(2, "u1", 0)); r.status != http.StatusOK {
				t.Errorf("tenant B's batch while tenant A holds %d places: %d %s, want 200", let, r.status, r.body)
			}
		})
	}
}

// A tenant already over its send limit is refused (429) before its body is read: it takes nothing of the
// in-flight bytes, and a trickled upload is answered at once. Other routes are held to the requests limit
// before their bodies are reserved, the same way.
func TestATenantOverItsLimitIsRefusedBeforeItsBodyIsRead(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(1), Burst: int32p(1), RequestsPerSecond: int32p(1)})
	send := map[string]any{"user_id": "u1", "message": "hi"}
	for _, tc := range []struct {
		what, path string
		refuse     func() response // a request the limit refuses: the replica then knows, until when, that the bucket is empty
	}{
		{"a send", "/v1/send", func() response { return e.do("POST", "/v1/send", key, send) }},
		{"a batch", "/v1/send/batch", func() response { return e.do("POST", "/v1/send", key, send) }},
		{"another route's request", "/v1/link-token", func() response { return e.do("GET", "/v1/notifications", key, nil) }},
	} {
		// The replica knows the bucket is empty for up to a second after a refusal; on a loaded machine the
		// upload may arrive later, find room in the bucket and be let in: then it is tried again.
		for attempt := 1; ; attempt++ {
			r := tc.refuse()
			for r.status != http.StatusTooManyRequests {
				r = tc.refuse()
			}
			tr := e.trickle("POST", tc.path, key, ingress.MaxBodyBytes)
			status := 0
			wait.Until(e.t, 5*time.Second, "the upload is answered or let in", func() bool {
				select {
				case status = <-tr.answered:
					return true
				default:
				}
				used, _ := ingress.BodyBytesInFlight(e.api)
				return used > 0
			})
			if status != 0 {
				if status != http.StatusTooManyRequests {
					t.Errorf("%s over the limit, trickled: %d, want 429", tc.what, status)
				}
				break
			}
			_ = tr.c.Close()
			wait.Until(e.t, 5*time.Second, "the abandoned upload's bytes are given back", func() bool { used, _ := ingress.BodyBytesInFlight(e.api); return used == 0 })
			if attempt == 5 {
				t.Errorf("%s over the limit was let in, its body awaited, in %d attempts of 5", tc.what, attempt)
				break
			}
		}
	}
}
