package notification

import (
	"slices"
	"testing"
	"time"
)

// machine is the state machine of docs/delivery.md ("State machine") and of the v1 extensions' §2, written
// out by hand: for each event, the state it moves each state to; a state it does not name, it does not
// move. None is a notification not stored yet.
var machine = map[Event]map[Status]Status{
	Accept:    {None: Queued},
	Schedule:  {None: Scheduled},
	Release:   {Scheduled: Queued}, // §2: send_at reached
	Claim:     {Queued: Delivering, Retrying: Delivering, Delivering: Delivering},
	Redrive:   {Delivering: Delivering},                                       // the worker died: claimed again
	Deliver:   {Delivering: Delivered},                                        // the platform accepted it
	Retry:     {Delivering: Retrying},                                         // 429, 5xx, no answer; shutdown
	Block:     {Delivering: Blocked},                                          // 403 blocked / deactivated
	Unlink:    {Delivering: Unlinked},                                         // chat not found, can't initiate; 1100, 1101
	Fail:      {Delivering: Failed},                                           // other 4xx, attempts exhausted
	Lapse:     {Delivering: Expired},                                          // §2: fails transiently after expires_at
	Erase:     {Delivering: Cancelled},                                        // the claim found its user erased
	Cancel:    {Scheduled: Cancelled, Queued: Cancelled, Retrying: Cancelled}, // §2
	Expire:    {Scheduled: Expired, Queued: Expired, Retrying: Expired, Delivering: Expired},
	Relink:    {Scheduled: Unlinked, Queued: Unlinked, Retrying: Unlinked},                               // 1101
	ChangeBot: {Scheduled: Unlinked, Queued: Unlinked, Retrying: Unlinked},                               // 1103: §11, the tenant changed its bot
	OptOut:    {Scheduled: Blocked, Queued: Blocked, Retrying: Blocked},                                  // 1106: §9, an opt-out covers it
	Hold:      {Delivering: Scheduled},                                                                   // §14: its turn came inside quiet hours
	Gather:    {Scheduled: Delivering, Queued: Delivering, Retrying: Delivering, Delivering: Delivering}, // §14: another item of its digest was claimed
}

// Every (state, event) pair: the table moves it where the documented machine does, or not at all.
func TestEveryTransitionOfTheDocumentedMachine(t *testing.T) {
	if len(machine) != len(Events) {
		t.Fatalf("the documented machine names %d events, the package %d", len(machine), len(Events))
	}
	for _, e := range Events {
		for _, from := range append([]Status{None}, Statuses...) {
			got, ok := from.Next(e)
			want, allowed := machine[e][from]
			switch {
			case allowed && (!ok || got != want):
				t.Errorf("%s from %q: %q (allowed %v), want %q", e, from, got, ok, want)
			case !allowed && ok:
				t.Errorf("%s from %q: %q, want not allowed", e, from, got)
			}
		}
	}
}

