package chaos

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
)

// Fault is one injected fault. Answers to requests sent between Start and End are reported as "during
// the fault"; recovery is measured from End.
type Fault struct {
	Name  string
	Start time.Time
	End   time.Time
}

// Answers counts the outcomes of sends.
type Answers struct {
	Accepted  int // 202
	Status502 int
	Status503 int
	Status500 int
	Other     int // any other HTTP status
	NotServed int // transport error that proves no handler saw the request (refused, closed idle)
	Dropped   int // any other transport error, timeouts included
}

func (a *Answers) add(at Attempt) {
	switch {
	case at.Status == http.StatusAccepted:
		a.Accepted++
	case at.Status == http.StatusBadGateway:
		a.Status502++
	case at.Status == http.StatusServiceUnavailable:
		a.Status503++
	case at.Status == http.StatusInternalServerError:
		a.Status500++
	case at.Status != 0:
		a.Other++
	case at.NotServed:
		a.NotServed++
	default:
		a.Dropped++
	}
}

// String is "202/502/503/other", other being every remaining status and transport error.
func (a Answers) String() string {
	return fmt.Sprintf("%d/%d/%d/%d", a.Accepted, a.Status502, a.Status503, a.Status500+a.Other+a.NotServed+a.Dropped)
}

// Result is what one scenario run counted, from the client's answers and the platform's side.
type Result struct {
	Scenario string
	Sent     int // requests made
	Accepted int // answered 202
	// Delivered counts accepted messages the platform received at least once; Lost, those it never did.
	Delivered int
	Lost      int
	// Duplicates counts extra copies: a token received three times is two duplicates.
	Duplicates int
	// Phantoms are messages received although their send was answered with an error status: the answer
	// said nothing was stored, so the platform must never see them.
	Phantoms int
	// OutOfOrder counts accepted messages received after a message of the same user accepted later.
	OutOfOrder int
	// PacingViolations counts two consecutive messages to one chat closer than 95 % of the interval;
	// MinGap is the closest pair.
	PacingViolations int
	MinGap           time.Duration
	// GlobalViolations counts messages that ended a 1-second window (by receive time, all chats) holding
	// more than 105 % of the limit; MaxPerSecond is the fullest such window.
	GlobalViolations int
	MaxPerSecond     int
	// SimViolations is the simulator's own count of sends over its limits (GET /sim/stats).
	SimViolations int64

	Total  Answers // every send
	During Answers // sends made during a fault

	// Recovery202 is the longest time, over the faults, from a fault's end to the first 202 of a send made
	// after it; RecoveryDelivery, from a fault's end until its backlog was delivered (see recovery). -1:
	// never recovered within the run.
	Recovery202      time.Duration
	RecoveryDelivery time.Duration

	ErrKinds   map[string]int // transport errors by Attempt.ErrKind
	MaxLatency time.Duration  // slowest answer
	Hung       int            // sends that got no answer within ClientTimeout

	Statuses Statuses // notifications by status at the end
	Pending  int      // of those, not terminal (queued, delivering, retrying) after the settle time
	Orphans  int      // envelopes a worker found no row for ("no notification for envelope")

	LostTokens []string // the first few lost tokens, for the failure message
	Failures   []string // broken expectations; empty when the scenario passed
}

// MaxRecovery is the larger of the two recovery times (-1 if either never recovered).
func (r Result) MaxRecovery() time.Duration {
	if r.Recovery202 < 0 || r.RecoveryDelivery < 0 {
		return -1
	}
	return max(r.Recovery202, r.RecoveryDelivery)
}

var tokenPattern = regexp.MustCompile(`chaos-[0-9a-f]+-u\d+-\d+`)

// received is one message as the platform received it.
type received struct {
	chat  int64
	token string // "" for messages that carry none (linking and verification replies)
	at    time.Time
}

// countInput is everything count needs, so that the counting can be tested without processes.
type countInput struct {
	Users    []User
	Attempts []Attempt
	Messages map[int64][]sim.SentMessage
	Faults   []Fault
	Interval time.Duration // per-chat interval
	Limit    float64       // global messages per second
}

// lateAfter is the delivery latency beyond which a message counts as delayed by a fault when recovery is
// measured: several per-chat intervals, far above the steady-state latency of tens of milliseconds.
func lateAfter(interval time.Duration) time.Duration { return max(3*time.Second, 3*interval) }

