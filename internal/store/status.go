package store

import (
	"slices"
	"strings"
	"time"
)

// Status is a notification's state, the value of notifications.status. The transitions between states are
// the delivery state machine's (internal/delivery/state.go); which states a worker may claim and which
// never change again are defined here, once, for the SQL (claimSQL, terminalSQL) and for Go (Claimable,
// Terminal) alike.
type Status string

// The states of the contract.
const (
	StatusQueued     Status = "queued"     // accepted and on Kafka, waiting for a worker
	StatusDelivering Status = "delivering" // a worker holds it under a lease
	StatusDelivered  Status = "delivered"  // the platform accepted it
	StatusRetrying   Status = "retrying"   // a transient failure; next_attempt_at says when again
	StatusBlocked    Status = "blocked"    // the user blocked the bot or is deactivated
	StatusFailed     Status = "failed"     // a permanent error, or attempts exhausted
	StatusUnlinked   Status = "unlinked"   // no link, or the platform does not know the chat
)

// Statuses lists every state (the CHECK constraint on notifications.status holds the same list; a test
// compares them).
var Statuses = []Status{StatusQueued, StatusDelivering, StatusDelivered, StatusRetrying, StatusBlocked, StatusFailed, StatusUnlinked}

// terminalStatuses never change again.
var terminalStatuses = []Status{StatusDelivered, StatusBlocked, StatusFailed, StatusUnlinked}

// Terminal reports whether s never changes again.
func (s Status) Terminal() bool { return slices.Contains(terminalStatuses, s) }

// claimRules say, per state a worker may claim, when it may: a SQL condition on the row, and the same
// condition in Go. A state without a rule is never claimable.
var claimRules = map[Status]struct {
	sql string
	ok  func(nextAttemptAt, leaseExpiresAt *time.Time, now time.Time) bool
}{
	StatusQueued: {"true", func(_, _ *time.Time, _ time.Time) bool { return true }},
	StatusRetrying: {"COALESCE(next_attempt_at, '-infinity') <= now()",
		func(next, _ *time.Time, now time.Time) bool { return next == nil || !next.After(now) }},
	StatusDelivering: {"lease_expires_at < now()",
		func(_, lease *time.Time, now time.Time) bool { return lease != nil && lease.Before(now) }},
}

// Claimable reports whether a worker may start an attempt on a notification in state s now: queued, a
// retry that is due, or delivering under a lease that ran out (its worker died).
func (s Status) Claimable(nextAttemptAt, leaseExpiresAt *time.Time, now time.Time) bool {
	r, ok := claimRules[s]
	return ok && r.ok(nextAttemptAt, leaseExpiresAt, now)
}

// claimSQL is Claimable as a SQL condition on a notifications row.
var claimSQL = func() string {
	var parts []string
	for _, s := range Statuses {
		if r, ok := claimRules[s]; ok {
			parts = append(parts, "(status = '"+string(s)+"' AND "+r.sql+")")
		}
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}()

// terminalSQL is Terminal as a SQL condition on a notifications row.
var terminalSQL = statusIn(terminalStatuses)

// statusIn renders "status IN ('a', 'b')". The values are constants of this package, never input.
func statusIn(ss []Status) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = "'" + string(s) + "'"
	}
	return "status IN (" + strings.Join(quoted, ", ") + ")"
}
