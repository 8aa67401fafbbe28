package store

import (
	"context"
	"io/fs"

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
