// Package loop holds the one helper of the periodic loops: the worker's (the retry scheduler and relay, the
// redrive, the scheduler of send_at, the expiry sweep, the lag gauge, the offset commits, the limiter's
// pruning) and the callback sender's (claims, the outbox gauges).
package loop

import (
	"context"
	"time"
)

// Every runs f at once and then every interval until ctx ends. A run that takes longer than interval delays
// the next one rather than overlapping it.
func Every(ctx context.Context, interval time.Duration, f func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
