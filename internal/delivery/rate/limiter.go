// Package rate decides who may send now: the bot's pace, which the platform enforces and Herald keeps to
// by itself (docs/delivery.md, "Rate limits"). One bot has one of each of its parts, values built by the
// worker:
//   - Limiter: the bot's global rate as this worker may use it — the turns between priorities and
//     tenants (Wait), and the moment a request leaves (Admit);
//   - Chats: the interval between two sends to one chat, and the chats the platform throttled;
//   - Lease: this worker's part of the global rate, shared with the other workers by demand through a
//     lease in PostgreSQL; it keeps the Limiter to that part.
package rate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Priority is the class of a delivery: the topic it came from.
type Priority int

// The priority classes: high (priority 7 and above, their own topic) and normal.
const (
	High Priority = iota
	Normal
)

func (p Priority) String() string {
	if p == High {
		return "high"
	}
	return "normal"
}

// Limiter is the worker's share of the bot's global rate, in two stages:
//
//  1. Wait grants in turn: between the classes, while both wait, high gets HighWeight grants for every
//     normal one, so high-priority messages overtake a normal backlog without starving it; within a class,
//     tenants are served in turn (deficit round robin, one grant per turn times the tenant's weight, 1
//     unless set), so one tenant's backlog delays another tenant's fresh notification by about one round —
//     the number of tenants waiting — not by the backlog. Grants follow GCRA (a token bucket) with a small
//     burst, so that a grant that wakes late is caught up rather than lost. It is a queue served by one
//     goroutine (Run) rather than a shared x/time/rate limiter, because a plain limiter serves waiters in
//     no particular order and fairness needs a choice at each grant. A grant that turns out not to be
//     needed (the notification was not claimable) is given back with Refund.
//  2. Admit, called by a granted delivery at the last moment before its request leaves, applies the same
//     GCRA to the moments requests actually leave. A process that stalls (CPU starvation, SIGSTOP, a long
//     GC pause) after granting would otherwise send every grant it made before the stall at once when it
//     resumes; Admit spaces them again, so that in any window of length T at most burst + rate·T requests
//     leave — a sliding-window cap on what the platform sees, whatever happened to the process.
//
// For a bot allowed paid broadcasts, AdmitPaid also tells which requests must carry allow_paid_broadcast:
// one more GCRA, at the part of the platform's free rate this worker may use (SetFree), takes the
// requests that fit in it; the others are paid for.
type Limiter struct {
	weight int

	mu          sync.Mutex
	rate        float64   // grants per second; 0 pauses
	until       time.Time // the rate holds until then (zero: for good); past it, nothing is granted or admitted
	burst       int
	next        time.Time // GCRA theoretical arrival time of grants
	sent        time.Time // GCRA theoretical arrival time of admissions
	pausedUntil time.Time
	// free is how many requests a second may leave without paid broadcast (NoPaidBroadcast: every one);
	// freeSent is the GCRA theoretical arrival time of those, freeLog when the last free ones left (a ring
	// of int(free), oldest at freeHead).
	free     float64
	freeSent time.Time
	freeLog  []time.Time
	freeHead int
	classes  [2]turns
	weights  map[string]int // per tenant grants per turn; 1 when absent
	highRun  int            // grants to high in a row while normal waited
	wake     chan struct{}
	admitted atomic.Int64 // requests admitted, ever: the rate this worker uses (lease.go)
}

type waiter struct {
	granted   chan struct{}
	abandoned bool
}

// turns is one class's waiters: a FIFO queue per tenant, and the tenants that have waiters in the order
// they are served.
type turns struct {
	queues map[string][]*waiter
	ring   []string // tenants with a queue, in serving order
	pos    int      // the tenant whose turn it is
	given  int      // grants given in the current turn
	live   int      // waiters not abandoned
}

func (t *turns) add(tenant string, w *waiter) {
	if t.queues == nil {
		t.queues = map[string][]*waiter{}
	}
	q, ok := t.queues[tenant]
	if !ok {
		// A tenant that starts waiting goes last in the round: it waits for the others' turns, never more.
		t.ring = append(t.ring[:t.pos], append([]string{tenant}, t.ring[t.pos:]...)...)
		t.pos++
		if t.pos >= len(t.ring) {
			t.pos = 0
		}
	}
	t.queues[tenant] = append(q, w)
	t.live++
}

