package delivery

import (
	"context"
)

// releaseScheduled is the scheduler of scheduled notifications: every ScheduleInterval it releases those
// whose send_at has come (scheduled → queued) and publishes them, batch after batch, through the outbox,
// which commits before it publishes and leaves a failed publish to the relay. Every worker runs the loop;
// one at a time releases (a transaction-scoped advisory lock), so a backlog is published once, in send_at
// order. The scheduled rows live in a partial index of their own: a backlog of them costs sends nothing.
func (w *Worker) releaseScheduled(ctx context.Context) {
	for ctx.Err() == nil {
		n, locked, err := w.outbox.ReleaseScheduled(ctx, w.opts.RepublishBatch)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("scheduler failed", "err", err)
			}
			return
		}
		released.Add(float64(n))
		if !locked || n < w.opts.RepublishBatch {
			return
		}
	}
}

// expireDue is the expiry sweep: every ExpireInterval, notifications whose expires_at has passed while
// they were scheduled, queued or retrying (or delivering for a worker that died) become expired, in
// batches. A claim refuses them even before the sweep comes (store.ClaimDelivery). Workers sweep
// concurrently; SKIP LOCKED shares the rows.
func (w *Worker) expireDue(ctx context.Context) {
	for ctx.Err() == nil {
		ids, err := w.opts.Store.ExpireDue(ctx, w.opts.RepublishBatch)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("expiry sweep failed", "err", err)
			}
			return
		}
		expired.Add(float64(len(ids)))
		if len(ids) < w.opts.RepublishBatch {
			return
		}
	}
}
