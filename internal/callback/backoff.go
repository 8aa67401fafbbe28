package callback

import (
	"math/rand/v2"
	"time"
)

// Backoff is the retry schedule of an endpoint's failed attempts: after the attempt n fails, the next one
// waits Base × 2^(n−1), at most Max, spread by ±Jitter so that the events of an endpoint that failed
// together do not return together. An event is retried until it is older than Options.RetryFor (24 h),
// then dropped at its next failure.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64 // a fraction: 0.2 is ±20 %
}

// DefaultBackoff waits 5 s, 10 s, 20 s, … 42 m 40 s, then every hour: about 1 h 25 m over the first
// eleven failures, then hourly until the event is 24 hours old — some 34 attempts in all.
var DefaultBackoff = Backoff{Base: 5 * time.Second, Max: time.Hour, Jitter: 0.2}

// Wait is the wait after the attempt-th failed attempt (1 for the first).
func (b Backoff) Wait(attempt int) time.Duration {
	d := b.Max
	if attempt < 1 {
		attempt = 1
	}
	if attempt < 40 {
		if e := b.Base << (attempt - 1); e > 0 && e < b.Max {
			d = e
		}
	}
	if b.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + b.Jitter*(2*rand.Float64()-1)))
	}
	return d
}
