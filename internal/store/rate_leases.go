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

// ShareRate renews holder's lease in pool. Under the pool's lock it drops the leases that expired, records
// holder's demand, and calls decide with holder's current lease (Rate 0 for a new one) and the other live
// leases; the rate decide returns is written with a fresh expiry, now + ttl by the database's clock. decide
// runs before the commit, so a holder that lowers its rate does so while nobody can count on what it gives
// up yet. On error nothing was renewed, though decide may have run.
func (s *Store) ShareRate(ctx context.Context, pool, holder string, demand float64, ttl time.Duration,
	decide func(mine RateLease, others []RateLease) float64) (float64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var rate float64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, rateLeaseLock, pool); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM rate_leases WHERE pool = $1 AND expires_at < now()`, pool); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT holder, demand, rate FROM rate_leases WHERE pool = $1`, pool)
		if err != nil {
			return err
		}
		leases, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RateLease, error) {
			var l RateLease
			return l, r.Scan(&l.Holder, &l.Demand, &l.Rate)
		})
		if err != nil {
			return err
		}
		mine := RateLease{Holder: holder}
		others := leases[:0:0]
		for _, l := range leases {
			if l.Holder == holder {
				mine.Rate = l.Rate
			} else {
				others = append(others, l)
			}
		}
		mine.Demand = demand
		rate = decide(mine, others)
		_, err = tx.Exec(ctx, `
			INSERT INTO rate_leases (pool, holder, demand, rate, expires_at)
			VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
			ON CONFLICT (pool, holder) DO UPDATE SET demand = excluded.demand, rate = excluded.rate, expires_at = excluded.expires_at`,
			pool, holder, demand, rate, ttl.Seconds())
		return err
	})
	if err != nil {
		return 0, translate(err, fmt.Sprintf("renewing the rate lease of %s", holder))
	}
	return rate, nil
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
