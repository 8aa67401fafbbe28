// Package notification is the one home of a notification's lifecycle: its states and kinds, the
// transitions between the states and the guards derived from them (lifecycle.go), the SQL those guards
// render to for the store, the gateway-side outcomes of an attempt and the retry schedule (attempt.go),
// the partition key of its envelope (key.go), and the resource tenants see (view.go). It imports no other
// package of Herald's: the store, the worker, the ingress and the callbacks all ask it.
package notification

import (
	"slices"
	"strings"
)

// Status is a notification's state, the value of notifications.status.
type Status string

// The states of the contract.
const (
	Scheduled  Status = "scheduled"  // waiting in PostgreSQL for send_at; not on Kafka yet
	Queued     Status = "queued"     // accepted and on Kafka, waiting for a worker
	Delivering Status = "delivering" // a worker holds it under a lease
	Delivered  Status = "delivered"  // the platform accepted it
	Retrying   Status = "retrying"   // a transient failure; next_attempt_at says when again
	Blocked    Status = "blocked"    // the user blocked the bot or is deactivated
	Failed     Status = "failed"     // a permanent error, or attempts exhausted
	Unlinked   Status = "unlinked"   // no link, or the platform does not know the chat
	Cancelled  Status = "cancelled"  // cancelled by the tenant, or by the erasure of its user: never sent
	Expired    Status = "expired"    // expires_at passed before it was delivered: no attempt starts after it
)

// None is no state: a notification not stored yet. Only a send (Accept, Schedule) leaves it; it is not
// one of Statuses.
const None Status = ""

// Statuses lists every state (the CHECK constraint on notifications.status holds the same list; a test of
// the store compares them). Every list of states this package renders keeps this order.
var Statuses = []Status{Scheduled, Queued, Delivering, Delivered, Retrying, Blocked, Failed, Unlinked, Cancelled, Expired}

// ParseStatus returns the state named s, or false.
func ParseStatus(s string) (Status, bool) {
	st := Status(s)
	return st, slices.Contains(Statuses, st)
}

// SQL renders the state as a SQL literal ('queued'). The values are this package's constants, never input.
func (s Status) SQL() string { return "'" + string(s) + "'" }

// StatusIn renders the condition that a notifications row is in one of ss: "status IN ('a', 'b')", or
// "status = 'a'" for one state (the form of the partial indexes' predicates), in the order given; false for
// none.
func StatusIn(ss ...Status) string {
	switch len(ss) {
	case 0:
		return "false"
	case 1:
		return "status = " + ss[0].SQL()
	}
	return "status IN (" + literals(ss) + ")"
}

// StatusNotIn renders the condition that a notifications row is in none of ss: "status NOT IN ('a', 'b')".
func StatusNotIn(ss ...Status) string { return "status NOT IN (" + literals(ss) + ")" }

func literals(ss []Status) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = s.SQL()
	}
	return strings.Join(quoted, ", ")
}

// The kinds of notification, the values of notifications.kind: a tenant's notification to one of its
// users, or Herald's own system message to a chat (a link confirmation, a verification prompt, a reply).
const (
	KindTenant = "tenant"
	KindSystem = "system"
)

// The kinds as SQL literals.
const (
	KindTenantSQL = "'" + KindTenant + "'"
	KindSystemSQL = "'" + KindSystem + "'"
)
