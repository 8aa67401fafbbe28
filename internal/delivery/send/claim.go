package send

// The claim step: check the envelope, claim the notification in PostgreSQL, and decide what to do with a
// message whose notification cannot be claimed now.

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/delivery/consume"
	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/tracing"
)

// Handle delivers the notification of one Kafka message. It reports whether the message is settled
// (its offset may be committed): false only when the worker was killed or aborted before settling it.
//
// The order of the waits is what makes delivery fair and keeps slots free: first the chat's interval up
// to claimLead before its slot (holding nothing), then the tenant's turn at its bot's rate (holding
// nothing), then an in-flight slot for the claim, the rest of the chat's interval, the call and the
// status write. Each bot has its own pace (rate.Paces), so a message
// waits only for its own bot. A grant that is not used (nothing to send) is refunded. The waits end with
// startCtx (the worker stops starting deliveries); the delivery itself runs under ctx.
func (s *Sender) Handle(startCtx, ctx context.Context, m consume.Message, lane *consume.Lane) bool {
	p := m.Priority
	// The consumer decoded the envelope at fetch (its tenant labels the backlog); it is not decoded again.
	env, err := m.Envelope, m.EnvelopeErr
	if err == nil {
		_, err = uuid.Parse(env.TrackingID)
	}
	if err != nil {
		skipped.WithLabelValues("bad_envelope").Inc()
		s.log.Error("dropping a malformed envelope", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "err", err)
		return true
	}
	// The delivery continues the trace of the request that published the envelope (its headers).
	ctx, span := tracing.Tracer().Start(tracing.FromHeaders(ctx, m.Headers), "deliver", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("herald.tracking_id", env.TrackingID), attribute.String("messaging.destination.name", m.Topic),
			attribute.Int("messaging.kafka.partition", m.Partition), attribute.Int64("messaging.kafka.offset", m.Offset)))
	defer span.End()
	// The bot the key names; the claim says for sure (turn.use).
	t := &turn{s: s, pace: s.opts.Paces.Acquire(lane.Bot)}
	defer t.release()
	// The chat's order across kinds and priorities (notification.AheadSQL): while a message ahead of this
	// one in its chat is pending, the claim takes nothing and the lane waits and asks again, from the
	// chat's interval on, up to OrderWait (then it sends regardless: a message ahead whose envelope was
	// lost waits minutes for the redrive).
	orderDeadline := time.Now().Add(s.opts.OrderWait)
	orderWait, orderStart := 20*time.Millisecond, time.Time{}
	var d notification.Delivery
	for {
		var settledAt time.Time
		inOrder := s.opts.OrderWait > 0 && time.Now().Before(orderDeadline)
		d, settledAt, err = s.waitAndClaim(startCtx, ctx, p, env, lane, t, inOrder)
		if !settledAt.IsZero() {
			lane.Handover = settledAt
		}
		var nc *store.NotClaimable
		if !errors.As(err, &nc) || !nc.Behind {
			break
		}
		t.refund()
		s.inflight.Release(p)
		if orderStart.IsZero() {
			orderStart = time.Now()
		}
		select {
		case <-startCtx.Done():
			return false
		case <-time.After(orderWait):
		}
		orderWait = min(2*orderWait, 500*time.Millisecond)
	}
	if !orderStart.IsZero() {
		limiterWait.WithLabelValues("order", p.String()).Observe(time.Since(orderStart).Seconds())
	}
	if !errors.Is(err, errNotStarted) {
		defer s.inflight.Release(p)
	}
	var nc *store.NotClaimable
	switch {
	case err == nil:
	case errors.Is(err, errNotStarted):
		return false
	case errors.As(err, &nc) && nc.Leased:
		// Still held by another attempt after HandoverWait: its holder is stuck or dead. Its lease will run
		// out and the redrive sends it again; the lane moves on.
		t.refund()
		skipped.WithLabelValues("leased").Inc()
		s.log.Warn("skipping a notification another attempt still holds", "tracking_id", env.TrackingID)
		return true
	case errors.Is(err, store.ErrNotClaimable):
		// Terminal, or a retry not yet due (the scheduler re-publishes it).
		t.refund()
		skipped.WithLabelValues("not_claimable").Inc()
		s.log.Debug("skipping", "tracking_id", env.TrackingID, "reason", err)
		return true
	case errors.Is(err, store.ErrNotFound):
		// Every producer commits the row before it publishes, so this envelope's publish was given up (the
		// request was answered 502 and its row deleted) yet reached the broker after all. Drop it at once.
		t.refund()
		skipped.WithLabelValues("not_found").Inc()
		s.log.Info("dropping an envelope without a notification (a publish that was given up)", "tracking_id", env.TrackingID)
		return true
	default:
		t.refund()
		return false // ctx ended while PostgreSQL was unavailable
	}
	if d.DigestKey != "" {
		// A digest's item takes the others with it: one message, one turn at the bot's rate.
		g, err := s.gather(d)
		if err != nil {
			t.refund()
			s.log.Error("could not gather a digest; its item is released to be claimed again", "tracking_id", d.TrackingID, "err", err)
			return s.finish(ctx, d, Release(false))
		}
		d = g
	}
	lane.Chat = d.ChatID
	t.use(d.Bot)
	if !lane.Handover.IsZero() {
		t.pace.Chats.Sent(d.ChatID, lane.Handover)
		lane.Handover = time.Time{}
	}
	return s.deliver(ctx, p, d, t)
}

