package store

import (
	"slices"
	"strings"
	"time"
)

// Status is a notification's state, the value of notifications.status. The transitions between states are
// the delivery state machine's (internal/delivery/state.go) and the tenant's (cancel, expiry, the
// scheduler: lifecycle.go); which states a worker may claim, a tenant may cancel, the clock may expire,
// and which never change again are defined here, once, for the SQL (claimSQL, cancellableSQL, expirableSQL,
// terminalSQL) and for Go (Claimable, Cancellable, Expirable, Terminal) alike.
type Status string

// The states of the contract.
const (
	StatusScheduled  Status = "scheduled"  // waiting in PostgreSQL for send_at; not on Kafka yet
	StatusQueued     Status = "queued"     // accepted and on Kafka, waiting for a worker
	StatusDelivering Status = "delivering" // a worker holds it under a lease
	StatusDelivered  Status = "delivered"  // the platform accepted it
	StatusRetrying   Status = "retrying"   // a transient failure; next_attempt_at says when again
	StatusBlocked    Status = "blocked"    // the user blocked the bot or is deactivated
	StatusFailed     Status = "failed"     // a permanent error, or attempts exhausted
	StatusUnlinked   Status = "unlinked"   // no link, or the platform does not know the chat
	StatusCancelled  Status = "cancelled"  // cancelled by the tenant, or by the erasure of its user: never sent
	StatusExpired    Status = "expired"    // expires_at passed before it was delivered: no attempt starts after it
)

// Statuses lists every state (the CHECK constraint on notifications.status holds the same list; a test
// compares them).
var Statuses = []Status{StatusScheduled, StatusQueued, StatusDelivering, StatusDelivered, StatusRetrying,
	StatusBlocked, StatusFailed, StatusUnlinked, StatusCancelled, StatusExpired}

// ParseStatus returns the state named s, or false.
func ParseStatus(s string) (Status, bool) {
	st := Status(s)
	return st, slices.Contains(Statuses, st)
}

// terminalStatuses never change again.
var terminalStatuses = []Status{StatusDelivered, StatusBlocked, StatusFailed, StatusUnlinked, StatusCancelled, StatusExpired}

// Terminal reports whether s never changes again.
func (s Status) Terminal() bool { return slices.Contains(terminalStatuses, s) }

// cancellableStatuses are the states a cancel (or the erasure of the user) moves to cancelled, and a relink
// to another account to unlinked: those in which no attempt is running. A delivering notification is being
// sent; a terminal one is over.
var cancellableStatuses = []Status{StatusScheduled, StatusQueued, StatusRetrying}

// Cancellable reports whether a notification in state s may be cancelled.
func (s Status) Cancellable() bool { return slices.Contains(cancellableStatuses, s) }

// cancellableSQL is Cancellable as a SQL condition on a notifications row.
var cancellableSQL = statusIn(cancellableStatuses)

// A rule says when a state qualifies, as a SQL condition on the row and the same condition in Go.
type rule struct {
	sql string
	ok  func(nextAttemptAt, leaseExpiresAt *time.Time, now time.Time) bool
}

var always = rule{"true", func(_, _ *time.Time, _ time.Time) bool { return true }}

// leaseRanOut: a delivering notification whose worker died (its lease expired without a result).
var leaseRanOut = rule{"lease_expires_at < now()",
	func(_, lease *time.Time, now time.Time) bool { return lease != nil && lease.Before(now) }}

// claimRules say, per state a worker may claim, when it may. A state without a rule is never claimable.
var claimRules = map[Status]rule{
	StatusQueued: always,
	StatusRetrying: {"COALESCE(next_attempt_at, '-infinity') <= now()",
		func(next, _ *time.Time, now time.Time) bool { return next == nil || !next.After(now) }},
	StatusDelivering: leaseRanOut,
}

// notExpiredSQL: no attempt starts at or after expires_at.
const notExpiredSQL = "(expires_at IS NULL OR expires_at > now())"

func notExpired(expiresAt *time.Time, now time.Time) bool {
	return expiresAt == nil || expiresAt.After(now)
}

// Claimable reports whether a worker may start an attempt on a notification in state s now: queued, a
// retry that is due, or delivering under a lease that ran out (its worker died) — and in every case only
// before its expires_at.
func (s Status) Claimable(nextAttemptAt, leaseExpiresAt, expiresAt *time.Time, now time.Time) bool {
	r, ok := claimRules[s]
	return ok && r.ok(nextAttemptAt, leaseExpiresAt, now) && notExpired(expiresAt, now)
}

// claimSQL is Claimable as a SQL condition on a notifications row.
var claimSQL = "(" + rulesSQL(claimRules) + " AND " + notExpiredSQL + ")"

// expireRules say, per state the clock may expire, when: whenever no attempt is running. A delivering
// notification whose attempt is running ends as its attempt decides (a transient failure after expires_at
// is expired: internal/delivery.Decide); one whose worker died expires like a queued one.
var expireRules = map[Status]rule{
	StatusScheduled:  always,
	StatusQueued:     always,
	StatusRetrying:   always,
	StatusDelivering: leaseRanOut,
}

// Expirable reports whether a notification in state s, with that expires_at, must now become expired.
func (s Status) Expirable(expiresAt, leaseExpiresAt *time.Time, now time.Time) bool {
	r, ok := expireRules[s]
	return ok && expiresAt != nil && !now.Before(*expiresAt) && r.ok(nil, leaseExpiresAt, now)
}

// expirableSQL is Expirable as a SQL condition on a notifications row. It names the states of its rules
// with IN, as the partial index notifications_expiry_idx does, so that the sweep can use that index.
var expirableSQL = func() string {
	var states []Status
	for _, s := range Statuses {
		if _, ok := expireRules[s]; ok {
			states = append(states, s)
		}
	}
	return "(expires_at <= now() AND " + statusIn(states) + " AND " + rulesSQL(expireRules) + ")"
}()

// rulesSQL renders rules as "((status = 'a' AND cond) OR …)", in the order of Statuses.
func rulesSQL(rules map[Status]rule) string {
	var parts []string
	for _, s := range Statuses {
		if r, ok := rules[s]; ok {
			parts = append(parts, "(status = '"+string(s)+"' AND "+r.sql+")")
		}
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// statusIn renders "status IN ('a', 'b')". The values are constants of this package, never input.
func statusIn(ss []Status) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = "'" + string(s) + "'"
	}
	return "status IN (" + strings.Join(quoted, ", ") + ")"
}

// terminalSQL is Terminal as a SQL condition on a notifications row.
var terminalSQL = statusIn(terminalStatuses)
