package delivery

// The worker's periodic loops share one helper: every.

import (
	"context"
	"time"
)

// every runs f at once and then every interval until ctx ends: the retry scheduler and relay, the redrive,
// the lag gauge, the offset commits and the pruning of the per-chat limiter all run on it.
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

// pruneChats forgets chats whose per-chat slot is long past.
func (w *Worker) pruneChats(ctx context.Context) {
	w.chats.prune(time.Now().Add(-time.Minute))
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
	w.limiter.SetWeights(weights)
}
