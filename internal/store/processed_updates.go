package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
)

// The transaction of messenger updates (internal/updates batches them). Every update that has an effect
// runs in one transaction that first claims its update_id — of its bot: update ids are per bot on the
// platform — in processed_updates, then applies the effect,
// then inserts the replies; the caller publishes the replies after the commit. So an update_id takes
// effect at most once, also when two copies arrive at the same time (the second INSERT waits for the first
// transaction and then finds the row), and a failure before the commit leaves nothing behind, so the
// platform's retry can succeed.

// ErrUpdateProcessed says the update_id was handled before; the caller acknowledges it and does nothing.
var ErrUpdateProcessed = errors.New("update already processed")

// Effect is what one update does in its transaction, in two pipelined round trips shared by every update of
// a batch:
//
//  1. first queues the effect's statements; they run after the update_id was claimed.
//  2. then, with the results of the first round trip in, queues dependent statements and returns the
//     replies to insert.
//
// A reply known in advance (replies) is inserted in the first round trip, saving the second. Build one
// with ReplyEffect, RedeemLinkToken or CompleteVerifications; ApplyUpdates fills Err and Replies.
type Effect struct {
	UpdateID int64
	// Bot is the bot that received the update (notification.SharedBot: the shared bot). Two bots' updates
	// may carry the same update_id: each takes effect once per bot.
	Bot notification.BotID
	// ChatID and Language: the chat the update came from and the sender's language_code (§12), recorded
	// for that chat and bot by the statement that claims the update, when the update is new. Language ""
	// records nothing (the platform does not always report one).
	ChatID   int64
	Language string
	replies  []NewNotification
	first    func(b *pgx.Batch)
	then     func(b *pgx.Batch) ([]NewNotification, error)

	// Err is ErrUpdateProcessed when the update_id was claimed before (nothing was applied).
	Err error
	// Replies are the system messages the effect inserted, for the caller to publish after the commit.
	Replies []NewNotification
	// Endings are the users whose notifications the update's decision (an opt-out, a relink) ends: after
	// the commit, the caller runs FinishEndings for each (issue 35); the sweep does if it does not.
	Endings []UserRef
}

// ReplyEffect is an update whose only effect is a reply (an explanation, a refusal, a developer command's
// answer), once per update_id.
func ReplyEffect(updateID int64, reply NewNotification) *Effect {
	return &Effect{UpdateID: updateID, replies: []NewNotification{reply}}
}

// ApplyUpdates applies the effects in one transaction. It returns an error only when the transaction
// failed (nothing was applied); an effect whose update_id was claimed before for its bot gets
// ErrUpdateProcessed in its Err. Two copies of one update_id of one bot in the same call: the second is a
// repeat.
func (s *Store) ApplyUpdates(ctx context.Context, effects []*Effect) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	for _, e := range effects {
		e.Err, e.Replies, e.Endings = nil, nil, nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Claim every update_id in one statement, in a fixed order so two batches cannot deadlock here.
		keys := make([]processedUpdate, len(effects))
		for i, e := range effects {
			keys[i] = processedUpdate{bot: int64(e.Bot), update: e.UpdateID}
		}
		slices.SortFunc(keys, func(a, b processedUpdate) int {
			return cmp.Or(cmp.Compare(a.bot, b.bot), cmp.Compare(a.update, b.update))
		})
		bots, ids := make([]int64, len(keys)), make([]int64, len(keys))
		for i, k := range keys {
			bots[i], ids[i] = k.bot, k.update
		}
		// The languages ride on the same statement: the latest claimed update of each (bot, chat) that
		// reports one sets the chat's language (§12), so keeping it costs no round trip.
		var lBots, lUpdates, lChats []int64
		var lCodes []string
		for _, e := range effects {
			if e.Language != "" && e.ChatID != 0 {
				lBots, lUpdates, lChats = append(lBots, int64(e.Bot)), append(lUpdates, e.UpdateID), append(lChats, e.ChatID)
				lCodes = append(lCodes, e.Language)
			}
		}
		rows, err := tx.Query(ctx, claimUpdatesSQL, bots, ids, lBots, lUpdates, lChats, lCodes)
		if err != nil {
			return fmt.Errorf("claiming updates: %w", err)
		}
		claimed := map[processedUpdate]bool{}
		var k processedUpdate
		if _, err := pgx.ForEachRow(rows, []any{&k.bot, &k.update}, func() error { claimed[k] = true; return nil }); err != nil {
			return fmt.Errorf("claiming updates: %w", err)
		}
		var live []*Effect
		for _, e := range effects {
			if k := (processedUpdate{bot: int64(e.Bot), update: e.UpdateID}); claimed[k] {
				delete(claimed, k) // a second copy in the same batch is a repeat
				live = append(live, e)
			} else {
				e.Err = ErrUpdateProcessed
			}
		}
		if len(live) == 0 {
			return nil
		}
		first := &pgx.Batch{}
		for _, e := range live {
			for _, n := range e.replies {
				queueSystem(first, n)
			}
			if e.first != nil {
				e.first(first)
			}
		}
		if first.Len() > 0 {
			if err := tx.SendBatch(ctx, first).Close(); err != nil {
				return fmt.Errorf("applying updates: %w", err)
			}
		}
		second := &pgx.Batch{}
		for _, e := range live {
			e.Replies = append(e.Replies, e.replies...)
			if e.then == nil {
				continue
			}
			more, err := e.then(second)
			if err != nil {
				return err
			}
			for _, n := range more {
				queueSystem(second, n)
			}
			e.Replies = append(e.Replies, more...)
		}
		if second.Len() > 0 {
			if err := tx.SendBatch(ctx, second).Close(); err != nil {
				return fmt.Errorf("applying updates: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		for _, e := range effects {
			e.Replies, e.Endings = nil, nil
		}
	}
	return translate(err, "applying updates")
}

// claimUpdatesSQL claims the update ids ($1 bots, $2 ids) and records the languages of the claimed ones
// ($3 bots, $4 update ids, $5 chats, $6 language codes): per (bot, chat) the one of its latest update, and
// only when it changes (an update from a chat whose language is known writes nothing more).
const claimUpdatesSQL = `
	WITH claimed AS (
		INSERT INTO processed_updates (bot_id, update_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])
		ON CONFLICT DO NOTHING RETURNING bot_id, update_id),
	languages AS (
		INSERT INTO chat_languages AS cl (bot_id, chat_id, language_code)
		SELECT DISTINCT ON (l.bot_id, l.chat_id) l.bot_id, l.chat_id, left(l.code, 35)
		FROM unnest($3::bigint[], $4::bigint[], $5::bigint[], $6::text[]) AS l(bot_id, update_id, chat_id, code)
		JOIN claimed c ON c.bot_id = l.bot_id AND c.update_id = l.update_id
		ORDER BY l.bot_id, l.chat_id, l.update_id DESC
		ON CONFLICT (bot_id, chat_id) DO UPDATE SET language_code = excluded.language_code, updated_at = now()
		WHERE cl.language_code <> excluded.language_code)
	SELECT bot_id, update_id FROM claimed`

// processedUpdate is the key of processed_updates: an update of a bot (0: the shared bot).
type processedUpdate struct{ bot, update int64 }

// queueSystem queues the insert of a system message in state queued, for a batch.
func queueSystem(b *pgx.Batch, n NewNotification) { b.Queue(insertSystemSQL, systemArgs(n)...) }