// The conditions of the transitions: when each may happen, for each state it leaves.
func TestTheConditionsOfTheTransitions(t *testing.T) {
	now := time.Now()
	past, future := now.Add(-time.Hour), now.Add(time.Hour)
	cases := []struct {
		name    string
		from    Status
		event   Event
		row     Row
		allowed bool
	}{
		{"release at send_at", Scheduled, Release, Row{SendAt: &past}, true},
		{"release before send_at", Scheduled, Release, Row{SendAt: &future}, false},
		{"release past expires_at: the expiry's", Scheduled, Release, Row{SendAt: &past, ExpiresAt: &past}, false},
		{"release before expires_at", Scheduled, Release, Row{SendAt: &past, ExpiresAt: &future}, true},

		{"claim queued", Queued, Claim, Row{}, true},
		{"claim queued before expires_at", Queued, Claim, Row{ExpiresAt: &future}, true},
		{"claim queued at expires_at", Queued, Claim, Row{ExpiresAt: &now}, false},
		{"claim a due retry", Retrying, Claim, Row{NextAttemptAt: &past}, true},
		{"claim a retry without a due time", Retrying, Claim, Row{}, true},
		{"claim a retry not due", Retrying, Claim, Row{NextAttemptAt: &future}, false},
		{"claim a due retry past expires_at", Retrying, Claim, Row{NextAttemptAt: &past, ExpiresAt: &past}, false},
		{"claim under a live lease", Delivering, Claim, Row{LeaseExpiresAt: &future}, false},
		{"claim after the lease ran out", Delivering, Claim, Row{LeaseExpiresAt: &past}, true},
		{"claim after the lease ran out, past expires_at", Delivering, Claim, Row{LeaseExpiresAt: &past, ExpiresAt: &past}, false},
		{"claim scheduled", Scheduled, Claim, Row{SendAt: &past}, false},

		{"redrive after the lease ran out", Delivering, Redrive, Row{LeaseExpiresAt: &past}, true},
		{"redrive under a live lease", Delivering, Redrive, Row{LeaseExpiresAt: &future}, false},

		{"expire at expires_at", Queued, Expire, Row{ExpiresAt: &now}, true},
		{"expire scheduled", Scheduled, Expire, Row{ExpiresAt: &past, SendAt: &future}, true},
		{"expire a retry", Retrying, Expire, Row{ExpiresAt: &past, NextAttemptAt: &future}, true},
		{"expire before expires_at", Queued, Expire, Row{ExpiresAt: &future}, false},
		{"expire without expires_at", Queued, Expire, Row{}, false},
		{"expire under a live lease: the attempt's", Delivering, Expire, Row{ExpiresAt: &past, LeaseExpiresAt: &future}, false},
		{"expire after the lease ran out", Delivering, Expire, Row{ExpiresAt: &past, LeaseExpiresAt: &past}, true},

		{"cancel whatever the times", Retrying, Cancel, Row{NextAttemptAt: &future, ExpiresAt: &past}, true},
		{"cancel delivering", Delivering, Cancel, Row{LeaseExpiresAt: &past}, false},
		{"relink queued", Queued, Relink, Row{}, true},
		{"relink delivering", Delivering, Relink, Row{LeaseExpiresAt: &future}, false},
		{"a change of bot ends a scheduled one", Scheduled, ChangeBot, Row{SendAt: &future}, true},
		{"a change of bot ends a retry not due", Retrying, ChangeBot, Row{NextAttemptAt: &future}, true},
		{"a change of bot leaves a running attempt to it", Delivering, ChangeBot, Row{LeaseExpiresAt: &future}, false},
		{"a change of bot leaves a terminal one", Delivered, ChangeBot, Row{}, false},
		{"an opt-out ends a scheduled one", Scheduled, OptOut, Row{SendAt: &future}, true},
		{"an opt-out ends a retry not due, past expires_at", Retrying, OptOut, Row{NextAttemptAt: &future, ExpiresAt: &past}, true},
		{"an opt-out leaves a running attempt to it (the claim checked before it)", Delivering, OptOut, Row{LeaseExpiresAt: &future}, false},
		{"an opt-out leaves a terminal one", Cancelled, OptOut, Row{}, false},
		{"an outcome under a lease that ran out", Delivering, Deliver, Row{LeaseExpiresAt: &past}, true},
		{"an outcome of a terminal one", Delivered, Retry, Row{}, false},
	}
	for _, c := range cases {
		if got := c.event.Allows(c.from, c.row, now); got != c.allowed {
			t.Errorf("%s: %s from %s allowed %v, want %v", c.name, c.event, c.from, got, c.allowed)
		}
	}
}

