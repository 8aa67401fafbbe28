package ingress

// Per-tenant limits at the door: sends (notifications accepted; the items of a batch count one by one) and
// every other /v1 request, each a token bucket shared by every replica (internal/ratelimit). A request over
// a limit is answered 429 rate_limited with Retry-After, and nothing of it is stored. Every /v1 answer
// carries the IETF RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers) of the
// bucket it used, so clients can pace themselves.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/ratelimit"
	"github.com/heraldhq/herald/internal/store"
)

// Installation defaults of the limits, when Options leaves them zero.
const (
	DefaultSendsPerSecond    = 100
	DefaultRequestsPerSecond = 50
)

var tenantRequests = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "herald_ingress_tenant_units_total",
	Help: "Units asked of a tenant's limits (sends: notifications; requests: other /v1 requests), by tenant (capped at " +
		"100 names, then \"other\"), kind and outcome (accepted, refused).",
}, []string{"tenant", "kind", "outcome"})

// limitsOf is the principal's tenant's limits: its own, or the installation's defaults; a burst of twice
// the rate unless set.
func (a *API) limitsOf(p store.Principal) (sends, requests ratelimit.Limit) {
	sends.Rate, requests.Rate = a.opts.SendsPerSecond, a.opts.RequestsPerSecond
	if v := p.Limits.SendsPerSecond; v != nil {
		sends.Rate = float64(*v)
	}
	if v := p.Limits.RequestsPerSecond; v != nil {
		requests.Rate = float64(*v)
	}
	sends.Burst = int(math.Ceil(2 * sends.Rate))
	if v := p.Limits.Burst; v != nil {
		sends.Burst = int(*v)
	}
	requests.Burst = int(math.Ceil(2 * requests.Rate))
	return sends, requests
}

// limitRequests holds every /v1 route but the sends to the tenant's requests-per-second, before the
// request takes anything of the replica (admit): a request over the limit holds nothing of it.
func (a *API) limitRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := a.takeRequest(r.Context(), w); err != nil {
			a.refuseUnread(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseOverSends answers a send or a batch 429 before its body is read when this replica knows, without a
// query, that the tenant's send bucket is empty (ratelimit.Buckets.Refusing): the same answer the handler
// would give once it had read and validated the body, without holding the body meanwhile. Otherwise sends
// are counted in the handler, once they are known to be valid. A batch refused here counts as one refused
// send: its items are not read.
func (a *API) refuseOverSends(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r.Context())
		lim, _ := a.limitsOf(p)
		if wait, refused := a.limiter.Refusing(p.TenantID, ratelimit.Sends, lim); refused {
			a.refuseUnread(w, r, a.refused(w, p.TenantID, ratelimit.Sends, 1, lim, ratelimit.Decision{RetryAfter: wait}))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// takeRequest spends one request of the caller's tenant; a catalogued 429 when over its limit.
func (a *API) takeRequest(ctx context.Context, w http.ResponseWriter) error {
	p := principalOf(ctx)
	_, lim := a.limitsOf(p)
	return a.take(ctx, w, p.TenantID, ratelimit.Requests, 1, lim)
}

// takeSends spends n sends of the caller's tenant; a catalogued 429 when over its limit.
func (a *API) takeSends(ctx context.Context, w http.ResponseWriter, n int) error {
	p := principalOf(ctx)
	lim, _ := a.limitsOf(p)
	return a.take(ctx, w, p.TenantID, ratelimit.Sends, n, lim)
}

func (a *API) take(ctx context.Context, w http.ResponseWriter, tenant, kind string, n int, lim ratelimit.Limit) error {
	d, err := a.limiter.Take(ctx, tenant, kind, n, lim)
	if err != nil {
		return err // PostgreSQL: handle answers 503 when it is unavailable
	}
	if !d.Allowed {
		return a.refused(w, tenant, kind, n, lim, d)
	}
	setRateLimitHeaders(w.Header(), kind, lim, d)
	tenantRequests.WithLabelValues(metriclabel.Tenants.Of(tenant), kind, "accepted").Add(float64(n))
	return nil
}

// refused counts n units of the tenant's kind refused by d and returns the 429 that says so.
func (a *API) refused(w http.ResponseWriter, tenant, kind string, n int, lim ratelimit.Limit, d ratelimit.Decision) error {
	setRateLimitHeaders(w.Header(), kind, lim, d)
	tenantRequests.WithLabelValues(metriclabel.Tenants.Of(tenant), kind, "refused").Add(float64(n))
	a.refusals.add(tenant, kind, n)
	a.refusals.flushEvery(refusalFlush, a.store, a.log)
	return apierror.RateLimited.With("over the tenant's limit of %s per second for %s; retry after the time Retry-After gives",
		formatRate(lim.Rate), kind).After(d.RetryAfter)
}

// setRateLimitHeaders writes the IETF RateLimit fields: the policy as a quota of Burst units over the time
// the bucket takes to fill (w), and the units left with the seconds until the bucket is full again (t).
func setRateLimitHeaders(h http.Header, kind string, lim ratelimit.Limit, d ratelimit.Decision) {
	window := int(math.Ceil(float64(lim.Burst) / lim.Rate))
	remaining := min(max(0, d.Remaining), lim.Burst)
	reset := int(math.Ceil(float64(lim.Burst-remaining) / lim.Rate))
	if !d.Allowed {
		remaining, reset = 0, max(1, int(math.Ceil(d.RetryAfter.Seconds())))
	}
	h.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", kind, lim.Burst, max(1, window)))
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", kind, remaining, reset))
}

func formatRate(r float64) string {
	if r == math.Trunc(r) {
		return fmt.Sprintf("%d", int64(r))
	}
	return fmt.Sprintf("%.2f", r)
}

// refusalFlush is how often a replica adds its refusal counts to PostgreSQL (for /dev_stats): at most one
// statement per interval however many requests are refused.
const refusalFlush = 10 * time.Second

// refusalCounts gathers refused units between flushes.
type refusalCounts struct {
	mu      sync.Mutex
	counts  map[[2]string]int64
	flushed time.Time
}

func (r *refusalCounts) add(tenant, kind string, n int) {
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[[2]string]int64{}
	}
	if len(r.counts) < 10000 {
		r.counts[[2]string{tenant, kind}] += int64(n)
	}
	r.mu.Unlock()
}

// flushEvery writes the counts out, in the background, when the last flush is older than interval.
func (r *refusalCounts) flushEvery(interval time.Duration, st *store.Store, log *slog.Logger) {
	r.mu.Lock()
	if time.Since(r.flushed) < interval || len(r.counts) == 0 {
		r.mu.Unlock()
		return
	}
	var rs []store.Refusals
	for k, c := range r.counts {
		rs = append(rs, store.Refusals{TenantID: k[0], Kind: k[1], Count: c})
	}
	r.counts, r.flushed = nil, time.Now()
	r.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), store.DefaultQueryTimeout)
		defer cancel()
		if err := st.AddRefusals(ctx, rs); err != nil {
			log.Warn("could not record refused requests", "err", err)
		}
	}()
}
