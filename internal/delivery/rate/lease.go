package rate

// A bot's global rate, shared between the workers by demand. Every worker holds a lease on part of it in
// PostgreSQL (table rate_leases, a pool per bot) and renews it every PacesOptions.Interval, saying what it
// could use now; a worker renews its leases on all the bots it sends through in one transaction
// (store.ShareRates). The parts follow the demands (allocate): with a backlog everywhere, in proportion to the
// chats each worker has work for, so every chat gets the same rate whichever worker holds it. A worker
// whose partitions carry most of the traffic gets most of the rate — the consumer group's murmur2
// partitioner spreads chats unevenly, and a split by partitions left one worker's backlog draining at a
// fraction of the bot's rate while the other's rate went unused.
//
// The guarantee that the workers together never exceed the limit rests on three rules:
//   - under the pool's lock, the committed rates of live leases never add up to more than the limit: a
//     worker raises its own only from what the others leave free;
//   - a worker lowers its limiter before the commit that frees the difference, and raises it only after
//     the commit that gave it more; what it records is the highest rate it had over the last second (the
//     platform's window), so what it gives up reaches the others once its last sends at the old rate have
//     left the platform's window;
//   - a lease is good locally until the renewal's start + TTL - 1 s - TTL/12, by this process's clock,
//     while the others may take its part only after the database's now() at the renewal + TTL: a worker
//     that stops renewing (frozen, cut off from PostgreSQL, killed) has stopped sending for more than a
//     window before anyone counts on its part. The limiter checks the lease at every grant and admission
//     (Limiter.SetLease).

import (
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/store"
)

// Lease is this worker's lease on part of one bot's global rate (one pool of rate_leases), which keeps
// the bot's limiter to that part. The bot's Paces renews every lease of the worker in one transaction
// (renewAll); a Lease holds what one renewal needs and does with its answer.
type Lease struct {
	pool    string
	limiter *Limiter
	// perChat is the bot's minimum spacing of two sends to one chat: a chat with work could use one
	// message per interval (demand). lanes counts this worker's keys of the bot with messages fetched and
	// not finished: its chats with work.
	perChat time.Duration
	lanes   func() int
	ttl     time.Duration
	log     *slog.Logger

	mu       sync.Mutex
	settings Settings       // the bot's, as last read (Paces.renewAll)
	current  float64        // the rate in force in the limiter
	failing  bool           // the last renewal failed (logged once per spell)
	samples  []demandSample // the last demandWindow+1 renewals' samples, newest last
	history  []rateAt       // the rates put in force over the last platform window, oldest first
}

type rateAt struct {
	at   time.Time
	rate float64
}

// demandSample is what a renewal saw: the limiter's admissions so far, and the lanes with work.
type demandSample struct {
	at       time.Time
	admitted int64
	lanes    int
}

// demandWindow is how many recent samples a demand looks back on: about a second at the default interval,
// so a demand does not drop between two messages of a steady stream.
const demandWindow = 4

// release stops this lease's sends and returns what it recorded lately: the caller shortens the lease to
// one platform window (store.ReleaseRate), unless the worker was killed (a dead worker writes nothing;
// its lease lapses).
func (l *Lease) release() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(0, time.Now(), true)
	return l.recentMax(time.Now())
}

// platformWindow is the window over which the platform counts a bot's messages (the global limit is per
// second, sliding). A rate given up stays recorded for one window, so that no other worker fills it while
// this worker's last sends at the old rate are still inside the platform's window.
const platformWindow = time.Second

// good is how long after a renewal's start its lease may be used here: a window and a margin short of its
// TTL, so that a worker that stops renewing has stopped sending, and its last sends have left the
// platform's window, before the lease lapses in the database and another worker may take its part.
func (l *Lease) good() time.Duration {
	return l.ttl - platformWindow - l.ttl/12
}

// setLocked puts rate in force in the limiter (with lease, good until start + good()) and remembers it
// for recentMax; the free part of it follows (freeShare). l.mu is held.
func (l *Lease) setLocked(rate float64, start time.Time, lease bool) {
	free := l.settings.freeShare(rate)
	if lease {
		l.limiter.SetLease(rate, start.Add(l.good()))
	} else {
		l.limiter.SetRate(rate)
	}
	l.limiter.SetFree(free)
	l.current = rate
	l.history = append(l.history, rateAt{at: time.Now(), rate: rate})
}

// recentMax is the highest rate in force here at any moment of the last platform window. l.mu is held.
func (l *Lease) recentMax(now time.Time) float64 {
	from := now.Add(-platformWindow)
	// Keep the last change before the window (in force at its start) and those inside it.
	first := 0
	for i, h := range l.history {
		if !h.at.After(from) {
			first = i
		}
	}
	l.history = l.history[first:]
	m := 0.0
	for _, h := range l.history {
		m = max(m, h.rate)
	}
	return m
}

// share is this lease's part of a renewal of every lease (Paces.renewAll): its demand, and the decision
// on its rate, which runs under the pool's lock before the commit. *next receives the rate decided.
//
// What it records is not only the rate it will send at but the highest it sent at over the last platform
// window: a worker that lowers its rate may have sent at the old one less than a second ago, and another
// worker that took the difference at once could put more than the limit into one of the platform's
// sliding windows. So capacity given up reaches the others one window later.
func (l *Lease) share(start time.Time, next *float64) store.RateShare {
	demand := l.demand(start)
	l.mu.Lock()
	limit := math.Floor(l.settings.Rate)
	l.mu.Unlock()
	return store.RateShare{Pool: l.pool, Demand: demand, Decide: func(mine store.RateLease, others []store.RateLease) float64 {
		demands := map[string]float64{mine.Holder: demand}
		taken := 0.0
		for _, o := range others {
			demands[o.Holder] = o.Demand
			taken += o.Rate
		}
		*next = min(allocate(limit, demands)[mine.Holder], max(0, limit-taken))
		l.mu.Lock()
		defer l.mu.Unlock()
		if *next < l.current {
			// Before the commit: the others may count on what is given up once it leaves the record.
			l.setLocked(*next, start, false)
		}
		return max(*next, l.recentMax(time.Now()))
	}}
}