// The guards are the table's: terminal is what no transition leaves (the contract's six), cancellable what
// a cancel leaves; claimable and expirable are the claim's and the expiry's conditions.
func TestTheGuardsAreDerivedFromTheTable(t *testing.T) {
	if got, want := Terminals(), []Status{Delivered, Blocked, Failed, Unlinked, Cancelled, Expired}; !slices.Equal(got, want) {
		t.Errorf("terminal states %v, want %v", got, want)
	}
	if None.Terminal() || Status("bogus").Terminal() {
		t.Error("a value that is no state reads as terminal")
	}
	for _, s := range Statuses {
		if _, ok := s.Next(Cancel); s.Cancellable() != ok {
			t.Errorf("%s: Cancellable %v, the table's cancel %v", s, s.Cancellable(), ok)
		}
		if s.Terminal() && (s.Cancellable() || s.Claimable(nil, nil, nil, time.Now())) {
			t.Errorf("%s is terminal and yet cancellable or claimable", s)
		}
	}
	past := time.Now().Add(-time.Minute)
	if !Delivering.Claimable(nil, &past, nil, time.Now()) || Delivering.Expirable(&past, nil, time.Now()) {
		t.Error("Claimable and Expirable do not read the lease")
	}
	if !Delivering.Expirable(&past, &past, time.Now()) || Queued.Claimable(nil, nil, &past, time.Now()) {
		t.Error("Claimable and Expirable do not read expires_at")
	}
}

// The states are reachable from a send, an event moves to one state, and only a send leaves None.
func TestTheTableIsWellFormed(t *testing.T) {
	reached := map[Status]bool{None: true}
	for changed := true; changed; {
		changed = false
		for _, e := range Events {
			for from := range reached {
				if to, ok := from.Next(e); ok && !reached[to] {
					reached[to], changed = true, true
				}
			}
		}
	}
	for _, s := range Statuses {
		if !reached[s] {
			t.Errorf("%s cannot be reached", s)
		}
	}
	for _, e := range Events {
		for _, s := range e.From() {
			if to, _ := s.Next(e); to != e.To() {
				t.Errorf("%s moves %s to %s, and elsewhere to %s", e, s, to, e.To())
			}
		}
		if _, ok := None.Next(e); ok != (e == Accept || e == Schedule) {
			t.Errorf("%s from None: %v", e, ok)
		}
	}
	for _, e := range Outcomes {
		if !slices.Equal(e.From(), []Status{Delivering}) {
			t.Errorf("the outcome %s leaves %v, want delivering only (the status write is guarded by it)", e, e.From())
		}
	}
}

// The SQL names the states the way the partial indexes' predicates do (migrations 00006 and 00008), so that
// the statements that render it can use them.
func TestTheSQLNamesTheStatesAsTheIndexesDo(t *testing.T) {
	cases := []struct{ got, want string }{
		{InFlightSQL(), "status NOT IN ('scheduled', 'queued', 'delivering', 'retrying')"},
		{TerminalSQL(), "status IN ('delivered', 'blocked', 'failed', 'unlinked', 'cancelled', 'expired')"},
		{Cancel.SQL(), "status IN ('scheduled', 'queued', 'retrying')"},
		{OutcomeSQL(), "status = 'delivering'"},
		{Queued.SQL(), "'queued'"},
		{KindTenantSQL, "'tenant'"},
		{Redrive.SQL(), "(status = 'delivering' AND lease_expires_at < now())"},
		{Expire.SQL(), "(expires_at <= now() AND status IN ('scheduled', 'queued', 'delivering', 'retrying') AND ((status = 'scheduled' AND true) OR (status = 'queued' AND true) OR (status = 'delivering' AND lease_expires_at < now()) OR (status = 'retrying' AND true)))"},
		{StatusIn(), "false"},
		{Release.SQL(), "(send_at <= now() AND (expires_at IS NULL OR expires_at > now()) AND status = 'scheduled')"},
		{Relink.SQL(), "status IN ('scheduled', 'queued', 'retrying')"},
		{ChangeBot.SQL(), "status IN ('scheduled', 'queued', 'retrying')"},
		{OptOut.SQL(), "status IN ('scheduled', 'queued', 'retrying')"},
		{KindSystemSQL, "'system'"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("rendered %s, want %s", c.got, c.want)
		}
	}
}
