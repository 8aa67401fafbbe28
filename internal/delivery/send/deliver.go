package send

// The send step: wait for the chat's interval and the bot's rate, call sendMessage, and record the
// outcome the state machine (decide.go) decides.

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/tracing"
)

// deliver sends a claimed notification and records the outcome.
func (s *Sender) deliver(ctx context.Context, p rate.Priority, d notification.Delivery) bool {
	if d.Kind == notification.KindTenant && d.ChatID == 0 {
		s.opts.Limiter.Refund()
		if d.Relinked {
			return s.finish(d, Relinked())
		}
		return s.finish(d, NoLink())
	}
	// The chat's slot is reserved now (the lane waited for it already, unless this is its first message or
	// another lane sends to the same chat: one messenger user linked by two tenants).
	start := time.Now()
	if err := s.opts.Chats.Wait(ctx, d.ChatID); err != nil {
		return s.finish(d, Release(false))
	}
	limiterWait.WithLabelValues("chat", p.String()).Observe(time.Since(start).Seconds())
	// The last moment before the request leaves: see rate.Limiter.Admit.
	if err := s.opts.Limiter.Admit(ctx); err != nil {
		return s.finish(d, Release(false))
	}

	sent := time.Now()
	s.opts.Chats.Sent(d.ChatID, sent)
	sendCtx, cancel := context.WithTimeout(ctx, s.opts.SendTimeout)
	sendCtx, sendSpan := tracing.Tracer().Start(sendCtx, "sendMessage", trace.WithSpanKind(trace.SpanKindClient))
	msgID, err := s.opts.Platform.SendMessage(sendCtx, messenger.SendMessageRequest{ChatID: d.ChatID, Text: d.Body, ReplyMarkup: d.ReplyMarkup})
	if err != nil {
		sendSpan.SetStatus(codes.Error, messenger.Classify(err).String())
	}
	sendSpan.End()
	cancel()
	// The platform had the request before it answered: counting the chat's interval from the answer too
	// keeps two sends to one chat apart by at least the interval where the platform measures it, however
	// late this one reached it (a busy CPU, a slow network).
	s.opts.Chats.Sent(d.ChatID, time.Now())
	elapsed := time.Since(sent)
	if err != nil && ctx.Err() != nil {
		// Shutdown interrupted the call: the platform may or may not have the message.
		return s.finish(d, Release(true))
	}
	class := messenger.Classify(err).String()
	platformLatency.WithLabelValues(class).Observe(elapsed.Seconds())
	dec := Decide(msgID, err, d.Attempts, s.opts.MaxAttempts, s.opts.Backoff, Expired(d, time.Now()))
	if dec.Throttle == ThrottleChat {
		if s.opts.Chats.Throttle(d.ChatID, dec.Wait) {
			throttles.WithLabelValues("bot").Inc()
			s.opts.Limiter.Pause(time.Now().Add(dec.Wait))
			s.log.Warn("the platform throttles the whole bot", "retry_after", dec.Wait)
		} else {
			throttles.WithLabelValues("chat").Inc()
		}
	}
	return s.finish(d, dec)
}

// finish writes the decision. A write that keeps failing is given up after a few tries: the lease then
// runs out and the redrive loop sends the notification again (the one way a delivered message can be sent
// twice, besides a timeout the platform actually served).
func (s *Sender) finish(d notification.Delivery, dec Decision) bool {
	if s.opts.Killed() {
		return false // a dead worker writes nothing
	}
	r := dec.Result
	log := s.log.With("tracking_id", d.TrackingID, "attempt", d.Attempts, "status", r.Status)
	var err error
	for try := range 4 {
		if try > 0 {
			time.Sleep(time.Duration(try) * 250 * time.Millisecond)
		}
		var ok bool
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err = s.opts.Store.FinishDelivery(ctx, d, r)
		if err == nil && !ok && try > 0 {
			// An earlier try may have committed and lost only its answer (the connection broke): then the
			// row already shows this result, and nobody took the claim over.
			var recorded bool
			if recorded, err = s.opts.Store.DeliveryRecorded(ctx, d, r); recorded {
				ok = true
			}
		}
		cancel()
		if err == nil {
			if !ok {
				skipped.WithLabelValues("stale_result").Inc()
				log.Warn("status not recorded: the claim was taken over after its lease ran out")
			} else {
				recordOutcome(r.Status, r.ErrorCode)
				if r.Status == notification.Delivered {
					log.Debug("delivered") // not the platform's message id: it identifies the user's chat message
				} else {
					// The full error, which may name hosts and addresses; tenants see only r.ErrorMessage.
					log.Info("delivery attempt ended", "error_code", r.ErrorCode, "error", r.ErrorMessage, "err", dec.Cause, "retry_in", r.RetryIn)
				}
			}
			return true
		}
	}
	log.Error("could not record the delivery; the lease will expire and redrive it", "err", err)
	return true
}
