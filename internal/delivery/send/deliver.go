package send

// The send step: wait for the chat's interval and the bot's rate, call sendMessage with the bot's token,
// and record the outcome the state machine (decide.go) decides.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/richtext"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/tracing"
)

// deliver sends a claimed notification through its bot and records the outcome.
func (s *Sender) deliver(ctx context.Context, p rate.Priority, d notification.Delivery, t *turn) bool {
	if d.Erased {
		// Its user was erased after it was accepted, and the erasure's pass has not reached it yet (issue
		// 35): it ends cancelled, as the pass would have ended it, and nothing is sent.
		t.refund()
		return s.finish(ctx, d, Erased())
	}
	if d.Kind == notification.KindTenant && d.ChatID == 0 {
		t.refund()
		if d.Relinked {
			return s.finish(ctx, d, Relinked())
		}
		return s.finish(ctx, d, NoLink())
	}
	if r, stop := d.Stopped(); stop {
		// The user blocked the bot or opted out (the claim read both): nothing is sent, and the turn at the
		// bot's rate goes back.
		t.refund()
		return s.finish(ctx, d, Decision{Result: r})
	}
	// Quiet hours (§14) come after the user's own stop and before the rate: a held notification gives its
	// turn back; a silent one is sent at once without a sound.
	if until, hold, silent := quietDecision(d, time.Now()); hold {
		t.refund()
		return each(d, func(one notification.Delivery) bool { return s.hold(one, until) })
	} else if silent {
		d.Silent = true
	}
	if d.BotTokenRefused {
		// The platform refused the bot's token (a send's 401, here or in another worker): nothing is sent
		// through it until the tenant gives a new one, and its next messages skip their waits.
		t.refund()
		t.pace.SetRefused(true)
		return s.finish(ctx, d, TokenRefused())
	}
	t.pace.SetRefused(false) // a new token, if it had been refused: the bot sends again
	entities, err := richtext.EntitiesJSON(d.Entities)
	if err != nil {
		// Only a row changed past the store could hold this; sent without its formatting it would not be
		// what the door validated. Counted with the platform's parse refusals, for the same alert.
		t.refund()
		parseFailures.WithLabelValues(tenantLabel(d.TenantID)).Inc()
		s.log.Error("the stored entities of a message could not be read", "tracking_id", d.TrackingID, "err", err)
		return s.finish(ctx, d, Unreadable(err))
	}
	platform, err := s.platform(ctx, d.Bot)
	if err != nil {
		t.refund()
		s.log.Error("cannot send through the notification's bot", "tracking_id", d.TrackingID, "bot", int64(d.Bot), "err", err)
		return s.finish(ctx, d, BotUnavailable(err, d.Attempts, s.opts.MaxAttempts, s.opts.Backoff, Expired(d, time.Now())))
	}
	if d.Superseded {
		// A later notification of its replace_key was delivered first: this older status must not replace it.
		t.refund()
		return s.finish(ctx, d, Superseded())
	}
	if d.Edit != nil {
		// A status message that updates (§13): the key's message is edited, at the same pace as a send.
		stop, err := s.call(ctx, p, d, t, "editMessageText", func(ctx context.Context, _ bool) error {
			return platform.EditMessageText(ctx, editRequest(d, entities))
		})
		switch {
		case stop != nil:
			return s.finish(ctx, d, *stop)
		case err == nil || messenger.NotModified(err):
			// "Not modified": the message shows this already (the same text again, or a retry after the
			// platform applied the edit and the worker died before its write): delivered.
			botSends.WithLabelValues(s.opts.BotLabel(d.Bot), messenger.Delivered.String()).Inc()
			edits.WithLabelValues(editOutcome(err)).Inc()
			return s.finish(ctx, d, Edited(d.Edit))
		case messenger.Uneditable(err):
			// The user deleted the message, or the platform will not edit it any more: a new message, which
			// the key follows from now on. It waits for a turn of its own: the edit took one.
			edits.WithLabelValues("uneditable").Inc()
			s.log.Info("the key's message cannot be edited; sending a new one", "tracking_id", d.TrackingID, "err", err)
			t.granted = false
		default:
			edits.WithLabelValues("error").Inc()
			return s.outcome(ctx, d, t, 0, false, err)
		}
	}
	var msgID int64
	var sentPaid bool
	stop, err := s.call(ctx, p, d, t, "sendMessage", func(ctx context.Context, paid bool) error {
		var err error
		sentPaid = paid
		msgID, err = platform.SendMessage(ctx, sendRequest(d, entities, paid))
		return err
	})
	if stop != nil {
		return s.finish(ctx, d, *stop)
	}
	return s.outcome(ctx, d, t, msgID, sentPaid, err)
}

