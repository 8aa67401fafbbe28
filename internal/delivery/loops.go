package delivery

// The worker's periodic loops (the retry scheduler and relay, the redrive, the scheduler of send_at, the
// expiry sweep, the lag gauge, the offset commits, the pruning of chats, the tenants' weights, the per-bot
// gauges) share one helper: every.

import (
	"context"
	"time"
)

// every runs f at once and then every interval until ctx ends. A run that takes longer than interval delays
// the next one rather than overlapping it.
func every(ctx context.Context, interval time.Duration, f func(ctx context.Context)) {
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

// pruneChats forgets chats whose per-chat slot is long past, of every bot.
func (w *Worker) pruneChats(ctx context.Context) {
	w.paces.Prune(time.Now().Add(-time.Minute))
}

// refreshWeights gives the limiter the tenants' delivery weights (spec.limits.deliveryWeight).
func (w *Worker) refreshWeights(ctx context.Context) {
	weights, err := w.opts.Store.DeliveryWeights(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not read the tenants' delivery weights", "err", err)
		}
		return
	}
	w.paces.SetWeights(weights)
}
