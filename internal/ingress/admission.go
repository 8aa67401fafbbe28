package ingress

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
)

// DefaultMaxInFlight caps concurrent /v1 requests per replica (HERALD_MAX_IN_FLIGHT). Past it, requests are
// shed at once with 503 and Retry-After rather than queued: queuing would only grow memory and latency for
// everyone, while a fast 503 lets clients back off and the autoscaler add replicas. 512 is about four times
// what a replica holds in flight at its capacity (a closed loop of 128 connections reaches it), and about
// twice the sends one batch of the outbox takes: enough for bursts and scheduling stalls, while what the
// requests in flight hold (a goroutine's stack, the request, its decoded body) stays a few MiB.
const DefaultMaxInFlight = 512

// DefaultMaxInFlightBytes bounds the request bodies the /v1 handlers hold at once (HERALD_MAX_IN_FLIGHT_BYTES).
// Bodies are what a request's memory grows with, and a batch's may be 100 times a send's; counting requests
// alone would let 512 of them hold 3 GiB. One tenant may hold half of it (tenantShare), and that half must
// hold a full batch (MaxBatchBodyBytes): the budget is at least two full batches, so that whatever one
// tenant holds, the others keep at least as much. 16 MiB gives one tenant the 8 MiB the whole replica had
// before tenants had shares.
const DefaultMaxInFlightBytes = 16 << 20

// MinMaxInFlightBytes is the least HERALD_MAX_IN_FLIGHT_BYTES may be: two full batches (see above).
const MinMaxInFlightBytes = 2 * MaxBatchBodyBytes

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

// admission counts what the /v1 requests in flight hold of the replica — requests, batches and body bytes
// — in all and per tenant, and holds each tenant to its share: three quarters of the requests, half of the
// batches and of the bytes (tenantShare), so that
// one tenant's requests, however slow (a body may take 15 s to arrive), never take what another tenant's
// need. The overall cap on requests is limitSlots' (before authentication) and on batches sendBatch's;
// the bytes are counted here in all as well.
type admission struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64 // held by every tenant
	share    load  // the most one tenant may hold
	tenants  map[string]*load
}

// load is what requests hold: requests, batches among them, and the bytes of their bodies.
type load struct {
	requests, batches int
	bytes             int64
}

// tenantShare divides each bound to give what one tenant may hold of it.
const tenantShare = 2

// The others' part of the requests in flight is a quarter, not a half: a quarter of the default 512 is
// about what a replica holds in flight at its capacity, so another tenant's requests still pass, while a
// tenant alone on a loaded replica may use three quarters of it rather than half (under overload that is
// the difference between shedding at 256 requests and at 384).
func newAdmission(maxRequests, maxBatches int, maxBytes int64) *admission {
	return &admission{maxBytes: maxBytes, tenants: map[string]*load{}, share: load{
		requests: max(1, maxRequests-maxRequests/4),
		batches:  max(1, maxBatches/tenantShare),
		bytes:    max(MaxBatchBodyBytes, maxBytes/tenantShare),
	}}
}

// take adds l to the tenant's load, unless that would take the tenant past its share or every tenant past
// the byte budget; it reports whether the tenant's share was what refused it.
func (ad *admission) take(tenant string, l load) (ok, overShare bool) {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	t := ad.tenants[tenant]
	if t == nil {
		t = &load{}
	}
	if t.requests+l.requests > ad.share.requests || t.batches+l.batches > ad.share.batches || t.bytes+l.bytes > ad.share.bytes {
		return false, true
	}
	if ad.bytes+l.bytes > ad.maxBytes {
		return false, false
	}
	ad.bytes += l.bytes
	t.requests, t.batches, t.bytes = t.requests+l.requests, t.batches+l.batches, t.bytes+l.bytes
	ad.tenants[tenant] = t
	return true, false
}

// give takes back what take added; a tenant that holds nothing leaves the map, which so stays as small as
// the number of tenants with requests in flight.
func (ad *admission) give(tenant string, l load) {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	ad.bytes -= l.bytes
	t := ad.tenants[tenant]
	t.requests, t.batches, t.bytes = t.requests-l.requests, t.batches-l.batches, t.bytes-l.bytes
	if t.requests == 0 {
		delete(ad.tenants, tenant)
	}
}

func (ad *admission) used() int64 {
	ad.mu.Lock()
	defer ad.mu.Unlock()
	return ad.bytes
}

// overShare is the answer to a tenant at its share: 503 with Retry-After, as past the replica's bounds —
// another replica, or this one a moment later, may have room.
var overShare = apierror.Overloaded.With("this tenant's requests in flight hold their share of this replica; retry shortly")

// admit holds a request to its tenant's share and to the replica's in-flight bytes before the handler reads
// its body: it takes what the body may hold (its Content-Length, or limit when it is unknown or larger:
// the handler reads no more than limit), a place among the tenant's requests and, for a batch, among its
// batches, and gives them back when the request is answered. Past a bound the request is shed like one
// past the in-flight cap: 503 with Retry-After, answered without its body being read (refuseUnread).
//
// Bytes are reserved from the declared length, not as the body arrives: memory is then bounded before it
// is allocated, and a client that declares a large body and stalls holds what it would hold if it sent
// all but its last byte and stalled then — counting as it arrives would cost no more to such a client,
// and would refuse requests halfway through their bodies. What isolates tenants is the share.
func (a *API) admit(limit int64, batch bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l := load{requests: 1}
			if batch {
				l.batches = 1
			}
			if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
				l.bytes = r.ContentLength
				if l.bytes < 0 || l.bytes > limit {
					l.bytes = limit
				}
			}
			tenant := principalOf(r.Context()).TenantID
			if ok, tenantFull := a.admission.take(tenant, l); !ok {
				err := apierror.Overloaded
				if tenantFull {
					err = overShare
				}
				a.refuseUnread(w, r, err)
				return
			}
			defer a.admission.give(tenant, l)
			next.ServeHTTP(w, r)
		})
	}
}

// refuseUnread answers err to a request whose body the handler will not read. net/http reads what is left
// of a small body before it writes the answer, to keep the connection; for a trickled body it would wait
// up to the read timeout (15 s). Here the body is drained only as far as it arrives within drainWait: a
// client that sent it whole keeps its connection, one still sending it is answered at once and its
// connection closed. (EnableFullDuplex would answer first too, but net/http then panics on the next
// request of the connection: the drain after the answer starts a background read it does not stop.)
func (a *API) refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 && r.Header.Get("Expect") == "" {
		// With Expect: 100-continue the body is not sent until read, and net/http closes the connection.
		if http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainWait)) == nil {
			if n, derr := io.CopyN(io.Discard, r.Body, maxDrain+1); !errors.Is(derr, io.EOF) || n > maxDrain {
				w.Header().Set("Connection", "close")
			}
		}
	}
	a.writeError(w, r, err)
}

// drainWait is how long the rest of a refused request's body may take to arrive, and maxDrain how much of
// it is read (net/http's own bound for the same purpose), before the connection is closed instead.
const (
	drainWait = 50 * time.Millisecond
	maxDrain  = 256 << 10
)
