// Package usage is what a tenant sent, counted (v1 extensions §15): the columns of the counts, which
// change of a notification counts in which column — one table, from which the store renders the SQL that
// counts in the statement of the change —, and the window a reader asks for. It stays below the store,
// like internal/notification, whose states it maps.
package usage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/notification"
)

// Column is one count of the usage of a tenant in a period.
type Column string

// The columns, named as in the contract.
const (
	Accepted  Column = "accepted" // a send (or a batch item) stored: queued or scheduled; one whose publish failed (502) is taken back
	Delivered Column = "delivered"
	Failed    Column = "failed"
	Blocked   Column = "blocked"
	Expired   Column = "expired"
	Cancelled Column = "cancelled"
	Unlinked  Column = "unlinked"
	// Edited counts the deliveries that edited the message of their replace_key (§13): delivered too.
	Edited Column = "edited"
	// PaidBroadcast counts the deliveries that carried allow_paid_broadcast (a tenant's bot past the
	// platform's free rate, §11): they are delivered too, and billed by the platform.
	PaidBroadcast Column = "paid_broadcast"
)

// Columns lists every column in the contract's order: the order of Counts, of the table's columns and of
// the CSV of herald usage.
var Columns = []Column{Accepted, Delivered, Failed, Blocked, Expired, Cancelled, Unlinked, Edited, PaidBroadcast}

// endings is the table: the terminal state a notification reaches → the column that counts it. A
// notification reaches one terminal state once (notification.Status.Terminal), in one guarded statement
// of the store, which counts it there: so each is counted once, however many workers tried it.
var endings = []struct {
	state  notification.Status
	column Column
}{
	{notification.Delivered, Delivered},
	{notification.Failed, Failed},
	{notification.Blocked, Blocked},
	{notification.Expired, Expired},
	{notification.Cancelled, Cancelled},
	{notification.Unlinked, Unlinked},
}

// Of returns the column that counts a notification reaching the terminal state s.
func Of(s notification.Status) (Column, bool) {
	for _, e := range endings {
		if e.state == s {
			return e.column, true
		}
	}
	return "", false
}

// Delta is what one row of a statement adds to one column: a SQL expression over that row (0 or 1, -1
// to take a count back).
type Delta struct {
	Column Column
	SQL    string
}

// AcceptedDelta counts a stored tenant notification; DiscardedDelta takes it back (its publish failed and
// the tenant was answered 502: it was never accepted).
var (
	AcceptedDelta  = []Delta{{Accepted, "1"}}
	DiscardedDelta = []Delta{{Accepted, "-1"}}
)

// EndingDeltas counts a notification row that reached a terminal state, rendered from the table: status
// is the SQL expression of its state, paid that of whether its delivery carried allow_paid_broadcast,
// edited that of whether it was delivered by editing its replace_key's message (§13).
func EndingDeltas(status, paid, edited string) []Delta {
	out := make([]Delta, 0, len(endings)+2)
	for _, e := range endings {
		out = append(out, Delta{e.column, "(" + status + " = " + e.state.SQL() + ")::int"})
	}
	delivered := status + " = " + notification.Delivered.SQL()
	return append(out, Delta{PaidBroadcast, "(" + delivered + " AND " + paid + ")::int"},
		Delta{Edited, "(" + delivered + " AND " + edited + ")::int"})
}

// Counts are a period's counts, in the contract's names.
type Counts struct {
	Accepted      int64 `json:"accepted"`
	Delivered     int64 `json:"delivered"`
	Failed        int64 `json:"failed"`
	Blocked       int64 `json:"blocked"`
	Expired       int64 `json:"expired"`
	Cancelled     int64 `json:"cancelled"`
	Unlinked      int64 `json:"unlinked"`
	Edited        int64 `json:"edited"`
	PaidBroadcast int64 `json:"paid_broadcast"`
}

// AppendJSON appends the counts as the members of a JSON object, without its braces, in the names and
// order encoding/json gives them: `"accepted":1,"delivered":0,…`. GET /v1/usage answers up to 9,600
// periods (400 days by the hour); written by hand they cost a tenth of what reflection costs.
func (c *Counts) AppendJSON(b []byte) []byte {
	// The values in an array, not through Fields: no slice allocated per period.
	v := [...]int64{c.Accepted, c.Delivered, c.Failed, c.Blocked, c.Expired, c.Cancelled, c.Unlinked, c.Edited,
		c.PaidBroadcast}
	for i, n := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, Columns[i]...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, n, 10)
	}
	return b
}

