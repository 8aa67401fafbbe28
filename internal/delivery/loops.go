package delivery

// The worker's periodic loops share one helper: every (internal/loop).

import (
	"context"
	"time"

	"github.com/heraldhq/herald/internal/loop"
)

// every is loop.Every, the one helper of the worker's periodic loops.
var every = loop.Every

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
