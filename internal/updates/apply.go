package updates

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/store"
)

// Concurrent updates are applied together, as the outbox does for sends: one claim statement, one
// pipelined round trip of effects, one of dependent statements and one COMMIT serve a whole batch, then
// one Kafka produce publishes every reply — so the webhook's capacity is not one durable commit and one
// acknowledgement per update. A batch holds at most one update per messenger user, so one user's updates
// apply one after the other. A batch that fails is retried update by update, so one failing update (or a
// deadlock with another batch) costs the others nothing; the update that still fails answers an error and
// the platform sends it again.
//
// Deadlines (issue 35): a batch of several gets a fifth of an update's deadline (batchTimeout), and each
// retry runs concurrently under a fresh deadline of its own — never the batch's, which may have expired —,
// so that a slow update delays the others of its batch by at most the batch's deadline and fails none of
// them. No update's work grows with what a tenant has queued: an opt-out ends the covered notifications
// after its commit (store.FinishEndings).
const (
	applyLoops    = 2
	maxApplyBatch = 64
	// batchShare: a batch of several updates gets 1/batchShare of an update's deadline before it falls back
	// to one transaction per update.
	batchShare = 5
)

// job is one update's effect, with the messenger user it comes from (0: none).
type job struct {
	effect *store.Effect
	actor  int64
	// retried receives the update's answer when its batch failed and it is retried on its own, apart from
	// the batch (applyBatch answers errRetried then).
	retried chan error
}

// errRetried is applyBatch's answer for an update it retries on its own: the answer comes on job.retried.
var errRetried = errors.New("retried on its own")

func jobActor(j *job) string {
	if j.actor == 0 {
		return ""
	}
	return strconv.FormatInt(j.actor, 10)
}

// apply runs an update's effect in a batch and publishes its replies once committed. It returns
// store.ErrUpdateProcessed for an update_id its bot sent before. Once handed over, the update is carried
// out under the batch's own deadline, whatever happens to ctx, so that the answer says what happened.
func (rc *Receiver) apply(ctx context.Context, in incoming, e *store.Effect) error {
	e.Bot = in.bot
	// The sender's language for the chat (§12): the locale chain of templated sends reads it.
	if in.m != nil && in.m.From != nil {
		e.ChatID, e.Language = in.m.Chat.ID, in.m.From.LanguageCode
	}
	j := &job{effect: e, actor: in.m.From.ID, retried: make(chan error, 1)}
	err, derr := rc.updates.Do(ctx, j)
	if derr != nil {
		return derr
	}
	if errors.Is(err, errRetried) {
		err = <-j.retried
	}
	if err == nil {
		err = e.Err
	}
	return err
}

// applyBatch applies the batch in one transaction and publishes the replies of the committed updates. When
// the transaction fails, each update is retried on its own, concurrently and apart from the batch loop,
// each under a deadline of its own (retry): the batch answers errRetried at once, and each update's answer
// comes when its own retry ends, so that a slow update neither fails nor delays the others (issue 35).
func (rc *Receiver) applyBatch(jobs []*job) []error {
	errs := make([]error, len(jobs))
	effects := make([]*store.Effect, len(jobs))
	for i, j := range jobs {
		effects[i] = j.effect
	}
	timeout := rc.timeout
	if len(jobs) > 1 {
		timeout /= batchShare
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := rc.store.ApplyUpdates(ctx, effects)
	cancel()
	if err != nil {
		if len(jobs) == 1 {
			errs[0] = err
			return errs
		}
		for i, j := range jobs {
			errs[i] = errRetried
			rc.retries.Go(func() { j.retried <- rc.retry(j.effect) })
		}
		return errs
	}
	var replies []store.NewNotification
	var ended []store.UserRef
	for _, e := range effects {
		replies = append(replies, e.Replies...)
		ended = append(ended, e.Endings...)
	}
	rc.publish(replies, ended)
	return errs
}

// retry applies one update of a batch that failed, in a transaction of its own under a fresh deadline
// (never the batch's, which may have run out), and publishes its replies once committed.
func (rc *Receiver) retry(e *store.Effect) error {
	ctx, cancel := context.WithTimeout(context.Background(), rc.timeout)
	defer cancel()
	if err := rc.store.ApplyUpdates(ctx, []*store.Effect{e}); err != nil {
		return err
	}
	rc.publish(e.Replies, e.Endings)
	return nil
}

// publish publishes committed updates' replies and starts the endings their decisions call for. A reply the
// broker does not take now is published by the relay: the update has taken effect, and the platform must
// not send it again.
func (rc *Receiver) publish(replies []store.NewNotification, ended []store.UserRef) {
	ctx, cancel := context.WithTimeout(context.Background(), rc.timeout)
	defer cancel()
	rc.outbox.Publish(ctx, replies)
	rc.finishEndings(ended)
}

// maxPendingEndings bounds the users whose endings wait for the background pass; past it, the delivery
// workers' sweep ends theirs (store.DueEndings).
const maxPendingEndings = 1024

// endingTimeout bounds one user's background pass; what is left is the sweep's.
const endingTimeout = time.Minute

// finishEndings hands the users whose notifications committed updates end to the background pass, without
// waiting: an update is answered once it has committed, whatever the tenant has queued for its user.
func (rc *Receiver) finishEndings(users []store.UserRef) {
	for _, u := range users {
		select {
		case rc.endings <- u:
		default:
			rc.log.Warn("background endings full: the sweep will end these", "tenant_id", u.TenantID)
		}
	}
}

// runEndings ends, one user at a time and chunk by chunk, the notifications of the users finishEndings
// hands over, until Close.
func (rc *Receiver) runEndings() {
	for u := range rc.endings {
		ctx, cancel := context.WithTimeout(context.Background(), endingTimeout)
		ended, done, err := rc.store.FinishEndings(ctx, u, 0)
		cancel()
		if err != nil || !done {
			// Never the user id (docs/security.md).
			rc.log.Warn("could not end the notifications an update covers: the sweep will", "tenant_id", u.TenantID, "ended", ended, "err", err)
		}
	}
}
