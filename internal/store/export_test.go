package store

import (
	"context"
	"io/fs"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/usage"
	"github.com/jackc/pgx/v5"
)

// Internals the external tests check.

// SchedulerLockForTest is the advisory lock of the one scheduler at a time.
const SchedulerLockForTest = schedulerLock

// ListSQLForTest, ReleaseSQLForTest and ExpireDueSQLForTest are the queries whose plans the tests check.
var (
	ListSQLForTest    = listSQL
	ReleaseSQLForTest = releaseSQL
)

// ExpireDueSQLForTest is the expiry sweep's statement.
func ExpireDueSQLForTest() string { return expireDueSQL }

// LockUserGateForTest takes, in tx, the lock an erasure of the user takes first.
func LockUserGateForTest(ctx context.Context, tx pgx.Tx, tenantID, userID string) error {
	_, err := tx.Exec(ctx, eraseGateSQL, userGateBucket(tenantID, userID))
	return err
}

// PurgeSQLForTest returns each kind's purge statement, for EXPLAIN in tests.
func PurgeSQLForTest() map[PurgeKind]string {
	out := map[PurgeKind]string{}
	for k, r := range purgeRules {
		out[k] = r.purge
	}
	return out
}

// FinishUpdateSQL is the status write of FinishDelivery without its callback events: what the statement was
// before callbacks, for the benchmark that measures what they add.
var FinishUpdateSQL = finishUpdateSQL

// MigrationsForTest are the embedded migrations, for tests that move a database between versions.
func MigrationsForTest() fs.FS { return mustSub(migrations, "migrations") }

// LockTenantBotForTest takes, in tx, the lock a change of the tenant's bot takes first.
func LockTenantBotForTest(ctx context.Context, tx pgx.Tx, tenantID string) error {
	_, err := tx.Exec(ctx, `SELECT `+tenantBotLockSQL(`pg_advisory_xact_lock`, `$1::text`), tenantID)
	return err
}

// LockTenantBotSharedForTest takes, in tx, the lock a redemption of the tenant's link token takes first.
func LockTenantBotSharedForTest(ctx context.Context, tx pgx.Tx, tenantID string) error {
	_, err := tx.Exec(ctx, `SELECT `+tenantBotLockSQL(`pg_advisory_xact_lock_shared`, `$1::text`), tenantID)
	return err
}

// Reads and a renewal that only the tests call: the product reads the same rows through its own statements
// (ChatTenants reads the opt-outs and the categories sent; the worker renews with ShareRates).

// OptOutsOf lists a tenant's user's opt-outs, the whole tenant's first, then by category.
func (s *Store) OptOutsOf(ctx context.Context, tenantID, userID string) ([]consent.Record, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `SELECT category, by, created_at FROM opt_outs WHERE tenant_id = $1 AND user_id = $2 ORDER BY category`,
		tenantID, userID)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (consent.Record, error) {
		var o consent.Record
		err := r.Scan(&o.Category, &o.By, &o.CreatedAt)
		return o, err
	})
	return out, translate(err, "listing opt-outs")
}

var sentCategoriesSQL = sentCategoriesLimit(`$1`, `$2`, `$3`, 0)

// SentCategories lists the categories the tenant sent its user in the last 30 days (consent.SentCategoriesWindow),
// among its latest SentCategoriesScan notifications, each once, sorted: what /stop offers besides the whole
// tenant.
func (s *Store) SentCategories(ctx context.Context, tenantID, userID string) ([]string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var out []string
	err := s.pool.QueryRow(ctx, sentCategoriesSQL, tenantID, userID, consent.SentCategoriesWindow.String()).Scan(&out)
	return out, translate(err, "listing the categories sent")
}

// ShareRate renews holder's lease in pool. Under the pool's lock it drops the leases that expired, records
// holder's demand, and calls decide with holder's current lease (Rate 0 for a new one) and the other live
// leases; the rate decide returns is written with a fresh expiry, now + ttl by the database's clock. decide
// runs before the commit, so a holder that lowers its rate does so while nobody can count on what it gives
// up yet. On error nothing was renewed, though decide may have run.
func (s *Store) ShareRate(ctx context.Context, pool, holder string, demand float64, ttl time.Duration,
	decide func(mine RateLease, others []RateLease) float64) (float64, error) {
	rates, err := s.ShareRates(ctx, holder, ttl, []RateShare{{Pool: pool, Demand: demand, Decide: decide}})
	if err != nil {
		return 0, err
	}
	return rates[0], nil
}

// UserGateBucketForTest is the gate bucket a user's sends and erasure lock (one of the 1,024 every tenant shares).
func UserGateBucketForTest(tenantID, userID string) int32 { return userGateBucket(tenantID, userID) }

// CountUsageForTest adds n accepted to tenant's hour through the counting statement's own SQL (countUsage,
// which every change that counts runs): one shard, picked at random, created or added to. A count whose
// statement began before hour ended lands in hour after the fold moved it: this is such a late count.
func CountUsageForTest(ctx context.Context, s *Store, tenantID string, hour time.Time, n int) error {
	_, err := s.pool.Exec(ctx, `WITH src AS (SELECT $1::text AS tenant_id, $2::timestamptz AS at, $3::int AS n),
		`+countUsage("counted", "src", "at", []usage.Delta{{Column: usage.Accepted, SQL: "n"}})+`
		SELECT 1`, tenantID, hour, n)
	return err
}

// ClaimManySQLForTest and FinishSQLForTest are the worker's batched claim and status write, whose plans
// under StablePlans the tests check.
var (
	ClaimManySQLForTest = claimManySQL
	FinishSQLForTest    = finishSQL
)
