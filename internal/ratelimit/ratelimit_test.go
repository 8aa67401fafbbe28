package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ratelimit"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Three replicas, each leasing from the one central bucket, hold a tenant to its limit within 10 %,
// whether the tenant's requests are spread evenly over them or not.
func TestThreeReplicasHoldOneLimit(t *testing.T) {
	for _, spread := range []struct {
		name   string
		shares [3]int // requests per round to each replica
	}{{"even", [3]int{1, 1, 1}}, {"uneven", [3]int{6, 2, 1}}} {
		t.Run(spread.name, func(t *testing.T) {
			st, _ := pgtest.NewStore(t)
			replicas := []*ratelimit.Buckets{ratelimit.New(st), ratelimit.New(st), ratelimit.New(st)}
			lim := ratelimit.Limit{Rate: 50, Burst: 50}
			const d = 3 * time.Second
			var allowed, refused atomic.Int64
			deadline := time.Now().Add(d)
			var wg sync.WaitGroup
			for r, l := range replicas {
				for range spread.shares[r] * 4 { // offered far above the limit
					wg.Go(func() {
						for time.Now().Before(deadline) {
							dec, err := l.Take(context.Background(), "acme", ratelimit.Sends, 1, lim)
							if err != nil {
								t.Error(err)
								return
							}
							if dec.Allowed {
								allowed.Add(1)
							} else {
								refused.Add(1)
								if dec.RetryAfter <= 0 {
									t.Error("a refusal without a retry time")
									return
								}
								time.Sleep(2 * time.Millisecond)
							}
						}
					})
				}
			}
			wg.Wait()
			want := float64(lim.Burst) + lim.Rate*d.Seconds() // a full bucket, then the rate
			if got := float64(allowed.Load()); got < 0.9*want || got > 1.1*want {
				t.Errorf("%v allowed over %v, want %v ±10%% (refused %d)", got, d, want, refused.Load())
			}
		})
	}
}

// A batch counts one by one; a refusal says when to retry; a changed limit applies at once.
func TestBatchesRefusalsAndChangedLimits(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	l := ratelimit.New(st)
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 10, Burst: 20}
	if d, err := l.Take(ctx, "acme", ratelimit.Sends, 15, lim); err != nil || !d.Allowed {
		t.Fatalf("a batch of 15 within a burst of 20: %+v, %v", d, err)
	}
	d, err := l.Take(ctx, "acme", ratelimit.Sends, 10, lim)
	if err != nil || d.Allowed {
		t.Fatalf("10 more with 5 left: %+v, %v; want refused", d, err)
	}
	if d.RetryAfter < 300*time.Millisecond || d.RetryAfter > 1100*time.Millisecond {
		t.Errorf("retry after %v; 5 more tokens at 10/s take about half a second", d.RetryAfter)
	}
	if d, _ := l.Take(ctx, "globex", ratelimit.Sends, 10, lim); !d.Allowed {
		t.Error("another tenant was refused: buckets are per tenant")
	}
	if d, _ := l.Take(ctx, "acme", ratelimit.Requests, 10, lim); !d.Allowed {
		t.Error("requests were refused by the sends bucket: buckets are per kind")
	}
	// A higher limit applies at once (the central bucket is recomputed with it).
	if d, _ := l.Take(ctx, "acme", ratelimit.Sends, 10, ratelimit.Limit{Rate: 1000, Burst: 1000}); !d.Allowed {
		t.Errorf("a raised limit did not apply: %+v", d)
	}
}