// call makes one request to the platform for d at the bot's and the chat's pace: the bot's rate (a turn
// of its own bot's, unless the lane's grant is still unused), the chat's interval, the last admission
// (paid past the free rate, for a send: rate.Limiter.AdmitPaid), and returns the platform's answer. stop is
// the decision when the worker began shutting down first (err is then why): Release(false) if the request
// never left, Release(true) if it was interrupted (the platform may or may not have it).
func (s *Sender) call(ctx context.Context, p rate.Priority, d notification.Delivery, t *turn, method string,
	do func(ctx context.Context, paid bool) error) (stop *Decision, err error) {
	notSent, interrupted := Release(false), Release(true)
	if !t.granted {
		// A turn of its own bot's (turn.use), a bot that sends again, or the second request of one
		// delivery (an edit that became a send): waited for here, holding the slot.
		start := time.Now()
		if err := t.pace.Limiter.Wait(ctx, p, d.TenantID); err != nil {
			return &notSent, err
		}
		t.granted = true
		limiterWait.WithLabelValues("global", p.String()).Observe(time.Since(start).Seconds())
	}
	// The chat's slot is reserved now (the lane waited for it already, unless this is its first message or
	// another lane sends to the same chat: one messenger user linked by two tenants).
	start := time.Now()
	if err := t.pace.Chats.Wait(ctx, d.ChatID); err != nil {
		return &notSent, err
	}
	limiterWait.WithLabelValues("chat", p.String()).Observe(time.Since(start).Seconds())
	// The last moment before the request leaves: see rate.Limiter.Admit. Past the bot's free rate, a bot
	// allowed paid broadcasts pays for the send (rate.Limiter.AdmitPaid).
	paid, err := t.pace.Limiter.AdmitPaid(ctx)
	if err != nil {
		return &notSent, err
	}

	sent := time.Now()
	t.pace.Chats.Sent(d.ChatID, sent)
	callCtx, cancel := context.WithTimeout(ctx, s.opts.SendTimeout)
	callCtx, span := tracing.Tracer().Start(callCtx, method, trace.WithSpanKind(trace.SpanKindClient))
	err = do(callCtx, paid)
	if err != nil {
		span.SetStatus(codes.Error, messenger.Classify(err).String())
	}
	span.End()
	cancel()
	// The platform had the request before it answered: counting the chat's interval from the answer too
	// keeps two sends to one chat apart by at least the interval where the platform measures it, however
	// late this one reached it (a busy CPU, a slow network).
	t.pace.Chats.Sent(d.ChatID, time.Now())
	if err != nil && ctx.Err() != nil {
		// Shutdown interrupted the call: the platform may or may not have the message.
		return &interrupted, err
	}
	platformLatency.WithLabelValues(messenger.Classify(err).String()).Observe(time.Since(sent).Seconds())
	return nil, err
}