// count computes a Result (without the scenario name and the numbers read from the processes).
func count(in countInput) Result {
	r := Result{Sent: len(in.Attempts), MinGap: -1, ErrKinds: map[string]int{}}
	byToken := make(map[string]Attempt, len(in.Attempts))
	for _, a := range in.Attempts {
		byToken[a.Token] = a
		r.Total.add(a)
		if a.ErrKind != "" {
			r.ErrKinds[a.ErrKind]++
		}
		if a.Accepted() {
			r.Accepted++
		}
		r.MaxLatency = max(r.MaxLatency, a.Latency())
		if a.TimedOut || a.Latency() >= ClientTimeout {
			r.Hung++
		}
		for _, f := range in.Faults {
			if !a.Sent.Before(f.Start) && !a.Sent.After(f.End) {
				r.During.add(a)
				break
			}
		}
	}

	// The platform's side: every message of every chat, and the first receipt of every token.
	var all []received
	first := map[string]time.Time{}
	copies := map[string]int{}
	for _, u := range in.Users {
		msgs := slices.Clone(in.Messages[u.ChatID])
		slices.SortStableFunc(msgs, func(a, b sim.SentMessage) int { return a.Time.Compare(b.Time) })
		for i, m := range msgs {
			tok := tokenPattern.FindString(m.Text)
			all = append(all, received{chat: u.ChatID, token: tok, at: m.Time})
			if tok != "" {
				copies[tok]++
				if copies[tok] == 1 {
					first[tok] = m.Time
				}
			}
			if i > 0 {
				gap := m.Time.Sub(msgs[i-1].Time)
				if r.MinGap < 0 || gap < r.MinGap {
					r.MinGap = gap
				}
				if gap < in.Interval*95/100 {
					r.PacingViolations++
				}
			}
		}
		r.OutOfOrder += outOfOrder(msgs, byToken)
	}
	for tok, n := range copies {
		r.Duplicates += n - 1
		if a, ok := byToken[tok]; ok && a.Status != 0 && !a.Accepted() {
			r.Phantoms++
		}
	}
	for _, a := range in.Attempts {
		if !a.Accepted() {
			continue
		}
		if _, ok := first[a.Token]; ok {
			r.Delivered++
		} else {
			r.Lost++
			if len(r.LostTokens) < 5 {
				r.LostTokens = append(r.LostTokens, a.Token)
			}
		}
	}

	// Global: a sliding window (t-1s, t] ending at every message.
	slices.SortFunc(all, func(a, b received) int { return a.at.Compare(b.at) })
	allowed := int(in.Limit * 1.05)
	for lo, hi := 0, 0; hi < len(all); hi++ {
		for all[lo].at.Add(time.Second).Compare(all[hi].at) <= 0 {
			lo++
		}
		n := hi - lo + 1
		r.MaxPerSecond = max(r.MaxPerSecond, n)
		if n > allowed {
			r.GlobalViolations++
		}
	}

	r.Recovery202, r.RecoveryDelivery = recovery(in, first)
	return r
}

// outOfOrder counts, in one chat's messages in receive order, the first receipts of accepted tokens that
// come after the first receipt of a token of the same user accepted later. With one request in flight
// per user, the order of a user's 202s is the order of Seq.
func outOfOrder(msgs []sim.SentMessage, byToken map[string]Attempt) int {
	seen := map[string]bool{}
	highest, n := -1, 0
	for _, m := range msgs {
		tok := tokenPattern.FindString(m.Text)
		a, ok := byToken[tok]
		if !ok || !a.Accepted() || seen[tok] {
			continue
		}
		seen[tok] = true
		if a.Seq < highest {
			n++
		}
		highest = max(highest, a.Seq)
	}
	return n
}

// recovery measures, for every fault, (1) the time from its end to the first 202 of a send made after
// it, and (2) the time from its end until its backlog was delivered: the last receipt of a message that
// was either accepted before the fault ended or, accepted later (but before the next fault), took longer
// than lateAfter to arrive — a lane held up by the fault's leftovers. It returns the maxima over the
// faults; -1 when a fault never recovered (no 202 after it, or a message lost).
func recovery(in countInput, first map[string]time.Time) (time.Duration, time.Duration) {
	faults := slices.Clone(in.Faults)
	slices.SortFunc(faults, func(a, b Fault) int { return a.Start.Compare(b.Start) })
	late := lateAfter(in.Interval)
	var r202, rDel time.Duration
	lost := false
	for i, f := range faults {
		next := time.Time{}
		if i+1 < len(faults) {
			next = faults[i+1].Start
		}
		firstOK := time.Duration(-1)
		delivered := time.Duration(0)
		for _, a := range in.Attempts {
			if !a.Accepted() || (!next.IsZero() && !a.Sent.Before(next)) {
				continue
			}
			if !a.Sent.Before(f.End) && (firstOK < 0 || a.Done.Sub(f.End) < firstOK) {
				firstOK = a.Done.Sub(f.End)
			}
			got, ok := first[a.Token]
			if !ok {
				lost = true
				continue
			}
			if !a.Done.After(f.End) || got.Sub(a.Done) > late {
				delivered = max(delivered, got.Sub(f.End))
			}
		}
		if firstOK < 0 {
			r202 = -1
		} else if r202 >= 0 {
			r202 = max(r202, firstOK)
		}
		// A backlog still there when the next fault begins is that fault's to report too: cap here.
		if !next.IsZero() {
			delivered = min(delivered, next.Sub(f.End))
		}
		rDel = max(rDel, delivered)
	}
	if lost {
		rDel = -1
	}
	return r202, rDel
}

