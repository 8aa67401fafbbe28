package delivery

// The worker's periodic loops (the retry scheduler and relay, the redrive, the scheduler of send_at, the
// expiry sweep, the lag gauge, the offset commits, the pruning of chats, the tenants' weights, the per-bot
// gauges, the endings' sweep, the deletions') share one helper: every.

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

const (
	// endingsInterval: how often a worker looks for opt-outs, relinks and erasures whose notifications are
	// not all ended yet (store.DueEndings).
	endingsInterval = 10 * time.Second
	// endingsAge: a pass younger than this is left to the process that started it (the webhook's receiver).
	endingsAge = 30 * time.Second
	// endingsPerRun bounds the users one run of the sweep takes on; the next run takes the rest.
	endingsPerRun = 100
	// endingsPassTimeout bounds one user's pass; the next run goes on where the notifications still wait.
	endingsPassTimeout = time.Minute
)

// finishEndings ends what committed opt-outs, relinks and erasures cover and no pass has finished (the
// process that started it died, or it had more than its share: store.OptOutInlineChunks,
// store.EraseInlineChunks), in chunks (issue 35). Several
// workers may run it at once: each chunk's updates are guarded by the notifications' states, so a row ends
// once, with one event.
func (w *Worker) finishEndings(ctx context.Context) {
	due, err := w.opts.Store.DueEndings(ctx, endingsAge, endingsPerRun)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("could not list the endings due", "err", err)
		}
		return
	}
	for _, u := range due {
		pass, cancel := context.WithTimeout(ctx, endingsPassTimeout)
		ended, _, err := w.opts.Store.FinishEndings(pass, u, 0)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				// Never the user id (docs/security.md).
				w.log.Warn("could not end the notifications an opt-out, a relink or an erasure covers", "tenant_id", u.TenantID, "ended", ended, "err", err)
			}
			continue
		}
		if ended > 0 {
			w.log.Info("ended the notifications an opt-out, a relink or an erasure covers", "tenant_id", u.TenantID, "ended", ended)
		}
	}
}

// deletesInterval: how often a worker looks for messages its tenants asked to delete (§13). The look is one
// probe of a partial index that holds only the deletions not done yet, so "within seconds" costs little.
const deletesInterval = time.Second

// deleteMessages deletes the messages whose deletion is due (send.Sender.DeleteMessages), until none is
// left or the worker stops.
func (w *Worker) deleteMessages(ctx context.Context) {
	for ctx.Err() == nil {
		if w.sender.DeleteMessages(ctx) == 0 {
			return
		}
	}
}
