package notification

// The state machine, as data: every transition is one row of the table below, and every rule — which
// states a worker may claim, a tenant may cancel, the clock may expire, a relink ends, which never change
// again — is derived from it, for Go and for the SQL of the store alike. A transition that is not in the
// table does not exist.
//
//	(none) ──accept──▶ queued                                          a send, or a system message
//	(none) ──schedule──▶ scheduled                                     a send whose send_at is ahead
//	scheduled ──release (at send_at)──▶ queued                         waits in PostgreSQL, not on Kafka
//	queued, retrying (due) ──claim──▶ delivering ──deliver──▶ delivered   the platform accepted it
//	                                     │     ──retry──▶ retrying      a transient failure; claimed again when due
//	                                     │     ──block──▶ blocked       403 blocked / deactivated; or, without a send,
//	                                     │                               the claim found the link blocked (CodeBlocked)
//	                                     │                               or an opt-out covering it (CodeOptedOut)
//	                                     │     ──unlink──▶ unlinked     no link, relinked, chat not found, can't initiate
//	                                     │     ──fail──▶ failed         other 4xx, or attempts exhausted
//	                                     │     ──lapse──▶ expired       a transient failure after expires_at
//	                                     │     ──erase──▶ cancelled     without a send: the claim found its user
//	                                     │                               erased (the erasure's pass had not ended it)
//	delivering past its lease ──redrive, claim──▶ delivering           the worker died
//	delivering ──hold──▶ scheduled                                     its turn came inside the tenant's quiet hours
//	scheduled, queued, retrying ──gather──▶ delivering                 a worker claimed another item of its digest
//	delivering past its lease ──gather──▶ delivering                   likewise, once the worker that had it died
//	                                                                   (mode hold, §14): it waits for the window's end
//	scheduled, queued, retrying ──cancel──▶ cancelled                  the tenant, or the erasure of its user
//	scheduled, queued, retrying ──expire──▶ expired                    expires_at passed (the sweep, or the claim)
//	delivering past its lease ──expire──▶ expired                      likewise, once its worker died
//	scheduled, queued, retrying ──relink──▶ unlinked                   the user linked another account (CodeRelinked)
//	scheduled, queued, retrying ──change bot──▶ unlinked               the tenant changed its bot (CodeBotChanged)
//	scheduled, queued, retrying ──opt out──▶ blocked                   an opt-out of the tenant or its category (CodeOptedOut)
//
// No attempt starts at or after expires_at: the claim's guard. Each transition is one guarded statement of
// internal/store; an attempt's outcome is chosen by internal/delivery (Decide) and written under the
// attempt's number.

import (
	"slices"
	"strings"
	"time"
)

// Event is what moves a notification from one state to another.
type Event string

// The events of the lifecycle.
const (
	Accept   Event = "accept"   // a send whose send_at has come (or that has none), or a system message
	Schedule Event = "schedule" // a send whose send_at is ahead: stored, not published
	Release  Event = "release"  // the scheduler, once send_at has come
	Claim    Event = "claim"    // a worker starts an attempt
	Redrive  Event = "redrive"  // the lease of an attempt ran out (its worker died): published again, for a claim

	// The outcomes of an attempt (Outcomes), written by its worker under the attempt's number.
	Deliver Event = "deliver" // the platform accepted it
	Retry   Event = "retry"   // a transient failure with attempts left before expires_at, or shutdown cut the attempt short
	Block   Event = "block"   // the user blocked the bot or is deactivated (a 403), or the claim found a block or an opt-out (Delivery.Stopped)
	Unlink  Event = "unlink"  // the platform does not know the chat, or the user has no link (CodeNoLink) or another one (CodeRelinked)
	Fail    Event = "fail"    // a permanent error, or the last allowed attempt failed transiently
	Lapse   Event = "lapse"   // a transient failure after expires_at
	// Erase: the claim found the notification's user erased after it was accepted, before the erasure's
	// pass cancelled it (issue 35: the erasure commits first, the user's notifications end after it, in
	// chunks): it ends cancelled, as the pass would have ended it, without a send.
	Erase Event = "erase"

	Cancel Event = "cancel" // the tenant, or the erasure of the user
	Expire Event = "expire" // expires_at passed: the expiry sweep, or the claim that finds it so
	Relink Event = "relink" // the user linked another messenger account: what waits for the old one ends
	// ChangeBot: the tenant changed its bot (§11): the links made through the old bot end, and what waits to
	// go through them with it.
	ChangeBot Event = "change_bot"
	// OptOut: the user (in the chat) or the tenant (through the API) opted the user out of the tenant's
	// notifications, or of one category of them (§9): what waits and is covered ends, after the opt-out
	// commits, in chunks (the claim refuses it meanwhile); one whose attempt runs was claimed before the
	// opt-out.
	OptOut Event = "opt_out"
	// Hold: a worker claimed a notification whose turn came inside its tenant's quiet hours (mode hold,
	// v1 extensions §14; a retry, a backlog, a send_at inside the window, or hours set after its
	// acceptance): nothing is sent, and it waits in scheduled with send_at at the window's end. Written
	// under the attempt's number, like an outcome; the attempt does not count.
	Hold Event = "hold"
	// Gather: a worker claimed a notification of a digest (§14) and takes the digest's other items with it,
	// under the same lease, to send them as one message: the waiting ones, and those whose worker died.
	Gather Event = "gather"
)

