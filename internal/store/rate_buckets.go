package store

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeaseTokens takes up to want tokens from the central bucket of a tenant's kind of request: a GCRA of
// rate tokens per second holding at most burst, shared by every ingress replica (internal/ratelimit leases
// small batches from it, so no request waits for PostgreSQL unless its replica ran out). It returns how
// many tokens it took, how many the bucket holds after that, and, when it took none, how long until one is
// free.
func (s *Store) LeaseTokens(ctx context.Context, tenantID, kind string, want int, rate float64, burst int) (got, left int, wait time.Duration, err error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	iv := 1 / rate // seconds per token
	for try := 0; try < 2; try++ {
		var ahead float64
		err = s.pool.QueryRow(ctx, `
			WITH cur AS (
				-- What is owed is counted in tokens: under a changed rate it takes another time to pay back.
				SELECT now() + GREATEST(tat - now(), interval '0') * (rate / (1 / $4::float8)) AS base
				FROM rate_buckets WHERE tenant_id = $1 AND kind = $2 FOR UPDATE
			), a AS (
				SELECT base, GREATEST(0, floor(($5::int * $4::float8 - extract(epoch FROM base - now())::float8) / $4::float8))::int AS avail FROM cur
			), g AS (
				SELECT base, avail, LEAST($3::int, avail) AS n FROM a
			)
			UPDATE rate_buckets r SET tat = g.base + make_interval(secs => g.n * $4::float8), rate = 1 / $4::float8
			FROM g WHERE r.tenant_id = $1 AND r.kind = $2
			RETURNING g.n, g.avail - g.n, extract(epoch FROM g.base - now())::float8`,
			tenantID, kind, want, iv, burst).Scan(&got, &left, &ahead)
		if errors.Is(err, pgx.ErrNoRows) {
			// A tenant's first request of this kind: a full bucket.
			if _, err = s.pool.Exec(ctx, `INSERT INTO rate_buckets (tenant_id, kind, tat, rate) VALUES ($1, $2, now(), $3) ON CONFLICT DO NOTHING`,
				tenantID, kind, rate); err != nil {
				return 0, 0, 0, translate(err, "creating a rate bucket")
			}
			continue
		}
		if err != nil {
			return 0, 0, 0, translate(err, "leasing rate tokens")
		}
		if got == 0 {
			// One token is free once the bucket's theoretical arrival time is within burst-1 intervals.
			wait = time.Duration(math.Max(0, ahead-float64(burst-1)*iv) * float64(time.Second))
		}
		return got, left, wait, nil
	}
	return 0, 0, 0, translate(err, "leasing rate tokens")
}

// Refusals counts requests refused over a tenant's limit of a kind.
type Refusals struct {
	TenantID string
	Kind     string
	Count    int64
}

// AddRefusals adds counts to the current minute's, and drops rows older than a day.
func (s *Store) AddRefusals(ctx context.Context, rs []Refusals) error {
	if len(rs) == 0 {
		return nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tenants := make([]string, len(rs))
	kinds := make([]string, len(rs))
	counts := make([]int64, len(rs))
	for i, r := range rs {
		tenants[i], kinds[i], counts[i] = r.TenantID, r.Kind, r.Count
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO rate_refusals AS r (tenant_id, kind, minute, count)
			SELECT t, k, date_trunc('minute', now()), c FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(t, k, c)
			ON CONFLICT (tenant_id, kind, minute) DO UPDATE SET count = r.count + EXCLUDED.count`, tenants, kinds, counts); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM rate_refusals WHERE minute < now() - interval '1 day'`)
		return err
	})
	return translate(err, "counting refused requests")
}

// RecentRefusals sums the tenants' refusals of the last window, by tenant and kind.
func (s *Store) RecentRefusals(ctx context.Context, tenantIDs []string, window time.Duration) ([]Refusals, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT tenant_id, kind, sum(count)::bigint FROM rate_refusals
		WHERE tenant_id = ANY($1) AND minute > now() - $2::interval
		GROUP BY tenant_id, kind ORDER BY tenant_id, kind`, tenantIDs, window.String())
	if err != nil {
		return nil, translate(err, "reading refused requests")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Refusals, error) {
		var x Refusals
		err := r.Scan(&x.TenantID, &x.Kind, &x.Count)
		return x, err
	})
	return out, translate(err, "reading refused requests")
}