// renewed puts the rate a renewal decided in force (after its commit), or notes that the renewal failed
// (err): the limiter then stops at the end of the last lease by itself.
func (l *Lease) renewed(start time.Time, next float64, err error, ctxDone bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if !ctxDone && !l.failing {
			l.log.Warn("could not renew the rate lease; sends stop when it lapses", "pool", l.pool, "err", err, "lapses_in", l.good())
		}
		l.failing = true
		return
	}
	if l.failing {
		l.log.Info("rate lease renewed again", "pool", l.pool, "rate", next)
		l.failing = false
	}
	if next != l.current {
		l.log.Debug("rate lease changed", "pool", l.pool, "from", l.current, "to", next)
	}
	l.setLocked(next, start, true)
}

// demand is what this worker could send per second now: the larger of
//   - its chats with work, at one message per chat interval each (the peak of the last demandWindow
//     samples): what it could send were the global rate no object, and with a backlog its weight against
//     the other workers' chats (allocate);
//   - what it admitted over the same window: a steady stream whose lanes come and go between samples;
//
// and at least one message per second, so that a worker that falls idle still sends its next message
// without waiting for a renewal. It is not capped at the limit, so that with a backlog everywhere it weighs
// this worker's chats against the others'.
func (l *Lease) demand(now time.Time) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	lanes := l.lanes()
	l.samples = append(l.samples, demandSample{at: now, admitted: l.limiter.admitted.Load(), lanes: lanes})
	if len(l.samples) > demandWindow+1 {
		l.samples = l.samples[len(l.samples)-demandWindow-1:]
	}
	oldest := l.samples[0]
	used := 0.0
	if d := now.Sub(oldest.at).Seconds(); d > 0 {
		used = float64(l.samples[len(l.samples)-1].admitted-oldest.admitted) / d
	}
	peak := 0
	for _, s := range l.samples[max(0, len(l.samples)-demandWindow):] {
		peak = max(peak, s.lanes)
	}
	byLanes := 0.0
	if peak > 0 {
		if iv := l.perChat; iv > 0 {
			byLanes = float64(peak) / iv.Seconds()
		} else {
			byLanes = l.settings.Rate // no per-chat bound: any work could use the whole rate
		}
	}
	return max(1, byLanes, used)
}

// allocate divides limit between the holders by their demands, in whole messages per second, the same way
// in every worker (it depends only on its arguments):
//   - when the demands add up to more than the limit, in proportion to them. A demand with a backlog is
//     the holder's chats with work (one message per chat interval each), so every chat with a backlog gets
//     the same rate whichever worker holds it — as if one worker served them all — and the backlog of the
//     worst-served chat, which is what holds a user's later messages up, drains as fast as the limit
//     allows. (Max-min fairness would give a worker with few chats all they can take and starve the
//     chats of the busy one.)
//   - otherwise each holder gets its demand, and what nobody needs is split evenly, so every holder can
//     take a burst before its next renewal;
//   - every holder gets at least one message per second (while the limit has that many), so that a
//     worker that falls idle sends its next message without waiting for the others to make room;
//   - whole numbers, because a sender spaced at r per second puts ceil(r) sends in some one-second
//     windows: 16.7 + 16.7 + 16.6 could show the platform 51 sends in a second where 17 + 17 + 16 show 50.
//     The units left by rounding down go to the holders served worst for their demands.
func allocate(limit float64, demands map[string]float64) map[string]float64 {
	holders := make([]string, 0, len(demands))
	need := make(map[string]float64, len(demands)) // a demand is at least 1 (see demand)
	total := 0.0
	for h, d := range demands {
		holders = append(holders, h)
		need[h] = max(1, d)
		total += need[h]
	}
	slices.Sort(holders)
	// In proportion when oversubscribed; a holder whose proportion comes below one message per second gets
	// one (while the limit has one for each), and the others share the rest in proportion again.
	floor := float64(len(holders)) <= math.Floor(limit)
	lifted := map[string]bool{}
	share := make(map[string]float64, len(holders))
	for {
		rest, unlifted := limit, 0.0
		for _, h := range holders {
			if lifted[h] {
				rest--
			} else {
				unlifted += need[h]
			}
		}
		again := false
		for _, h := range holders {
			switch {
			case lifted[h]:
				share[h] = 1
			case total > limit:
				share[h] = rest * need[h] / unlifted
				if floor && share[h] < 1 {
					lifted[h], again = true, true
				}
			default:
				share[h] = need[h] + (limit-total)/float64(len(holders))
			}
		}
		if !again {
			break
		}
	}
	// Whole numbers adding up to floor(limit).
	units := int(math.Floor(limit))
	out := make(map[string]float64, len(holders))
	for _, h := range holders {
		out[h] = math.Floor(share[h] + 1e-9)
		units -= int(out[h])
	}
	// Each unit left goes to the holder served worst for its demand — with a backlog, the one whose chats
	// get the least each — so that no worker's chats fall behind the others' by rounding.
	for ; units > 0; units-- {
		worst := ""
		for _, h := range holders {
			if out[h] >= math.Ceil(share[h]-1e-9) {
				continue // already at its share rounded up
			}
			if worst == "" || out[h]/need[h] < out[worst]/need[worst] {
				worst = h
			}
		}
		if worst == "" {
			break // no holders
		}
		out[worst]++
	}
	return out
}