// Events lists every event.
var Events = []Event{Accept, Schedule, Release, Claim, Redrive, Deliver, Retry, Block, Unlink, Fail, Lapse, Erase, Cancel, Expire, Relink, ChangeBot, OptOut, Hold, Gather}

// Outcomes are the events that end an attempt, one for each state an attempt may end in.
var Outcomes = []Event{Deliver, Retry, Block, Unlink, Fail, Lapse, Erase}

// Row is what the conditions of the transitions read of a notification besides its state.
type Row struct {
	SendAt         *time.Time
	ExpiresAt      *time.Time
	NextAttemptAt  *time.Time // retrying: when the next attempt is due
	LeaseExpiresAt *time.Time // delivering: when the attempt's lease runs out
}

// A condition says when a transition may happen, as a SQL condition on a notifications row and as the
// same test in Go.
type condition struct {
	sql   string
	holds func(r Row, now time.Time) bool
}

// always is the condition that always holds (the zero condition).
var always = condition{}

func (c condition) unconditional() bool { return c.holds == nil }

func (c condition) holdsFor(r Row, now time.Time) bool { return c.unconditional() || c.holds(r, now) }

func (c condition) render() string {
	if c.unconditional() {
		return "true"
	}
	return c.sql
}

// both holds when a and b do.
func both(a, b condition) condition {
	return condition{a.sql + " AND " + b.sql, func(r Row, now time.Time) bool { return a.holds(r, now) && b.holds(r, now) }}
}

var (
	// notExpired: no attempt starts at or after expires_at.
	notExpired = condition{"(expires_at IS NULL OR expires_at > now())",
		func(r Row, now time.Time) bool { return r.ExpiresAt == nil || r.ExpiresAt.After(now) }}
	expiresAtPassed = condition{"expires_at <= now()",
		func(r Row, now time.Time) bool { return r.ExpiresAt != nil && !now.Before(*r.ExpiresAt) }}
	sendAtReached = condition{"send_at <= now()",
		func(r Row, now time.Time) bool { return r.SendAt != nil && !now.Before(*r.SendAt) }}
	retryDue = condition{"COALESCE(next_attempt_at, '-infinity') <= now()",
		func(r Row, now time.Time) bool { return r.NextAttemptAt == nil || !r.NextAttemptAt.After(now) }}
	// leaseRanOut: a delivering notification whose worker died (its lease expired without a result).
	leaseRanOut = condition{"lease_expires_at < now()",
		func(r Row, now time.Time) bool { return r.LeaseExpiresAt != nil && r.LeaseExpiresAt.Before(now) }}
)

// A transition: on Event, a notification in one of From moves to To, when When holds and the event's guard
// does.
type transition struct {
	from  []Status
	event Event
	to    Status
	when  condition
}

// waiting are the states in which no attempt is running and nothing has ended the notification: a cancel,
// the clock, a relink, a change of bot and an opt-out end it there. A delivering notification is its attempt's; a terminal one is over.
var waiting = []Status{Scheduled, Queued, Retrying}

// transitions is the state machine. An event has one To; a state appears at most once per event.
var transitions = []transition{
	{[]Status{None}, Accept, Queued, always},
	{[]Status{None}, Schedule, Scheduled, always},
	{[]Status{Scheduled}, Release, Queued, always},

	{[]Status{Queued}, Claim, Delivering, always},
	{[]Status{Retrying}, Claim, Delivering, retryDue},
	{[]Status{Delivering}, Claim, Delivering, leaseRanOut},
	{[]Status{Delivering}, Redrive, Delivering, leaseRanOut},

	{[]Status{Delivering}, Deliver, Delivered, always},
	{[]Status{Delivering}, Retry, Retrying, always},
	{[]Status{Delivering}, Block, Blocked, always},
	{[]Status{Delivering}, Unlink, Unlinked, always},
	{[]Status{Delivering}, Fail, Failed, always},
	{[]Status{Delivering}, Lapse, Expired, always},
	{[]Status{Delivering}, Erase, Cancelled, always},

	{waiting, Cancel, Cancelled, always},
	{waiting, Expire, Expired, always},
	{[]Status{Delivering}, Expire, Expired, leaseRanOut},
	{waiting, Relink, Unlinked, always},
	{waiting, ChangeBot, Unlinked, always},
	{waiting, OptOut, Blocked, always},
	{[]Status{Delivering}, Hold, Scheduled, always},
	{waiting, Gather, Delivering, always},
	{[]Status{Delivering}, Gather, Delivering, leaseRanOut},
}

