package send

// The deletion of a delivered message on its tenant's request (spec v1-extensions §13): the workers' sweep
// takes the due ones (store.TakeMessageDeletes) and calls deleteMessage at the bot's and the chat's pace,
// as a send would.

import (
	"context"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/store"
)

const (
	// deleteLease is how long a deletion taken on is left to its worker before another sweep takes it
	// again (the worker died, or the platform did not answer).
	deleteLease = 30 * time.Second
	// deletesPerRun bounds the deletions one run of the sweep takes on.
	deletesPerRun = 50
)

// DeleteMessages deletes the messages whose deletion is due, one at a time, and returns how many it took
// on. Several workers may run it at once: each takes its own (SKIP LOCKED), and the write of a result is
// guarded, so a message is recorded deleted once, with one event.
func (s *Sender) DeleteMessages(ctx context.Context) int {
	due, err := s.opts.Store.TakeMessageDeletes(ctx, deletesPerRun, deleteLease)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("could not take the message deletions due", "err", err)
		}
		return 0
	}
	for _, m := range due {
		if ctx.Err() != nil {
			break // the lease brings the rest back
		}
		s.deleteMessage(ctx, m)
	}
	return len(due)
}

// deleteMessage deletes one message and records the outcome: deleted, or gone (the user deleted it, or it
// was deleted already: counted as deleted); refused for good (past the platform's 48 hours, or the user
// blocked the bot: given up); anything else is tried again when the lease runs out, or after the
// platform's retry_after.
func (s *Sender) deleteMessage(ctx context.Context, m store.MessageDelete) {
	log := s.log.With("tracking_id", m.TrackingID, "tenant_id", m.TenantID)
	msgID, perr := strconv.ParseInt(m.MessageID, 10, 64)
	if m.ChatID == 0 || perr != nil {
		// The user was erased (its notifications keep no chat), or a row changed past the store.
		deletes.WithLabelValues("refused").Inc()
		log.Warn("a message to delete has no chat or id; the deletion is given up")
		s.dropDelete(m)
		return
	}
	platform, err := s.platform(ctx, m.Bot)
	if err != nil {
		log.Error("cannot delete through the notification's bot", "bot", int64(m.Bot), "err", err)
		return // the lease brings it back, for a worker that can
	}
	pace := s.opts.Paces.Acquire(m.Bot)
	defer s.opts.Paces.Release(pace)
	if pace.Refused() {
		deletes.WithLabelValues("refused").Inc()
		log.Warn("the bot's token was refused; the deletion is given up")
		s.dropDelete(m)
		return
	}
	// A deletion is a request to the platform like a send: it takes a turn at the bot's rate and keeps the
	// chat's interval.
	if err := pace.Limiter.Wait(ctx, rate.High, m.TenantID); err != nil {
		return
	}
	if err := pace.Chats.Wait(ctx, m.ChatID); err != nil {
		pace.Limiter.Refund()
		return
	}
	if err := pace.Limiter.Admit(ctx); err != nil {
		return
	}
	pace.Chats.Sent(m.ChatID, time.Now())
	callCtx, cancel := context.WithTimeout(ctx, s.opts.SendTimeout)
	err = platform.DeleteMessage(callCtx, messenger.DeleteMessageRequest{ChatID: m.ChatID, MessageID: msgID})
	cancel()
	pace.Chats.Sent(m.ChatID, time.Now())
	if s.opts.Killed() {
		return // a dead worker writes nothing: the lease brings it back, and the platform answers "not found"
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	switch {
	case err == nil || messenger.MessageGone(err):
		outcome := "deleted"
		if err != nil {
			outcome = "gone"
		}
		deletes.WithLabelValues(outcome).Inc()
		if _, err := s.opts.Store.MessageDeleted(wctx, m.TrackingID); err != nil {
			log.Error("could not record a deleted message; the deletion will be tried again", "err", err)
		}
	case messenger.RetryAfter(err) > 0:
		deletes.WithLabelValues("retry").Inc()
		wait := messenger.RetryAfter(err)
		pace.Chats.Throttle(m.ChatID, wait)
		if err := s.opts.Store.DeferMessageDelete(wctx, m.TrackingID, wait); err != nil {
			log.Warn("could not defer a deletion", "err", err)
		}
	case messenger.Undeletable(err) || messenger.Classify(err) == messenger.Blocked || messenger.Classify(err) == messenger.Unlinked ||
		messenger.Classify(err) == messenger.Failed:
		deletes.WithLabelValues("refused").Inc()
		log.Warn("the platform refused to delete a message; the deletion is given up", "err", err)
		s.dropDelete(m)
	default:
		deletes.WithLabelValues("retry").Inc()
		log.Info("a deletion failed; it will be tried again", "err", err)
	}
}

func (s *Sender) dropDelete(m store.MessageDelete) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.opts.Store.DropMessageDelete(ctx, m.TrackingID); err != nil {
		s.log.Warn("could not give up a deletion", "tracking_id", m.TrackingID, "err", err)
	}
}
