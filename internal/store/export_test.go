package store

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