// guards hold for every transition of their event.
var guards = map[Event]condition{
	Release: both(sendAtReached, notExpired),
	Claim:   notExpired,
	Gather:  notExpired,
	Expire:  expiresAtPassed,
}

// find returns the transition of e that leaves s.
func find(s Status, e Event) (transition, bool) {
	for _, t := range transitions {
		if t.event == e && slices.Contains(t.from, s) {
			return t, true
		}
	}
	return transition{}, false
}

// Next returns the state e moves a notification in state s to, or false when no transition of e leaves s.
// It ignores the conditions: Allows says whether the transition may happen now.
func (s Status) Next(e Event) (Status, bool) {
	t, ok := find(s, e)
	return t.to, ok
}

// Allows reports whether e moves a notification in state s, with r, at now.
func (e Event) Allows(s Status, r Row, now time.Time) bool {
	t, ok := find(s, e)
	return ok && guards[e].holdsFor(r, now) && t.when.holdsFor(r, now)
}

// From lists the states e moves a notification from, in the order of Statuses.
func (e Event) From() []Status {
	var from []Status
	for _, s := range Statuses {
		if _, ok := find(s, e); ok {
			from = append(from, s)
		}
	}
	return from
}

// To is the state e moves a notification to.
func (e Event) To() Status {
	for _, t := range transitions {
		if t.event == e {
			return t.to
		}
	}
	return None
}

// SQL renders Allows as a condition on a notifications row: the event's guard, then its states with IN —
// the form of the partial indexes' predicates, so that a statement can use them —, then, when a state
// needs more, each state's condition. Accept and Schedule, which leave no row, render false.
func (e Event) SQL() string {
	from := e.From()
	var parts []string
	if g, ok := guards[e]; ok {
		parts = append(parts, g.sql)
	}
	parts = append(parts, StatusIn(from...))
	var rules []string
	conditional := false
	for _, s := range from {
		t, _ := find(s, e)
		conditional = conditional || !t.when.unconditional()
		rules = append(rules, "(status = "+s.SQL()+" AND "+t.when.render()+")")
	}
	switch {
	case conditional && len(from) == 1:
		t, _ := find(from[0], e)
		parts = append(parts, t.when.sql)
	case conditional:
		parts = append(parts, "("+strings.Join(rules, " OR ")+")")
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " AND ") + ")"
}

// Terminal reports whether s is a state that never changes again: no transition leaves it.
func (s Status) Terminal() bool {
	if !slices.Contains(Statuses, s) {
		return false
	}
	for _, t := range transitions {
		if slices.Contains(t.from, s) {
			return false
		}
	}
	return true
}

// Terminals lists the states that never change again, in the order of Statuses.
func Terminals() []Status {
	var out []Status
	for _, s := range Statuses {
		if s.Terminal() {
			out = append(out, s)
		}
	}
	return out
}

// TerminalSQL renders Terminal as a condition on a notifications row.
func TerminalSQL() string { return StatusIn(Terminals()...) }

// InFlightSQL renders "not Terminal" as a condition on a notifications row, by naming the states that are
// not terminal with NOT IN: the predicate of notifications_body_kept_idx (migrations 00006 and 00008),
// which a query must repeat for PostgreSQL to use that index.
func InFlightSQL() string {
	var inFlight []Status
	for _, s := range Statuses {
		if !s.Terminal() {
			inFlight = append(inFlight, s)
		}
	}
	return StatusNotIn(inFlight...)
}

// OutcomeSQL renders the condition under which the outcome of an attempt may be written: the row is in the
// state every outcome leaves (the store adds the attempt's number).
func OutcomeSQL() string {
	var from []Status
	for _, e := range Outcomes {
		for _, s := range e.From() {
			if !slices.Contains(from, s) {
				from = append(from, s)
			}
		}
	}
	return StatusIn(from...)
}

// Cancellable reports whether a notification in state s may be cancelled (by its tenant, or the erasure
// of its user).
func (s Status) Cancellable() bool { _, ok := s.Next(Cancel); return ok }

// Claimable reports whether a worker may start an attempt on a notification in state s now: queued, a
// retry that is due, or delivering under a lease that ran out (its worker died) — and in every case only
// before its expires_at.
func (s Status) Claimable(nextAttemptAt, leaseExpiresAt, expiresAt *time.Time, now time.Time) bool {
	return Claim.Allows(s, Row{NextAttemptAt: nextAttemptAt, LeaseExpiresAt: leaseExpiresAt, ExpiresAt: expiresAt}, now)
}

// Expirable reports whether a notification in state s, with that expires_at, must now become expired:
// whenever no attempt is running. A delivering notification whose attempt is running ends as its attempt
// decides (a transient failure after expires_at lapses); one whose worker died expires like a queued one.
func (s Status) Expirable(expiresAt, leaseExpiresAt *time.Time, now time.Time) bool {
	return Expire.Allows(s, Row{ExpiresAt: expiresAt, LeaseExpiresAt: leaseExpiresAt}, now)
}