// Expect is what a scenario promises beyond the invariants that every scenario asserts: every 202 is
// delivered, none lost; no message delivered after an error answer; no rate-limit violation (ours or the
// simulator's); no notification left pending; no send hung past ClientTimeout.
type Expect struct {
	// Answers lists the HTTP statuses a send may get besides 202 (502 and 503 when a dependency is down).
	Answers []int
	// NotServed allows transport errors that prove no handler saw the request (refused, closed idle).
	NotServed bool
	// Dropped allows any transport error short of a timeout: an ingress crashing with requests in flight.
	Dropped bool
	// MaxDuplicates is how many extra copies are allowed: what was in flight at a crash, 0 otherwise.
	MaxDuplicates int
	// KeepOrder requires each user's messages to arrive in the order they were accepted.
	KeepOrder bool
	// Recovery bounds both recovery times (Result.Recovery202, Result.RecoveryDelivery).
	Recovery time.Duration
}

// check returns every broken expectation, worded for the failure message.
func (r Result) check(x Expect) []string {
	var f []string
	fail := func(format string, args ...any) { f = append(f, fmt.Sprintf(format, args...)) }
	if r.Accepted == 0 {
		fail("no send was accepted at all")
	}
	if r.Lost > 0 || r.Delivered != r.Accepted {
		fail("%d of %d accepted messages never reached the platform (lost), e.g. %v", r.Lost, r.Accepted, r.LostTokens)
	}
	if r.Phantoms > 0 {
		fail("%d messages reached the platform although their send was answered with an error", r.Phantoms)
	}
	if r.Duplicates > x.MaxDuplicates {
		fail("%d duplicates, more than the %d allowed (in flight at a crash)", r.Duplicates, x.MaxDuplicates)
	}
	if x.KeepOrder && r.OutOfOrder > 0 {
		fail("%d messages arrived after a message of the same user that was accepted later", r.OutOfOrder)
	}
	if r.PacingViolations > 0 {
		fail("%d per-chat pacing violations (closest two messages to one chat: %v)", r.PacingViolations, r.MinGap)
	}
	if r.GlobalViolations > 0 {
		fail("%d global rate-limit violations (fullest 1 s window: %d messages)", r.GlobalViolations, r.MaxPerSecond)
	}
	if r.SimViolations > 0 {
		fail("the simulator counted %d rate-limit violations", r.SimViolations)
	}
	if r.Pending > 0 {
		fail("%d notifications left pending at the end: %v", r.Pending, r.Statuses)
	}
	if r.Hung > 0 {
		fail("%d sends got no answer within %v (slowest: %v)", r.Hung, ClientTimeout, r.MaxLatency)
	}
	allowed := map[int]bool{http.StatusAccepted: true}
	for _, s := range x.Answers {
		allowed[s] = true
	}
	var bad []string
	for s, n := range map[int]int{http.StatusBadGateway: r.Total.Status502, http.StatusServiceUnavailable: r.Total.Status503, http.StatusInternalServerError: r.Total.Status500} {
		if n > 0 && !allowed[s] {
			bad = append(bad, fmt.Sprintf("%d×%d", n, s))
		}
	}
	if r.Total.Other > 0 {
		bad = append(bad, fmt.Sprintf("%d other statuses", r.Total.Other))
	}
	if r.Total.NotServed > 0 && !x.NotServed && !x.Dropped {
		bad = append(bad, fmt.Sprintf("%d refused connections", r.Total.NotServed))
	}
	if r.Total.Dropped > 0 && !x.Dropped {
		bad = append(bad, fmt.Sprintf("%d transport errors after the request was sent %v", r.Total.Dropped, r.ErrKinds))
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		fail("unexpected answers: %v", bad)
	}
	bound := cmp.Or(x.Recovery, 30*time.Second)
	switch {
	case r.Recovery202 < 0:
		fail("no send was accepted after the fault ended")
	case r.Recovery202 > bound:
		fail("the first 202 came %v after the fault ended, more than %v", r.Recovery202.Round(time.Millisecond), bound)
	}
	switch {
	case r.RecoveryDelivery < 0:
		fail("the backlog of the fault was never delivered")
	case r.RecoveryDelivery > bound:
		fail("delivery recovered %v after the fault ended, more than %v", r.RecoveryDelivery.Round(time.Millisecond), bound)
	}
	return f
}

func fmtDuration(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}
