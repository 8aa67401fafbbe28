package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RateLease is one holder's part of a shared rate (table rate_leases).
type RateLease struct {
	Holder string
	Demand float64 // what the holder could use, per second
	Rate   float64 // what it was given, per second
}

// rateLeaseLock is the namespace of the transaction-scoped advisory locks that serialise the renewals of
// one pool (an arbitrary constant of Herald's: "herald.rl"); the pool's name picks the lock within it.
const rateLeaseLock int32 = 0x6872_6c00

// RateShare is one pool of a ShareRates renewal: the holder's demand there, and how it picks its rate.
type RateShare struct {
	Pool   string
	Demand float64
	// Decide is ShareRate's decide for this pool.
	Decide func(mine RateLease, others []RateLease) float64
}

// ShareRates is ShareRate for several pools at once (a worker's leases on the rates of every bot it sends
// through), in one transaction of a few statements whatever the number of pools: renewing each pool on
// its own would cost a transaction per bot and renewal. The pools' locks are taken in one order, so two
// holders renewing overlapping pools never deadlock. It returns the rates in the order of shares.
func (s *Store) ShareRates(ctx context.Context, holder string, ttl time.Duration, shares []RateShare) ([]float64, error) {
	if len(shares) == 0 {
		return nil, nil
	}
	pools := make([]string, len(shares))
	for i, sh := range shares {
		pools[i] = sh.Pool
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rates := make([]float64, len(shares))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// In the order of the locks' keys: the subquery's order is the order the locks are taken in.
		if _, err := tx.Exec(ctx, `
			SELECT pg_advisory_xact_lock($1, k) FROM (SELECT DISTINCT hashtext(p) AS k FROM unnest($2::text[]) p ORDER BY 1) l`,
			rateLeaseLock, pools); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM rate_leases WHERE pool = ANY($1) AND expires_at < now()`, pools); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT pool, holder, demand, rate FROM rate_leases WHERE pool = ANY($1)`, pools)
		if err != nil {
			return err
		}
		byPool := map[string][]RateLease{}
		var pool string
		var l RateLease
		_, err = pgx.ForEachRow(rows, []any{&pool, &l.Holder, &l.Demand, &l.Rate}, func() error {
			byPool[pool] = append(byPool[pool], l)
			return nil
		})
		if err != nil {
			return err
		}
		demands := make([]float64, len(shares))
		for i, sh := range shares {
			mine := RateLease{Holder: holder, Demand: sh.Demand}
			var others []RateLease
			for _, l := range byPool[sh.Pool] {
				if l.Holder == holder {
					mine.Rate = l.Rate
				} else {
					others = append(others, l)
				}
			}
			rates[i], demands[i] = sh.Decide(mine, others), sh.Demand
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO rate_leases (pool, holder, demand, rate, expires_at)
			SELECT p, $2, d, r, now() + make_interval(secs => $5) FROM unnest($1::text[], $3::float8[], $4::float8[]) AS u(p, d, r)
			ON CONFLICT (pool, holder) DO UPDATE SET demand = excluded.demand, rate = excluded.rate, expires_at = excluded.expires_at`,
			pools, holder, demands, rates, ttl.Seconds())
		return err
	})
	if err != nil {
		return nil, translate(err, fmt.Sprintf("renewing the rate leases of %s", holder))
	}
	return rates, nil
}

// ReleaseRate ends holder's lease after hold: it sends no more, and its demand is 0 from now; rate is what
// it sent at lately, which stays counted until then (a worker's last sends are still in the platform's
// window for a moment).
func (s *Store) ReleaseRate(ctx context.Context, pool, holder string, rate float64, hold time.Duration) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		UPDATE rate_leases SET demand = 0, rate = $3, expires_at = LEAST(expires_at, now() + make_interval(secs => $4))
		WHERE pool = $1 AND holder = $2`, pool, holder, rate, hold.Seconds())
	return translate(err, "releasing a rate lease")
}