// errNotStarted: the worker stopped starting deliveries (startCtx ended) while this one waited for its
// chat, its turn or an in-flight slot.
var errNotStarted = errors.New("delivery not started")

// waitAndClaim waits for the chat's interval up to claimLead before its slot (holding nothing), then the tenant's turn at its bot's rate
// (holding nothing), then an in-flight slot, and claims the notification (inOrder: keeping the chat's
// order, ClaimDeliveryInOrder). Unless it returns errNotStarted it holds the slot, which the caller
// releases; a grant not used is the caller's to refund (t.refund). A bot whose token was refused sends
// nothing: its messages go straight to their claims, which fail them.
func (s *Sender) waitAndClaim(startCtx, ctx context.Context, p rate.Priority, env queue.Envelope, lane *consume.Lane, t *turn,
	inOrder bool) (notification.Delivery, time.Time, error) {
	if !t.pace.Refused() {
		start := time.Now()
		if lane.Chat != 0 {
			if err := t.pace.Chats.WaitFree(startCtx, lane.Chat, claimLead); err != nil {
				return notification.Delivery{}, time.Time{}, errNotStarted
			}
			limiterWait.WithLabelValues("chat", p.String()).Observe(time.Since(start).Seconds())
			start = time.Now()
		}
		if err := t.pace.Limiter.Wait(startCtx, p, env.TenantID); err != nil {
			return notification.Delivery{}, time.Time{}, errNotStarted
		}
		t.granted = true
		limiterWait.WithLabelValues("global", p.String()).Observe(time.Since(start).Seconds())
	}
	if err := s.inflight.Acquire(startCtx, p); err != nil {
		t.refund()
		return notification.Delivery{}, time.Time{}, errNotStarted
	}
	claimCtx, claimSpan := tracing.Tracer().Start(ctx, "claim")
	defer claimSpan.End()
	d, settledAt, err := s.claim(claimCtx, env.TrackingID, inOrder)
	if err != nil {
		claimSpan.SetAttributes(attribute.String("herald.claim", claimOutcome(err)))
	}
	return d, settledAt, err
}

// turn is a delivery's place at its bot's pace: the pace, and whether it was granted a turn at the bot's
// rate (refunded when it is not used).
type turn struct {
	s       *Sender
	pace    *rate.Pace
	granted bool
}

// refund gives back the grant, if any.
func (t *turn) refund() {
	if t.granted {
		t.pace.Limiter.Refund()
		t.granted = false
	}
}

// use makes the turn one of bot's: the bot the claim found. It is the bot the key named unless the
// envelope was keyed before its bot was known (an envelope of an older release, keyed by its tenant and
// user, is the shared bot's): then the grant goes back, and the delivery waits for a turn of its own
// bot's (Sender.deliver).
func (t *turn) use(bot notification.BotID) {
	if t.pace.Bot == bot {
		return
	}
	t.refund()
	t.s.opts.Paces.Release(t.pace)
	t.pace = t.s.opts.Paces.Acquire(bot)
}

func (t *turn) release() { t.s.opts.Paces.Release(t.pace) }

// claim claims the notification. It waits, indefinitely (until ctx ends), while PostgreSQL is unavailable,
// and up to HandoverWait while another attempt holds the notification: then settledAt is when that
// attempt ended (by the database's clock, translated to ours), the last moment another worker may have
// sent to the chat. settledAt is also set when the notification is not claimable and its last attempt
// ended less than the per-chat interval ago.
func (s *Sender) claim(ctx context.Context, trackingID string, inOrder bool) (d notification.Delivery, settledAt time.Time, err error) {
	handoverDeadline := time.Now().Add(s.opts.HandoverWait)
	waitedForLease := false
	wait := 10 * time.Millisecond
	claim := s.opts.Store.ClaimDelivery
	if inOrder {
		claim = s.opts.Store.ClaimDeliveryInOrder
	}
	// The first try goes with the other lanes' claims of the moment, in one statement; a notification it
	// did not claim is asked for alone, which says why (and waits for a handover, or PostgreSQL).
	if ctx.Err() == nil {
		if d, err := s.claims.Do(store.Claim{TrackingID: trackingID, InOrder: inOrder}); err == nil && d != nil {
			return *d, time.Time{}, nil
		}
	}
	for {
		d, err = claim(ctx, trackingID, s.opts.Lease)
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
		case errors.As(err, &nc) && nc.Behind:
			return d, time.Time{}, err // the caller waits for the message ahead (Handle)
		case errors.As(err, &nc):
			// Not to be sent now. If its last attempt ended within the chat's interval, that attempt may
			// have been another worker's send to this chat (before a rebalance moved the partition here):
			// the lane's next send keeps its distance from it.
			if waitedForLease || nc.Age < s.opts.PerChatInterval {
				settledAt = time.Now().Add(-nc.Age)
			}
			return d, settledAt, err
		case errors.Is(err, store.ErrNotFound):
			return d, time.Time{}, err
		default:
			if ctx.Err() != nil {
				return d, time.Time{}, ctx.Err()
			}
			s.log.Warn("claim failed; retrying", "tracking_id", trackingID, "err", err)
			wait = max(wait, 500*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return d, time.Time{}, ctx.Err()
		case <-time.After(wait):
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
	case errors.As(err, &nc) && nc.Behind:
		return "behind a message ahead in its chat"
	case errors.As(err, &nc):
		return "not claimable (" + string(nc.Status) + ")"
	case errors.Is(err, store.ErrNotFound):
		return "orphan"
	}
	return "error"
}
