package sim

import (
	"errors"
	"math"
	"time"
)

// Limits are the platform's rate limits as the simulator enforces them.
//
// The rule, per bot (global) and per chat of a bot: a send conforms when it fits a token bucket that holds Burst
// tokens and refills at Rate×(1+Tolerance) tokens per second (GCRA). A send that does not conform is
// answered 429 with retry_after and counted as a violation; it takes no token.
//
// Why a bucket and not a plain count per window: a client paced by a token bucket of rate r ≤ Rate and burst
// b never sends more than b + r·t in any interval t, and the simulator allows Burst + Rate·(1+Tolerance)·t,
// so such a client is never flagged as long as b plus the arrival jitter (r × jitter, e.g. 1000/s × 20 ms =
// 20 sends) fits in Burst. A client that exceeds Rate by more than Tolerance drains the bucket and is flagged
// within Burst / (excess rate) seconds — e.g. 1100/s against 1000/s: after 50/50 = 1 s. A fixed window would
// either flag a correct client whose sends straddle a window edge or miss a 10 % excess entirely at
// 1 message per second per chat.
//
// A client using golang.org/x/time/rate conforms with rate.NewLimiter(GlobalRate, b) for b ≤ GlobalBurst
// minus its jitter allowance (b = 1 is always safe), and per chat with rate.NewLimiter(PerChatRate, 1).
type Limits struct {
	GlobalRate   float64 `json:"global_rate"` // ≤ 0: unlimited
	GlobalBurst  int     `json:"global_burst"`
	PerChatRate  float64 `json:"per_chat_rate"` // ≤ 0: unlimited
	PerChatBurst int     `json:"per_chat_burst"`
	Tolerance    float64 `json:"tolerance"` // e.g. 0.05 = 5 %
}

func (l Limits) validate() error {
	if l.GlobalRate > 0 && l.GlobalBurst < 1 || l.PerChatRate > 0 && l.PerChatBurst < 1 {
		return errors.New("bursts must be at least 1")
	}
	if l.Tolerance < 0 || l.Tolerance > 1 || math.IsNaN(l.Tolerance) {
		return errors.New("tolerance must be between 0 and 1")
	}
	return nil
}

// bucket is one GCRA state: tat is the theoretical arrival time of the next conforming send when the
// bucket is full; zero means full.
type bucket struct {
	tat time.Time
}

// wait is how long a send at now must wait to conform; 0 means it conforms.
func (b bucket) wait(now time.Time, rate float64, burst int, tolerance float64) time.Duration {
	if rate <= 0 || b.tat.IsZero() {
		return 0
	}
	interval := emissionInterval(rate, tolerance)
	allowedAt := b.tat.Add(-time.Duration(burst-1) * interval)
	if now.Before(allowedAt) {
		return allowedAt.Sub(now)
	}
	return 0
}

// take records a conforming send.
func (b *bucket) take(now time.Time, rate, tolerance float64) {
	if rate <= 0 {
		return
	}
	if b.tat.Before(now) {
		b.tat = now
	}
	b.tat = b.tat.Add(emissionInterval(rate, tolerance))
}

func emissionInterval(rate, tolerance float64) time.Duration {
	return time.Duration(float64(time.Second) / (rate * (1 + tolerance)))
}

// retryAfterSeconds is the platform's retry_after for a wait: whole seconds, at least 1.
func retryAfterSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

// defaultBurst is the burst of a rate when none is given: 50 ms of traffic, which absorbs arrival jitter.
func defaultBurst(rate float64) int {
	return max(3, int(rate/20+0.999))
}

// window holds the times of the sends of the last second, oldest first, for the sliding-second count.
type window struct {
	times []time.Time
}

// count is how many sends the window holds in the second before now, now excluded: (now-1s, now).
func (w *window) count(now time.Time) int {
	w.prune(now)
	return len(w.times)
}

// add records a send at now, if record; either way it forgets the sends older than a second, so that the
// window stays as small as one second of sends.
func (w *window) add(now time.Time, record bool) {
	w.prune(now)
	if record {
		w.times = append(w.times, now)
	}
}

func (w *window) prune(now time.Time) {
	cut := now.Add(-time.Second)
	i := 0
	for i < len(w.times) && !w.times[i].After(cut) {
		i++
	}
	w.times = w.times[i:]
}