// outcome records the platform's answer err to a send (msgID its message_id; paid: it carried
// allow_paid_broadcast, counted in the tenant's usage when delivered) or an edit of d.
func (s *Sender) outcome(ctx context.Context, d notification.Delivery, t *turn, msgID int64, paid bool, err error) bool {
	class := messenger.Classify(err).String()
	label := s.opts.BotLabel(d.Bot)
	if d.Bot != notification.SharedBot && messenger.ErrorCode(err) == http.StatusUnauthorized {
		botSends.WithLabelValues(label, outcomeTokenRefused).Inc()
		s.tokenRefused(d, t.pace)
		return s.finish(ctx, d, TokenRefused())
	}
	botSends.WithLabelValues(label, class).Inc()
	if messenger.Unparsable(err) {
		// Failed without a retry (Decide), like any 4xx; counted apart, for the alert: the door validated it.
		parseFailures.WithLabelValues(tenantLabel(d.TenantID)).Inc()
		s.log.Error("the platform could not parse a message the gateway validated", "tracking_id", d.TrackingID,
			"tenant_id", d.TenantID, "format", d.Format, "err", err)
	}
	dec := Decide(msgID, err, d.Attempts, s.opts.MaxAttempts, s.opts.Backoff, Expired(d, time.Now()))
	dec.Result.PaidBroadcast = paid && dec.Result.Status == notification.Delivered
	if dec.Result.Status == notification.Blocked {
		s.markBlocked(d)
	}
	if dec.Throttle == ThrottleChat {
		botThrottles.WithLabelValues(label).Inc()
		if t.pace.Chats.Throttle(d.ChatID, dec.Wait) {
			throttles.WithLabelValues("bot").Inc()
			t.pace.Limiter.Pause(time.Now().Add(dec.Wait))
			s.log.Warn("the platform throttles the whole bot", "bot", label, "retry_after", dec.Wait)
		} else {
			throttles.WithLabelValues("chat").Inc()
		}
	}
	return s.finish(ctx, d, dec)
}

// editRequest is the editMessageText of a claimed notification with a message to edit (§13): the new
// text, entities, keyboard — none takes the message's away — and link preview, as sendRequest sends them.
// An edit makes no sound and keeps the message's protection: the platform takes neither flag here.
func editRequest(d notification.Delivery, entities json.RawMessage) messenger.EditMessageTextRequest {
	req := messenger.EditMessageTextRequest{ChatID: d.ChatID, MessageID: d.Edit.MessageID, Text: d.Body, Entities: entities,
		ReplyMarkup: d.ReplyMarkup}
	if d.NoLinkPreview {
		req.LinkPreviewOptions = &messenger.LinkPreviewOptions{IsDisabled: true}
	}
	return req
}

// sendRequest is the sendMessage of a claimed notification: its text and, as the door validated and the
// store kept them, its entities (as JSON: richtext.EntitiesJSON), keyboard and flags (spec v1-extensions §10).
func sendRequest(d notification.Delivery, entities json.RawMessage, paid bool) messenger.SendMessageRequest {
	req := messenger.SendMessageRequest{ChatID: d.ChatID, Text: d.Body, Entities: entities, ReplyMarkup: d.ReplyMarkup,
		DisableNotification: d.Silent, ProtectContent: d.ProtectContent, AllowPaidBroadcast: paid}
	if d.NoLinkPreview {
		req.LinkPreviewOptions = &messenger.LinkPreviewOptions{IsDisabled: true}
	}
	return req
}