// Add adds o's counts to c's.
func (c *Counts) Add(o Counts) {
	c.Accepted += o.Accepted
	c.Delivered += o.Delivered
	c.Failed += o.Failed
	c.Blocked += o.Blocked
	c.Expired += o.Expired
	c.Cancelled += o.Cancelled
	c.Unlinked += o.Unlinked
	c.Edited += o.Edited
	c.PaidBroadcast += o.PaidBroadcast
}

// Fields are pointers to the counts in the order of Columns, for a scan.
func (c *Counts) Fields() []*int64 {
	return []*int64{&c.Accepted, &c.Delivered, &c.Failed, &c.Blocked, &c.Expired, &c.Cancelled, &c.Unlinked,
		&c.Edited, &c.PaidBroadcast}
}

// Period is one tenant's counts in one period (an hour or a UTC day).
type Period struct {
	TenantID string    `json:"tenant_id,omitempty"`
	Start    time.Time `json:"period_start"`
	Counts
}

// Retention is how long the counts are kept (after their hour), and MaxSpan the longest window a reader
// may ask for.
const (
	Retention = 400 * 24 * time.Hour
	MaxSpan   = 400 * 24 * time.Hour
	// DefaultSpan is the window when none is given: the last 30 days.
	DefaultSpan = 30 * 24 * time.Hour
	// SettleAfter is when an hour's shards are folded into one row (the retention pass, purge kind
	// usage_shards): the shards spread the concurrent writes of the current hour, and an hour an hour past
	// its end gets none (a count goes to the hour its statement began in), so a reader of 400 days sums
	// one row per tenant and hour, not eight.
	SettleAfter = 2 * time.Hour
)

// LastDayHours is how many hours the last day's counts of a Tenant's status span (the operator): the
// hour now is in and the 23 before it, whole rows of the counts, so that the sum is exact.
const LastDayHours = 24

// LastDaySince is the start of the first of the LastDayHours hours that end with the one now is in.
func LastDaySince(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-(LastDayHours - 1) * time.Hour)
}

// Granularity is the length of a period: an hour or a UTC day.
type Granularity string

// The granularities; Day is the default.
const (
	Hour Granularity = "hour"
	Day  Granularity = "day"
)

// Window is what a reader asks for: the periods that overlap [From, To), each Granularity long, in UTC.
type Window struct {
	From, To    time.Time
	Granularity Granularity
}

// Periods is the most periods w can hold (every one with counts): 9,601 for 400 days by the hour that do
// not begin on an hour.
func (w Window) Periods() int {
	step := time.Hour
	if w.Granularity == Day {
		step = 24 * time.Hour
	}
	return int(w.To.Sub(w.From)/step) + 2
}

// ErrWindow wraps every refusal of ParseWindow: the message says which value is wrong and why.
var ErrWindow = errors.New("invalid usage window")

// ParseWindow reads a window as given (RFC 3339 times and a granularity, each optional: "" for the
// default), at now: from defaults to 30 days before to, to to now, granularity to day. from must be
// before to and at most MaxSpan before it.
func ParseWindow(from, to, granularity string, now time.Time) (Window, error) {
	w := Window{To: now.UTC(), Granularity: Day}
	if to != "" {
		t, err := time.Parse(time.RFC3339, to)
		if err != nil {
			return w, fmt.Errorf("%w: to must be an RFC 3339 time, e.g. 2026-01-31T00:00:00Z", ErrWindow)
		}
		w.To = t.UTC()
	}
	w.From = w.To.Add(-DefaultSpan)
	if from != "" {
		t, err := time.Parse(time.RFC3339, from)
		if err != nil {
			return w, fmt.Errorf("%w: from must be an RFC 3339 time, e.g. 2026-01-01T00:00:00Z", ErrWindow)
		}
		w.From = t.UTC()
	}
	switch Granularity(strings.TrimSpace(granularity)) {
	case "", Day:
	case Hour:
		w.Granularity = Hour
	default:
		return w, fmt.Errorf("%w: granularity must be day or hour", ErrWindow)
	}
	if !w.From.Before(w.To) {
		return w, fmt.Errorf("%w: from must be before to", ErrWindow)
	}
	if w.To.Sub(w.From) > MaxSpan {
		return w, fmt.Errorf("%w: from and to may be at most 400 days apart", ErrWindow)
	}
	return w, nil
}