// next takes the waiter whose turn it is, or nil when none waits. weight says how many grants a tenant
// gets per turn.
func (t *turns) next(weight func(tenant string) int) *waiter {
	for len(t.ring) > 0 {
		if t.pos >= len(t.ring) {
			t.pos = 0
		}
		tenant := t.ring[t.pos]
		q := t.queues[tenant]
		for len(q) > 0 && q[0].abandoned {
			q[0] = nil
			q = q[1:]
		}
		if len(q) == 0 {
			delete(t.queues, tenant)
			t.ring = append(t.ring[:t.pos], t.ring[t.pos+1:]...)
			t.given = 0
			continue
		}
		w := q[0]
		q[0] = nil
		t.queues[tenant] = q[1:]
		t.live--
		t.given++
		if t.given >= weight(tenant) {
			t.given = 0
			t.pos++
		}
		return w
	}
	return nil
}

// NewLimiter returns a limiter granting rate per second (0 pauses until SetRate). Call Run to serve it.
func NewLimiter(rate float64, highWeight int) *Limiter {
	l := &Limiter{weight: max(1, highWeight), wake: make(chan struct{}, 1), free: NoPaidBroadcast}
	l.SetRate(rate)
	return l
}

// burstFor allows about 10 ms of catch-up: a goroutine that wakes a little late grants what it owes at
// once instead of losing throughput, and the platform absorbs far more than 10 ms of arrival jitter.
func burstFor(rate float64) int { return max(1, int(rate/100)) }

// SetRate changes the rate, effective at the next grant; it holds as long as the one it replaces.
func (l *Limiter) SetRate(rate float64) {
	l.mu.Lock()
	l.rate = max(0, rate)
	l.burst = burstFor(l.rate)
	l.mu.Unlock()
	l.poke()
}

// SetLease sets the rate until a moment (a lease of the global rate, lease.go): past it the limiter
// grants and admits nothing until the next SetLease. The limiter checks it itself, at each grant and each
// admission, so a process that was frozen past its lease cannot send on it when it wakes, whatever its
// other goroutines have not noticed yet.
func (l *Limiter) SetLease(rate float64, until time.Time) {
	l.mu.Lock()
	l.rate = max(0, rate)
	l.burst = burstFor(l.rate)
	l.until = until
	l.mu.Unlock()
	l.poke()
}

// NoPaidBroadcast is SetFree's value for a bot whose sends never carry allow_paid_broadcast.
const NoPaidBroadcast = -1

// SetFree sets how many requests a second may leave without allow_paid_broadcast; AdmitPaid marks the
// others paid. NoPaidBroadcast (the default): none is.
func (l *Limiter) SetFree(free float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.free = free
	if n := max(0, int(free)); n != cap(l.freeLog) {
		// The newest n of the free requests the log holds, oldest first.
		var kept []time.Time
		for i := range l.freeLog {
			kept = append(kept, l.freeLog[(l.freeHead+i)%len(l.freeLog)])
		}
		kept = kept[max(0, len(kept)-n):]
		l.freeLog, l.freeHead = append(make([]time.Time, 0, n), kept...), 0
	}
}

// lapsed reports whether the lease ran out at now. l.mu is held.
func (l *Limiter) lapsed(now time.Time) bool {
	return !l.until.IsZero() && !now.Before(l.until)
}

// SetWeights sets the tenants' grants per turn (a tenant not named gets 1).
func (l *Limiter) SetWeights(weights map[string]int) {
	l.mu.Lock()
	l.weights = weights
	l.mu.Unlock()
}

func (l *Limiter) weightOf(tenant string) int {
	if w := l.weights[tenant]; w > 1 {
		return w
	}
	return 1
}

// Rate is the current rate (0 once a lease ran out).
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsed(time.Now()) {
		return 0
	}
	return l.rate
}

// Pause grants nothing until t (a global flood: the platform answered 429 for several chats).
func (l *Limiter) Pause(until time.Time) {
	l.mu.Lock()
	if until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	l.mu.Unlock()
	l.poke()
}

func (l *Limiter) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Wait blocks until a grant for a delivery of tenant in class p, or ctx ends.
func (l *Limiter) Wait(ctx context.Context, p Priority, tenant string) error {
	w := &waiter{granted: make(chan struct{})}
	l.mu.Lock()
	l.classes[p].add(tenant, w)
	l.mu.Unlock()
	l.poke()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-w.granted:
			// Granted as we gave up: the grant is wasted, which errs on the side of sending less.
		default:
			w.abandoned = true
			l.classes[p].live--
		}
		return ctx.Err()
	}
}

