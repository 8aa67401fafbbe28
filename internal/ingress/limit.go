package ingress

import (
	"net/http"
	"sync/atomic"

	"github.com/heraldhq/herald/internal/apierror"
)

// DefaultMaxInFlight caps concurrent /v1 requests per replica (HERALD_MAX_IN_FLIGHT). Past it, requests are
// shed at once with 503 and Retry-After rather than queued: queuing would only grow memory and latency for
// everyone, while a fast 503 lets clients back off and the autoscaler add replicas. 512 is about four times
// what a replica holds in flight at its capacity (a closed loop of 128 connections reaches it), and about
// twice the sends one batch of the outbox takes: enough for bursts and scheduling stalls, while what the
// requests in flight hold (a goroutine's stack, the request, its decoded body) stays a few MiB.
const DefaultMaxInFlight = 512

// DefaultMaxInFlightBytes bounds the request bodies the /v1 handlers hold at once (HERALD_MAX_IN_FLIGHT_BYTES):
// a full batch (MaxBatchBodyBytes) and room for the rest. Bodies are what a request's memory grows with,
// and a batch's may be 100 times a send's; counting requests alone would let 512 of them hold 3 GiB.
const DefaultMaxInFlightBytes = 8 << 20

// limitSlots sheds a request when every slot is taken; a request holds one until it is answered.
func limitSlots(slots chan struct{}) func(http.Handler) http.Handler {
	overloaded := apierror.Overloaded
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
				next.ServeHTTP(w, r)
			default:
				apierror.Write(w, overloaded)
			}
		})
	}
}

// byteBudget is a count of bytes that requests take from and give back, never past max.
type byteBudget struct {
	max  int64
	used atomic.Int64
}

func (b *byteBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *byteBudget) give(n int64) { b.used.Add(-n) }

// reserveBody takes what a request's body may hold (its Content-Length, or limit when it is unknown or
// larger: the handler reads no more than limit) from the API's in-flight bytes before the handler reads it,
// and gives it back when the request is answered. When the budget cannot hold it the request is shed like
// one past the in-flight cap: 503 with Retry-After, before a byte of the body is read.
func (a *API) reserveBody(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := r.ContentLength
			if n < 0 || n > limit {
				n = limit
			}
			if n == 0 || r.Body == nil || r.Body == http.NoBody {
				next.ServeHTTP(w, r)
				return
			}
			if !a.bodies.take(n) {
				apierror.Write(w, apierror.Overloaded)
				return
			}
			defer a.bodies.give(n)
			next.ServeHTTP(w, r)
		})
	}
}
