// Package callbackstate is the lifecycle of a callback event (spec §10), as data below the store:
//
//	(none) ──record──▶ pending ──deliver (a 2xx in time)──▶ delivered
//	                   pending ──retry (a failure, within the retry window)──▶ pending
//	                   pending ──drop (the window passed, or nothing to send)──▶ dropped
//
// A claim leases a pending event without changing its state; a pending event is the outbox's, a delivered
// or dropped one is finished and kept for retention only. The CHECK constraint on callback_events.state
// holds the same list (TestStatesMatchTheSchema in internal/store).
package callbackstate

// State is a callback event's state.
type State string

// The states of a callback event.
const (
	Pending   State = "pending"   // waiting to be sent, or retried
	Delivered State = "delivered" // the endpoint answered 2xx in time
	Dropped   State = "dropped"   // given up: no answer within the retry window, or nothing to send
)

// States lists every state.
var States = []State{Pending, Delivered, Dropped}

// SQL is s as a SQL literal.
func (s State) SQL() string { return "'" + string(s) + "'" }

// Finished tells whether s is final (delivered or dropped).
func (s State) Finished() bool { return s != Pending }
