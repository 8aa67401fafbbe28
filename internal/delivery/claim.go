package delivery

// The claim step: parse the envelope, claim the notification in PostgreSQL, and decide what to do with a
// message whose notification cannot be claimed now.

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/tracing"
)

// handle delivers the notification of one Kafka message. It reports whether the message is settled
// (its offset may be committed): false only when the worker was killed or aborted before settling it.
//
// The order of the waits is what makes delivery fair and keeps slots free: first the chat's interval
// (holding nothing), then the tenant's turn at the global rate (holding nothing), then an in-flight slot
// for the claim, the call and the status write. A grant that is not used (nothing to send) is refunded.
// The waits end with startCtx (the worker stops starting deliveries); the delivery itself runs under ctx.
func (w *Worker) handle(startCtx, ctx context.Context, p Priority, m kafka.Message, ls *laneState) bool {
	env, err := queue.ParseEnvelope(m.Value)
	if err == nil {
		_, err = uuid.Parse(env.TrackingID)
	}
	if err != nil {
		skipped.WithLabelValues("bad_envelope").Inc()
		w.log.Error("dropping a malformed envelope", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "err", err)
		return true
	}
	// The delivery continues the trace of the request that published the envelope (its headers).
	ctx, span := tracing.Tracer().Start(tracing.FromHeaders(ctx, m.Headers), "deliver", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("herald.tracking_id", env.TrackingID), attribute.String("messaging.destination.name", m.Topic),
			attribute.Int("messaging.kafka.partition", m.Partition), attribute.Int64("messaging.kafka.offset", m.Offset)))
	defer span.End()
	start := time.Now()
	if ls.chat != 0 {
		if err := w.chats.WaitFree(startCtx, ls.chat); err != nil {
			return false
		}
		limiterWait.WithLabelValues("chat", p.String()).Observe(time.Since(start).Seconds())
		start = time.Now()
	}
	if err := w.limiter.Wait(startCtx, p, env.TenantID); err != nil {
		return false
	}
	limiterWait.WithLabelValues("global", p.String()).Observe(time.Since(start).Seconds())
	if err := w.inflight.acquire(startCtx, p); err != nil {
		w.limiter.Refund()
		return false
	}
	defer w.inflight.release(p)

	claimCtx, claimSpan := tracing.Tracer().Start(ctx, "claim")
	d, settledAt, err := w.claim(claimCtx, env.TrackingID)
	if err != nil {
		claimSpan.SetAttributes(attribute.String("herald.claim", claimOutcome(err)))
	}
	claimSpan.End()
	if !settledAt.IsZero() {
		ls.handover = settledAt
	}
	var nc *store.NotClaimable
	switch {
	case err == nil:
	case errors.As(err, &nc) && nc.Leased:
		// Still held by another attempt after HandoverWait: its holder is stuck or dead. Its lease will run
		// out and the redrive sends it again; the lane moves on.
		w.limiter.Refund()
		skipped.WithLabelValues("leased").Inc()
		w.log.Warn("skipping a notification another attempt still holds", "tracking_id", env.TrackingID)
		return true
	case errors.Is(err, store.ErrNotClaimable):
		// Terminal, or a retry not yet due (the scheduler re-publishes it).
		w.limiter.Refund()
		skipped.WithLabelValues("not_claimable").Inc()
		w.log.Debug("skipping", "tracking_id", env.TrackingID, "reason", err)
		return true
	case errors.Is(err, store.ErrNotFound):
		// Every producer commits the row before it publishes, so this envelope's publish was given up (the
		// request was answered 502 and its row deleted) yet reached the broker after all. Drop it at once.
		w.limiter.Refund()
		skipped.WithLabelValues("not_found").Inc()
		w.log.Info("dropping an envelope without a notification (a publish that was given up)", "tracking_id", env.TrackingID)
		return true
	default:
		w.limiter.Refund()
		return false // ctx ended while PostgreSQL was unavailable
	}
	ls.chat = d.ChatID
	if !ls.handover.IsZero() {
		w.chats.Sent(d.ChatID, ls.handover)
		ls.handover = time.Time{}
	}
	return w.deliver(ctx, p, d)
}

// claim claims the notification. It waits, indefinitely (until ctx ends), while PostgreSQL is unavailable,
// and up to HandoverWait while another attempt holds the notification: then settledAt is when that
// attempt ended (by the database's clock, translated to ours), the last moment another worker may have
// sent to the chat. settledAt is also set when the notification is not claimable and its last attempt
// ended less than the per-chat interval ago.
func (w *Worker) claim(ctx context.Context, trackingID string) (d store.Delivery, settledAt time.Time, err error) {
	handoverDeadline := time.Now().Add(w.opts.HandoverWait)
	waitedForLease := false
	wait := 10 * time.Millisecond
	for {
		d, err = w.opts.Store.ClaimDelivery(ctx, trackingID, w.opts.Lease)
		var nc *store.NotClaimable
		switch {
		case err == nil:
			if waitedForLease {
				settledAt = time.Now()
			}
			return d, settledAt, nil
		case errors.As(err, &nc) && nc.Leased:
			if time.Now().After(handoverDeadline) {
				return d, time.Time{}, err
			}
			waitedForLease = true
			wait = 50 * time.Millisecond
		case errors.As(err, &nc):
			// Not to be sent now. If its last attempt ended within the chat's interval, that attempt may
			// have been another worker's send to this chat (before a rebalance moved the partition here):
			// the lane's next send keeps its distance from it.
			if waitedForLease || nc.Age < w.opts.PerChatInterval {
				settledAt = time.Now().Add(-nc.Age)
			}
			return d, settledAt, err
		case errors.Is(err, store.ErrNotFound):
			return d, time.Time{}, err
		default:
			if ctx.Err() != nil {
				return d, time.Time{}, ctx.Err()
			}
			w.log.Warn("claim failed; retrying", "tracking_id", trackingID, "err", err)
			wait = max(wait, 500*time.Millisecond)
		}
		if err := sleepUntil(ctx, time.Now().Add(wait)); err != nil {
			return d, time.Time{}, err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// claimOutcome names why a claim took nothing, for its span.
func claimOutcome(err error) string {
	var nc *store.NotClaimable
	switch {
	case errors.As(err, &nc) && nc.Leased:
		return "leased"
	case errors.As(err, &nc):
		return "not claimable (" + string(nc.Status) + ")"
	case errors.Is(err, store.ErrNotFound):
		return "orphan"
	}
	return "error"
}