// tokenRefused records that the platform refused a tenant's bot's token (a send's 401): the store marks
// the bot token_invalid — once, however many sends meet the 401 — which fails its later claims without a
// send and tells the operator (BotReady=False); this worker's next messages of the bot skip their waits.
func (s *Sender) tokenRefused(d notification.Delivery, pace *rate.Pace) {
	pace.SetRefused(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	changed, err := s.opts.Store.SetBotState(ctx, d.Bot, botstate.TokenInvalid, notification.BotTokenRefusedMessage)
	switch {
	case err != nil:
		// Its next sends meet the 401 too, and try again.
		s.log.Error("could not record that the platform refused a bot's token", "bot", int64(d.Bot), "err", err)
	case changed:
		s.log.Warn("the platform refused a bot's token: its notifications fail until the tenant gives a new one",
			"bot", int64(d.Bot), "tenant_id", d.TenantID)
	}
}

// markBlocked records the platform's 403 (the user blocked the bot, or deleted the account) on every link
// of the bot's chat, as a my_chat_member update would (spec §9): the chat's next notifications end blocked
// at their claims without a call. A failure is logged: the next send meets the 403 again.
func (s *Sender) markBlocked(d notification.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.opts.Store.SetChatBlocked(ctx, d.Bot, d.ChatID, true); err != nil {
		s.log.Error("could not record that the user blocked the bot", "tracking_id", d.TrackingID, "bot", int64(d.Bot), "err", err)
	}
}

// finish writes the decision, for each item of a digest (each under its own attempt). The items share
// one deadline for their retries (finishOne), so that a digest in an outage waits no longer than one
// notification. ctx is the delivery's: its end (the worker's grace period over) stops the retries, not
// the first try, which records even a call that the end cut short.
func (s *Sender) finish(ctx context.Context, d notification.Delivery, dec Decision) bool {
	deadline := time.Now().Add(s.opts.Lease)
	return each(d, func(one notification.Delivery) bool { return s.finishOne(ctx, one, dec, deadline) })
}

// finishOne writes the decision of one notification. The message is out: a status write that fails
// (PostgreSQL restarting, a broken connection) is tried again, backing off, until deadline — the length of
// the claim's lease from the end of the send. Giving up sooner would turn any outage longer than the
// retries into a duplicate: once the lease runs out the redrive sends the notification again. A write that
// lands after the lease but before the redrive took the claim over still counts (the attempt guards it),
// and one after it is dropped as stale. The lane waits meanwhile, which costs nothing: without the store
// it could claim nothing either — until the worker's grace period is over (ctx ends), when a worker on its
// way out stops waiting. Given up, the redrive sends it again (the one way a delivered message can be
// sent twice, besides a timeout the platform actually served).
func (s *Sender) finishOne(ctx context.Context, d notification.Delivery, dec Decision, deadline time.Time) bool {
	if s.opts.Killed() {
		return false // a dead worker writes nothing
	}
	r := dec.Result
	// Formatted only for a line that is written: most deliveries log nothing at the production level,
	// and With formats its attributes at once (3 % of the worker's CPU in issue 43's profile).
	log := func() *slog.Logger {
		return s.log.With("tracking_id", d.TrackingID, "attempt", d.Attempts, "status", r.Status)
	}
	var err error
	for try := 0; ; try++ {
		if try > 0 {
			wait := finishBackoff(try)
			if s.opts.Killed() || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
				break
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
			if s.opts.Killed() {
				return false
			}
		}
		var ok bool
		if try == 0 && !r.RemoveLink {
			// The first try goes with the other lanes' outcomes of the moment, in one statement; a retry
			// goes alone, and first asks whether the batch was written after all.
			if ok, err = s.finishes.Do(store.Finish{D: d, R: r}); errors.Is(err, errKilled) {
				return false
			}
			if err == nil {
				return s.recorded(log, r, dec, ok)
			}
			continue
		}
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
			return s.recorded(log, r, dec, ok)
		}
		if try == 1 {
			log().Warn("could not record the delivery; trying again until its lease runs out", "err", err)
		}
	}
	log().Error("could not record the delivery; the lease will expire and redrive it", "err", err)
	return true
}

// finishBackoff is the wait before a status write's try: 250 ms, doubling to 2 s.
func finishBackoff(try int) time.Duration {
	return min(250*time.Millisecond<<min(try-1, 3), 2*time.Second)
}

// recorded counts and logs an outcome the store wrote (ok), or dropped as stale.
func (s *Sender) recorded(log func() *slog.Logger, r notification.DeliveryResult, dec Decision, ok bool) bool {
	if !ok {
		skipped.WithLabelValues("stale_result").Inc()
		log().Warn("status not recorded: the claim was taken over after its lease ran out")
		return true
	}
	recordOutcome(r.Status, r.ErrorCode)
	if r.Status == notification.Delivered {
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			log().Debug("delivered") // not the platform's message id: it identifies the user's chat message
		}
	} else {
		// The full error, which may name hosts and addresses; tenants see only r.ErrorMessage.
		log().Info("delivery attempt ended", "error_code", r.ErrorCode, "error", r.ErrorMessage, "err", dec.Cause, "retry_in", r.RetryIn)
	}
	return true
}
