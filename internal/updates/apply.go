package updates

import (
	"context"
	"strconv"

	"github.com/heraldhq/herald/internal/store"
)

// Concurrent updates are applied together, as the outbox does for sends: one claim statement, one
// pipelined round trip of effects, one of dependent statements and one COMMIT serve a whole batch, then
// one Kafka produce publishes every reply — so the webhook's capacity is not one durable commit and one
// acknowledgement per update. A batch holds at most one update per messenger user, so one user's updates
// apply one after the other. A batch that fails is retried update by update, so one failing update (or a
// deadlock with another batch) costs the others nothing; the update that still fails answers an error and
// the platform sends it again.
const (
	applyLoops    = 2
	maxApplyBatch = 64
)

// job is one update's effect, with the messenger user it comes from (0: none).
type job struct {
	effect *store.Effect
	actor  int64
}

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
	err, derr := rc.updates.Do(ctx, &job{effect: e, actor: in.m.From.ID})
	if derr != nil {
		return derr
	}
	if err == nil {
		err = e.Err
	}
	return err
}

// applyBatch applies the batch in one transaction (falling back to one transaction per update when it
// fails) and publishes the replies of the committed updates.
func (rc *Receiver) applyBatch(jobs []*job) []error {
	ctx, cancel := context.WithTimeout(context.Background(), store.DefaultQueryTimeout)
	defer cancel()
	errs := make([]error, len(jobs))
	effects := make([]*store.Effect, len(jobs))
	for i, j := range jobs {
		effects[i] = j.effect
	}
	if err := rc.store.ApplyUpdates(ctx, effects); err != nil {
		if len(jobs) == 1 {
			errs[0] = err
			return errs
		}
		for i, e := range effects {
			errs[i] = rc.store.ApplyUpdates(ctx, []*store.Effect{e})
		}
	}
	var replies []store.NewNotification
	for i, e := range effects {
		if errs[i] == nil {
			replies = append(replies, e.Replies...)
		}
	}
	// A reply the broker does not take now is published by the relay: the update has taken effect, and the
	// platform must not send it again.
	rc.outbox.Publish(ctx, replies)
	return errs
}
