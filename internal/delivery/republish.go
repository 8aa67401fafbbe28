package delivery

import (
	"context"
	"slices"
	"time"

	"github.com/heraldhq/herald/internal/store"
)

// republishDue is the retry scheduler and the outbox relay. Retries live in PostgreSQL (status retrying,
// next_attempt_at), and when due their envelopes go back to Kafka; notifications whose first publish
// failed (a webhook reply or a verification prompt while the broker was away) are published as soon as
// the broker takes them. Every worker runs it; SKIP LOCKED shares the rows between them.
func (w *Worker) republishDue(ctx context.Context) {
	w.republishAll(ctx, "retry scheduler", func(ctx context.Context) (int, error) {
		return w.opts.Store.RepublishDueRetries(ctx, w.opts.RepublishBatch, w.opts.Lease, w.publisher("retry_due"))
	})
	w.republishAll(ctx, "relay", func(ctx context.Context) (int, error) {
		return w.opts.Store.RepublishUnpublished(ctx, w.opts.RepublishBatch, w.publisher("unpublished"))
	})
}

// republishAll runs one republishing query batch after batch until a batch comes back short.
func (w *Worker) republishAll(ctx context.Context, what string, batch func(ctx context.Context) (int, error)) {
	for ctx.Err() == nil {
		n, err := batch(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn(what+" failed", "err", err)
			}
			return
		}
		if n < w.opts.RepublishBatch {
			return
		}
	}
}

// redrive re-publishes notifications that look lost: queued for longer than QueuedRedriveAfter (the
// envelope never reached a worker) or delivering past their lease (the worker died). The claim accepts
// both; a copy of an envelope that was not lost after all is dropped by the claim.
//
// A queued row is presumed lost only when its envelope cannot still be waiting in Kafka: when the group
// has consumed (committed past) every message published up to half as long ago as the row was queued and
// last published — the half because a publish may reach the broker a little after the row records it.
// Two ages are tried, the shorter first:
//   - 2 × LostPublishAfter: while there is no backlog to wait behind, a row whose producer died between
//     the commit and the publish (internal/outbox) is delivered within about half a minute, not ten;
//   - QueuedRedriveAfter.
//
// While the group has not consumed as far as either — a backlog older than half of both — no queued row
// is presumed lost: each may be waiting behind it, and copying them would put that whole backlog in Kafka
// again at every pass (one tenant's long backlog, copied every Lease, filled the worker's hold and kept
// other tenants' fresh messages from being fetched). A publish lost meanwhile is redriven once the group
// has caught up that far. A delivering row past its lease is redriven whatever the backlog: its envelope
// was consumed.
func (w *Worker) redrive(ctx context.Context) {
	quiet := w.opts.Lease
	queuedAfter := time.Duration(0) // no queued row, unless the group has caught up far enough
	for _, age := range slices.Sorted(slices.Values([]time.Duration{2 * w.opts.LostPublishAfter, w.opts.QueuedRedriveAfter})) {
		ok, err := w.group.CaughtUpTo(ctx, time.Now().Add(-age/2))
		if err != nil && ctx.Err() == nil {
			w.log.Debug("could not tell whether the group has caught up", "err", err)
		}
		if ok && err == nil {
			queuedAfter, quiet = age, min(quiet, age)
			break
		}
	}
	publish := w.publisher("redrive")
	// Counted by status before the publish: what the redrive found is the fact (a lost envelope, a dead
	// worker), whether or not the broker takes the copy this time.
	found := func(ctx context.Context, batch []store.Pending) []string {
		for _, p := range batch {
			redriveFound.WithLabelValues(string(p.Status)).Inc()
		}
		return publish(ctx, batch)
	}
	w.republishAll(ctx, "redrive", func(ctx context.Context) (int, error) {
		n, err := w.opts.Store.RepublishStuck(ctx, w.opts.RepublishBatch, queuedAfter, quiet, found)
		if n > 0 {
			w.log.Info("redrove stuck notifications", "count", n)
		}
		return n, err
	})
}

// publisher publishes the envelopes of a batch through the outbox and counts them under reason.
func (w *Worker) publisher(reason string) store.RepublishFunc {
	return w.outbox.Republisher(func(n int) { republished.WithLabelValues(reason).Add(float64(n)) })
}
