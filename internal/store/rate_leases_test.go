package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func leases(t *testing.T, s *store.Store, pool string) map[string]float64 {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT holder, rate FROM rate_leases WHERE pool = $1`, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var h string
		var r float64
		if err := rows.Scan(&h, &r); err != nil {
			t.Fatal(err)
		}
		out[h] = r
	}
	return out
}

// A renewal sees its own lease apart from the others, with their demands and rates; what decide returns is
// written; a lease whose time ran out is gone before decide runs; a released lease counts until its hold
// ends.
func TestShareRateShowsTheOthersAndDropsExpiredLeases(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	const pool = "bot:test"
	// b's lease lapsed at once (a negative ttl): a worker that died.
	if _, err := s.ShareRate(ctx, pool, "b", 7, -time.Second, func(_ store.RateLease, _ []store.RateLease) float64 { return 20 }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ShareRate(ctx, pool, "c", 3, time.Minute, func(_ store.RateLease, _ []store.RateLease) float64 { return 10 }); err != nil {
		t.Fatal(err)
	}
	var seenMine store.RateLease
	var seenOthers []store.RateLease
	got, err := s.ShareRate(ctx, pool, "a", 12.5, time.Minute, func(mine store.RateLease, others []store.RateLease) float64 {
		seenMine, seenOthers = mine, others
		return 15
	})
	if err != nil || got != 15 {
		t.Fatalf("ShareRate = %v, %v; want 15", got, err)
	}
	if seenMine != (store.RateLease{Holder: "a", Demand: 12.5, Rate: 0}) {
		t.Errorf("a new holder's own lease = %+v, want demand 12.5 and rate 0", seenMine)
	}
	if len(seenOthers) != 1 || seenOthers[0] != (store.RateLease{Holder: "c", Demand: 3, Rate: 10}) {
		t.Errorf("others = %+v, want only c (b's lease had lapsed)", seenOthers)
	}
	// A renewal sees its own last rate.
	if _, err := s.ShareRate(ctx, pool, "a", 1, time.Minute, func(mine store.RateLease, _ []store.RateLease) float64 {
		seenMine = mine
		return 5
	}); err != nil {
		t.Fatal(err)
	}
	if seenMine.Rate != 15 || seenMine.Demand != 1 {
		t.Errorf("renewal's own lease = %+v, want its last rate 15 and its new demand 1", seenMine)
	}
	if got := leases(t, s, pool); len(got) != 2 || got["a"] != 5 || got["c"] != 10 {
		t.Errorf("leases = %v, want a=5 c=10", got)
	}
	// Another pool is another rate.
	if _, err := s.ShareRate(ctx, "bot:other", "a", 1, time.Minute, func(_ store.RateLease, others []store.RateLease) float64 {
		if len(others) != 0 {
			t.Errorf("another pool's renewal saw %v", others)
		}
		return 1
	}); err != nil {
		t.Fatal(err)
	}
	// A released lease keeps counting what its holder sent lately, with no demand, for the hold it asks.
	if err := s.ReleaseRate(ctx, pool, "c", 8, time.Minute); err != nil {
		t.Fatal(err)
	}
	// One released with a hold already over is gone at the next renewal.
	if err := s.ReleaseRate(ctx, pool, "a", 5, -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ShareRate(ctx, pool, "d", 1, time.Minute, func(_ store.RateLease, others []store.RateLease) float64 {
		seenOthers = others
		return 0
	}); err != nil {
		t.Fatal(err)
	}
	if len(seenOthers) != 1 || seenOthers[0] != (store.RateLease{Holder: "c", Demand: 0, Rate: 8}) {
		t.Errorf("after the releases: others = %+v, want only c with demand 0 and rate 8", seenOthers)
	}
}

// Renewals of one pool are serialised: holders that each take everything the others leave free never
// hold more than the limit together, however many renew at once. Without the pool's lock two renewals
// would both see the same free part and both take it.
func TestShareRateNeverGivesMoreThanTheLimitUnderContention(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	const pool, limit, holders, rounds = "bot:contended", 50.0, 8, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	var over []string
	for h := range holders {
		wg.Go(func() {
			name := fmt.Sprintf("w%d", h)
			for r := range rounds {
				_, err := s.ShareRate(ctx, pool, name, limit, time.Minute, func(mine store.RateLease, others []store.RateLease) float64 {
					taken := 0.0
					for _, o := range others {
						taken += o.Rate
					}
					if taken > limit {
						mu.Lock()
						over = append(over, fmt.Sprintf("%s round %d saw the others hold %v", name, r, taken))
						mu.Unlock()
					}
					// Greedy: everything free, and on odd rounds give half of it back.
					free := limit - taken
					if r%2 == 1 {
						return free / 2
					}
					return free
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0.0
	for _, r := range leases(t, s, pool) {
		total += r
	}
	if len(over) > 0 || total > limit {
		t.Errorf("the limit %v was exceeded: total %v; %v", limit, total, over)
	}
}

// A worker renews its leases on every bot it sends through in one transaction: each pool is shared as if
// renewed alone, and holders renewing overlapping sets of pools at once neither deadlock (the locks are
// taken in one order) nor hold more than any pool's limit together.
func TestShareRatesRenewsSeveralPoolsAtOnceUnderContention(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	pools := []string{"bot/1", "bot/2", "bot/3", "bot:workers"}
	const limit, holders, rounds = 30.0, 6, 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	var over []string
	for h := range holders {
		wg.Go(func() {
			name := fmt.Sprintf("w%d", h)
			for r := range rounds {
				// Each holder renews a different subset, in its own order.
				var shares []store.RateShare
				for i := range pools {
					pool := pools[(h+i)%len(pools)]
					if (h+i+r)%3 == 0 {
						continue
					}
					shares = append(shares, store.RateShare{Pool: pool, Demand: float64(h + 1), Decide: func(mine store.RateLease, others []store.RateLease) float64 {
						taken := 0.0
						for _, o := range others {
							taken += o.Rate
						}
						if taken > limit {
							mu.Lock()
							over = append(over, fmt.Sprintf("%s round %d saw the others hold %v of %s", name, r, taken, pool))
							mu.Unlock()
						}
						return (limit - taken) / 2
					}})
				}
				rates, err := s.ShareRates(ctx, name, time.Minute, shares)
				if err != nil {
					t.Error(err)
					return
				}
				if len(rates) != len(shares) {
					t.Errorf("%d rates for %d pools", len(rates), len(shares))
					return
				}
			}
		})
	}
	wg.Wait()
	for _, pool := range pools {
		total := 0.0
		for _, r := range leases(t, s, pool) {
			total += r
		}
		if total > limit {
			t.Errorf("pool %s: the leases add up to %v, over the limit %v", pool, total, limit)
		}
	}
	if len(over) > 0 {
		t.Errorf("the limit was exceeded: %v", over)
	}
}