// Refund gives back a grant that was not used (the notification turned out not to need a send): the next
// waiter may have it at once. Only the first stage is refunded; Admit was not taken.
func (l *Limiter) Refund() {
	l.mu.Lock()
	if l.rate > 0 {
		l.next = l.next.Add(-time.Duration(float64(time.Second) / l.rate))
	}
	l.mu.Unlock()
	l.poke()
}

// Admit waits until a granted request may leave now without exceeding rate and burst over the moments
// requests actually left (stage 2, see Limiter), and records it as leaving.
func (l *Limiter) Admit(ctx context.Context) error {
	_, err := l.AdmitPaid(ctx)
	return err
}

// AdmitPaid is Admit, and reports whether the request must carry allow_paid_broadcast: it does not fit in
// the free rate (SetFree). The free requests are spaced evenly, without a burst, so that those of every
// worker together stay within the platform's free rate in any one-second window.
func (l *Limiter) AdmitPaid(ctx context.Context) (paid bool, err error) {
	for {
		l.mu.Lock()
		now := time.Now()
		var wait time.Duration
		switch {
		case l.rate <= 0 || l.lapsed(now):
			wait = 20 * time.Millisecond
		case now.Before(l.pausedUntil):
			wait = l.pausedUntil.Sub(now)
		default:
			interval := time.Duration(float64(time.Second) / l.rate)
			if earliest := l.sent.Add(-time.Duration(l.burst-1) * interval); now.Before(earliest) {
				wait = earliest.Sub(now)
			} else {
				l.sent = later(l.sent, now).Add(interval)
				paid = l.paidLocked(now)
			}
		}
		l.mu.Unlock()
		if wait == 0 {
			l.admitted.Add(1)
			return paid, nil
		}
		if err := sleepUntil(ctx, now.Add(wait)); err != nil {
			return false, err
		}
	}
}

// paidLocked takes a free slot for a request leaving at now if one conforms, and reports whether none
// did (the request is paid for). Free requests follow a GCRA with a burst of two, so that one that leaves
// late does not push every later free slot back (requests leave on the total rate's grid, which the free
// rate's does not match), and at most int(free) of them leave in any second, as the platform counts (the
// log). l.mu is held.
func (l *Limiter) paidLocked(now time.Time) bool {
	n := int(l.free)
	switch {
	case l.free < 0:
		return false
	case n <= 0:
		return true
	}
	interval := time.Duration(float64(time.Second) / l.free)
	if now.Before(l.freeSent.Add(-interval)) {
		return true
	}
	if len(l.freeLog) < n {
		l.freeLog = append(l.freeLog, now)
	} else {
		if now.Sub(l.freeLog[l.freeHead]) < time.Second {
			return true
		}
		l.freeLog[l.freeHead] = now
		l.freeHead = (l.freeHead + 1) % n
	}
	l.freeSent = later(l.freeSent, now).Add(interval)
	return false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Run serves grants until ctx ends.
func (l *Limiter) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		delay := l.grantOne(time.Now())
		if delay == 0 {
			continue
		}
		if delay > 0 {
			timer.Reset(delay)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// grantOne grants to one waiter if it may, returning 0; else how long to sleep (-1: until poked).
func (l *Limiter) grantOne(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	hasHigh, hasNormal := l.classes[High].live > 0, l.classes[Normal].live > 0
	if !hasHigh && !hasNormal {
		return -1
	}
	if l.rate <= 0 || l.lapsed(now) {
		return 100 * time.Millisecond
	}
	if now.Before(l.pausedUntil) {
		return l.pausedUntil.Sub(now)
	}
	interval := time.Duration(float64(time.Second) / l.rate)
	if earliest := l.next.Add(-time.Duration(l.burst-1) * interval); now.Before(earliest) {
		return earliest.Sub(now)
	}
	p := Normal
	switch {
	case hasHigh && !hasNormal:
		p, l.highRun = High, 0
	case hasHigh && l.highRun < l.weight:
		p = High
		l.highRun++
	default:
		l.highRun = 0
	}
	w := l.classes[p].next(l.weightOf)
	if w == nil {
		return 0 // only abandoned waiters were left; look again
	}
	tat := l.next
	if tat.Before(now) {
		tat = now
	}
	l.next = tat.Add(interval)
	close(w.granted)
	return 0
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
