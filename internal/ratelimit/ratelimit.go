// Package ratelimit holds each tenant to its limits as a whole, however many ingress replicas serve it,
// without a database round trip per request.
//
// The limit lives in one place: a GCRA token bucket per tenant and kind of request ("sends",
// "requests") in PostgreSQL (store.LeaseTokens). Each replica leases tokens from it in small batches (a
// tenth of a second's worth) and spends them locally; only the request that finds its replica's lease
// empty waits for one statement. A replica that was refused remembers until when, and refuses without
// asking again. Leased tokens expire after a second, so a replica that stops receiving traffic holds back
// at most one lease of the rate. The share each replica gets follows the traffic it receives, so the limit
// holds whether the load balancer spreads a tenant's requests evenly or not.
package ratelimit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Kinds of request, each with its own bucket.
const (
	Sends    = "sends"    // notifications accepted (batch items one by one)
	Requests = "requests" // every other /v1 request
)

// Limit is a rate with a burst.
type Limit struct {
	Rate  float64 // per second
	Burst int
}

// Store is the central bucket (store.Store.LeaseTokens).
type Store interface {
	LeaseTokens(ctx context.Context, tenantID, kind string, want int, rate float64, burst int) (got, left int, wait time.Duration, err error)
}

// Decision is the answer for one request.
type Decision struct {
	Allowed bool
	// RetryAfter, when refused: how long until the request could pass.
	RetryAfter time.Duration
	// Remaining is an estimate of the units left now (this replica's lease and what the central bucket had
	// at the last lease), for the RateLimit response header.
	Remaining int
}

// Buckets is one replica's view of the central buckets. It is safe for concurrent use.
type Buckets struct {
	store    Store
	leaseTTL time.Duration
	now      func() time.Time

	mu      sync.Mutex
	buckets map[bucketKey]*bucket
	pruned  time.Time
}

type bucketKey struct{ tenant, kind string }

type bucket struct {
	mu        sync.Mutex
	limit     Limit
	tokens    int       // leased and not spent
	expires   time.Time // when the leased tokens lapse
	refused   time.Time // the central bucket had nothing until then: refuse without asking
	remaining int       // the central bucket's tokens after the last lease
	used      time.Time // last use, for pruning
}

// New returns a limiter leasing from st.
func New(st Store) *Buckets {
	return &Buckets{store: st, leaseTTL: time.Second, now: time.Now, buckets: map[bucketKey]*bucket{}}
}

// Take spends n units of the tenant's kind under lim.
func (l *Buckets) Take(ctx context.Context, tenant, kind string, n int, lim Limit) (Decision, error) {
	b := l.bucket(tenant, kind)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := l.now()
	b.used = now
	if b.limit != lim {
		// A changed limit starts afresh: what was leased under the old one no longer says anything.
		b.limit, b.tokens, b.refused = lim, 0, time.Time{}
	}
	if now.After(b.expires) {
		b.tokens = 0
	}
	if b.tokens >= n {
		b.tokens -= n
		return Decision{Allowed: true, Remaining: b.tokens + b.remaining}, nil
	}
	if now.Before(b.refused) {
		return Decision{RetryAfter: b.refused.Sub(now)}, nil
	}
	want := max(n-b.tokens, leaseSize(lim))
	got, left, wait, err := l.store.LeaseTokens(ctx, tenant, kind, want, lim.Rate, lim.Burst)
	if err != nil {
		return Decision{}, err
	}
	if got > 0 {
		b.tokens += got
		b.expires = now.Add(l.leaseTTL)
	}
	b.remaining = left
	if b.tokens >= n {
		b.tokens -= n
		return Decision{Allowed: true, Remaining: b.tokens + b.remaining}, nil
	}
	// Not enough: the request is refused and nothing it holds is spent. With none left centrally, the
	// replica refuses without asking until one is free; otherwise the retry is when the rest has accrued.
	retry := wait
	if got > 0 || retry == 0 {
		retry = time.Duration(float64(n-b.tokens) / lim.Rate * float64(time.Second))
	}
	if got == 0 {
		b.refused = now.Add(wait)
	}
	return Decision{RetryAfter: retry}, nil
}

// Refusing reports, without a query, whether Take would now refuse any request of the tenant's kind under
// lim without asking the central bucket: this replica holds no leased token and was told the bucket is
// empty until later (Take's own shortcut). It lets a caller refuse before it knows how many units it would
// take — before reading a body. It creates no bucket.
func (l *Buckets) Refusing(tenant, kind string, lim Limit) (time.Duration, bool) {
	l.mu.Lock()
	b := l.buckets[bucketKey{tenant, kind}]
	l.mu.Unlock()
	if b == nil {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := l.now()
	if b.limit != lim || !now.Before(b.refused) || (b.tokens > 0 && !now.After(b.expires)) {
		return 0, false
	}
	return b.refused.Sub(now), true
}

// leaseSize is a tenth of a second of the rate (at least 1, at most the burst): few round trips, little
// held back by a replica that stops receiving traffic.
func leaseSize(lim Limit) int {
	return max(1, min(lim.Burst, int(math.Ceil(lim.Rate/10))))
}

func (l *Buckets) bucket(tenant, kind string) *bucket {
	k := bucketKey{tenant, kind}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[k]
	if b == nil {
		if now := l.now(); now.Sub(l.pruned) > time.Minute {
			l.prune(now.Add(-time.Minute))
			l.pruned = now
		}
		b = &bucket{}
		l.buckets[k] = b
	}
	return b
}

// prune forgets the buckets of tenants idle since before, so the map stays as small as the set of active
// tenants. l.mu is held.
func (l *Buckets) prune(before time.Time) {
	for k, b := range l.buckets {
		if b.mu.TryLock() {
			if b.used.Before(before) {
				delete(l.buckets, k)
			}
			b.mu.Unlock()
		}
	}
}
