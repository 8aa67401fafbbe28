package callback_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// hugeHeaders is a receiver that reads each request and answers 200 with size bytes of headers: what a
// hostile tenant's endpoint can do to the sender that calls it. It holds the requests until together
// of them arrived, and answers them all at once.
type hugeHeaders struct {
	ln       net.Listener
	answer   []byte
	arrived  atomic.Int32
	together int32
	all      chan struct{} // closed when together requests arrived
	wg       sync.WaitGroup
}

func newHugeHeaders(t *testing.T, size, together int) *hugeHeaders {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n")
	line := strings.Repeat("x", 4000)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "X-Pad-%d: %s\r\n", i, line)
	}
	b.WriteString("\r\n")
	h := &hugeHeaders{ln: ln, answer: b.Bytes(), together: int32(together), all: make(chan struct{})}
	h.wg.Go(h.serve)
	t.Cleanup(func() { ln.Close(); h.wg.Wait() })
	return h
}

func (h *hugeHeaders) serve() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.wg.Go(func() {
			defer c.Close()
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				if h.arrived.Add(1) == h.together {
					close(h.all)
				}
				select {
				case <-h.all:
				case <-time.After(20 * time.Second): // a sender that never sends them all: the test fails on its own
				}
				if _, err := c.Write(h.answer); err != nil { // the sender gives up reading: a reset, or a short write
					return
				}
			}
		})
	}
}

// A receiver answering with megabytes of headers cannot make the sender hold them: the sender stops reading at
// callback.MaxResponseHeaderBytes, and the attempt fails like any other (retried later). 40 events at once —
// five endpoints, eight attempts each, the default per-endpoint bound — answered with 8 MB of headers each
// leave the sender's allocations bounded: without the cap (Go's default is 10 MiB) it reads all 320 MB.
func TestHugeResponseHeadersDoNotExhaustTheSendersMemory(t *testing.T) {
	e := newEnv(t)
	const endpoints, perEndpoint = 5, 8
	rc := newHugeHeaders(t, 8<<20, endpoints*perEndpoint)
	for range endpoints {
		ep, _ := e.endpoint("acme", "http://"+rc.ln.Addr().String()+"/h")
		e.pings("acme", ep, perEndpoint)
	}
	opts := e.options()
	opts.Concurrency = 64
	opts.EndpointConcurrency = perEndpoint
	opts.Timeout, opts.Lease = 30*time.Second, 40*time.Second
	opts.Backoff = notification.Backoff{Base: time.Hour, Max: time.Hour} // one attempt each during the test

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e.start(opts)
	wait.Until(t, 60*time.Second, "an attempt at every event", func() bool {
		return e.count(`SELECT count(*) FROM callback_events WHERE attempts = 1 AND leased_until IS NULL
			AND (state = 'delivered' OR last_error IS NOT NULL)`) == endpoints*perEndpoint
	})
	runtime.ReadMemStats(&after)

	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("40 attempts at once answered with 8 MB of headers each: %.1f MiB allocated in all", float64(allocated)/(1<<20))
	if n := rc.arrived.Load(); n != endpoints*perEndpoint {
		t.Errorf("the receiver got %d requests, want %d at once", n, endpoints*perEndpoint)
	}
	if limit := uint64(endpoints * perEndpoint << 20); allocated > limit {
		t.Errorf("the sender allocated %.1f MiB for 40 attempts, more than 1 MiB each: it reads the huge headers",
			float64(allocated)/(1<<20))
	}
	if n := e.count(`SELECT count(*) FROM callback_events WHERE state = 'pending' AND last_status = 0`); n != endpoints*perEndpoint {
		t.Errorf("%d events wait for a retry after a failed attempt, want all %d", n, endpoints*perEndpoint)
	}
	if n := e.count(`SELECT count(*) FROM callback_events WHERE last_error LIKE '%response headers exceeded%'`); n != endpoints*perEndpoint {
		t.Errorf("%d events failed on the headers' size, want all %d", n, endpoints*perEndpoint)
	}
}
