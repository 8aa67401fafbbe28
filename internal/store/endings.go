package store

// The endings that follow a decision (issue 35): an opt-out (opt_outs.go), a relink (link_tokens.go) or an
// erasure (users.go) commits in a short transaction the decision and a row of endings_due for its user, and
// the user's notifications it covers are ended afterwards, EndingChunk rows per statement, each chunk its
// own transaction with the notification.* events of the rows it ended — so that neither the update's
// transaction nor the user's gate lock (a bucket shared by every tenant) lasts as long as the tenant's
// backlog. Meanwhile nothing covered is sent: the claim reads the opt-outs, the link and the erasure
// (claimOnce) and ends such a notification without a call. Whoever made the decision starts the pass (the
// webhook's receiver in the background, the API inline for a first chunk); the delivery workers' sweep
// (DueEndings) finishes what a pass left, e.g. when its process died.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald/internal/notification"
)

// EndingChunk is how many of a user's notifications one statement of a pass reads (and at most ends).
const EndingChunk = 1000

// UserRef names a tenant's user.
type UserRef struct{ TenantID, UserID string }

// markEndingSQL records that user $2 of tenant $1 has notifications to end (or refreshes since).
const markEndingSQL = `INSERT INTO endings_due (tenant_id, user_id) VALUES ($1, $2)
	ON CONFLICT (tenant_id, user_id) DO UPDATE SET since = clock_timestamp()`

// markErasureSQL records that user $2 of tenant $1 was erased: every notification of the user created until
// now is the erasure's (erased_at; a later erasure covers more). It is run after the user's gate lock is
// taken, so that every send that passed the gate before has committed, with an earlier created_at, and every
// later one finds no verified phone. It returns whether an erasure was pending already (a pass has not
// finished it).
const markErasureSQL = `WITH before AS (SELECT erased_at FROM endings_due WHERE tenant_id = $1 AND user_id = $2)
	INSERT INTO endings_due AS d (tenant_id, user_id, erased_at) VALUES ($1, $2, clock_timestamp())
	ON CONFLICT (tenant_id, user_id) DO UPDATE SET since = clock_timestamp(), erased_at = clock_timestamp()
	RETURNING (SELECT erased_at IS NOT NULL FROM before) IS TRUE`

// erasedSQL is the condition that the tenant notification n (a row's alias) belongs to an erasure the
// pass has not finished: the claim ends it cancelled without a send (notification.Erase). One probe of
// endings_due's primary key.
func erasedSQL(n string) string {
	return `EXISTS (SELECT 1 FROM endings_due ed WHERE ed.tenant_id = ` + n + `.tenant_id AND ed.user_id = ` + n + `.user_id
		AND ` + n + `.created_at <= ed.erased_at)`
}

// endingChunkSQL reads the next chunk of user $2 of tenant $1, newest first, below the keyset ($3, $4)
// (a range of notifications_user_list_idx, EndingChunk rows whatever their state), and ends those of them
// that wait and that an erasure covers (created until its erased_at, $5; NULL: none: cancelled, as the
// erasure's cancel), that an opt-out covers (blocked, "opted out": notification.OptOut) or whose chat is not
// the user's link's any more (unlinked, "relinked": notification.Relink), each with its notification.*
// event. The three sets are disjoint (a row one ends the others do not read), so one statement ends them
// all. It returns how many rows it read, the last one's key, and how many it ended.
var endingChunkSQL = `
	WITH picked AS (
		SELECT tracking_id, created_at FROM notifications
		WHERE tenant_id = $1 AND user_id = $2 AND kind = ` + notification.KindTenantSQL + `
		  AND (created_at, tracking_id) < ($3::timestamptz, $4::uuid)
		ORDER BY created_at DESC, tracking_id DESC LIMIT ` + fmt.Sprint(EndingChunk) + `),
	link AS (SELECT chat_id, bot_id FROM links WHERE tenant_id = $1 AND user_id = $2),
	erased AS (` + cancelUpdate(`tracking_id IN (SELECT tracking_id FROM picked) AND created_at <= $5::timestamptz`) + `
		RETURNING ` + notificationEventColumns + `),
	opted AS (` + optOutUpdate(`tracking_id IN (SELECT tracking_id FROM picked) AND NOT COALESCE(created_at <= $5::timestamptz, false)
		AND EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = $1 AND o.user_id = $2 AND `+optOutCovers(`notifications.category`)+`)`) + `
		RETURNING ` + notificationEventColumns + `),
	relinked AS (` + relinkUpdate(`tracking_id IN (SELECT tracking_id FROM picked) AND EXISTS (SELECT 1 FROM link)
		AND NOT COALESCE(created_at <= $5::timestamptz, false)
		AND NOT EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = $1 AND o.user_id = $2 AND `+optOutCovers(`notifications.category`)+`)`,
	`(SELECT bot_id FROM link)`, `(SELECT chat_id FROM link)`) + `
		RETURNING ` + notificationEventColumns + `),
	ended AS (SELECT * FROM erased UNION ALL SELECT * FROM opted UNION ALL SELECT * FROM relinked),
	` + notificationEvents("ended") + `,
	last AS (SELECT created_at, tracking_id FROM picked ORDER BY created_at, tracking_id LIMIT 1)
	SELECT (SELECT count(*) FROM picked), (SELECT created_at FROM last), (SELECT tracking_id::text FROM last),
	       (SELECT count(*) FROM erased), (SELECT count(*) FROM opted) + (SELECT count(*) FROM relinked)`

// scrubChunkSQL empties the notifications of user $2 of tenant $1 in a chunk's range of keys — below ($3,
// $4), from ($5, $6) on — created until the erasure's erased_at ($7): the body (with its entities and link
// buttons, §10), the chat and the messenger message id; delivery metadata stays (v1 extensions §6). Every
// state: a delivered one, and one being delivered right now (its attempt then records no messenger message
// id: finishUpdateSQL). A statement of its own after endingChunkSQL, so that it sees the rows as they are
// then (a claim that took one meanwhile). It returns how many it emptied and the chats they had gone to.
var scrubChunkSQL = `
	WITH old AS (
		SELECT tracking_id, chat_id FROM notifications
		WHERE tenant_id = $1 AND user_id = $2 AND kind = ` + notification.KindTenantSQL + `
		  AND (created_at, tracking_id) < ($3::timestamptz, $4::uuid) AND (created_at, tracking_id) >= ($5::timestamptz, $6::uuid)
		  AND created_at <= $7::timestamptz
		  AND (body <> '' OR chat_id IS NOT NULL OR messenger_message_id IS NOT NULL)
		FOR UPDATE),
	scrubbed AS (
		UPDATE notifications n SET body = '', entities = NULL, reply_markup = NULL, chat_id = NULL, messenger_message_id = NULL
		FROM old WHERE n.tracking_id = old.tracking_id
		RETURNING old.chat_id)
	SELECT count(*), COALESCE(array_agg(DISTINCT chat_id) FILTER (WHERE chat_id IS NOT NULL), '{}') FROM scrubbed`

// Endings counts what a pass of FinishEndings did.
type Endings struct {
	Ended int // notifications ended: opted out, relinked, or cancelled by an erasure (Cancelled)
	// Cancelled counts the waiting notifications an erasure ended cancelled, Erased those of the erased user
	// it emptied (the cancelled ones included); ChatErasure what went with the chats they had gone to.
	Cancelled, Erased int
	ChatErasure
}

// FinishEndings ends the notifications of the user that the user's opt-outs, link and erasure say must end,
// at most maxChunks chunks of EndingChunk rows (0: until done), each its own transaction. It returns how
// many it ended and whether the pass is done; a pass that is done deletes the user's endings_due row unless
// a decision came since the pass began (then the next pass runs again). A user without a row has nothing to
// end. It holds no lock across chunks: a send or a claim of the same user waits for one chunk at most.
func (s *Store) FinishEndings(ctx context.Context, u UserRef, maxChunks int) (int, bool, error) {
	e, done, err := s.finishEndings(ctx, u, maxChunks)
	return e.Ended, done, err
}

// finishEndings is FinishEndings with the counts of an erasure. Of an erasure's pass, a chunk empties the
// notifications it read that the erasure covers (scrubChunkSQL), and the chats they had gone to lose what
// ties them to the tenant (eraseChats), each chat once a pass, in the chunk's transaction: a chunk that
// commits has left no chat it emptied behind.
func (s *Store) finishEndings(ctx context.Context, u UserRef, maxChunks int) (Endings, bool, error) {
	var e Endings
	var since time.Time
	var erasedAt *time.Time
	err := s.pool.QueryRow(ctx, `SELECT since, erased_at FROM endings_due WHERE tenant_id = $1 AND user_id = $2`,
		u.TenantID, u.UserID).Scan(&since, &erasedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, true, nil
	}
	if err != nil {
		return e, false, translate(err, "reading the endings due")
	}
	at, id := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}, "ffffffff-ffff-ffff-ffff-ffffffffffff"
	chatsDone := map[int64]bool{}
	for chunk := 0; maxChunks == 0 || chunk < maxChunks; chunk++ {
		if err := ctx.Err(); err != nil {
			return e, false, fmt.Errorf("while ending notifications: %w", err)
		}
		var read, cancelled, n int
		var lastAt *time.Time
		var lastID *string
		var c Endings
		var fresh []int64 // the chats this chunk erased
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			c, fresh = Endings{}, nil
			if err := tx.QueryRow(ctx, endingChunkSQL, u.TenantID, u.UserID, at, id, erasedAt).Scan(&read, &lastAt, &lastID, &cancelled, &n); err != nil {
				return err
			}
			c.Ended, c.Cancelled = cancelled+n, cancelled
			if erasedAt == nil || read == 0 {
				return nil
			}
			// The chunk's range of keys: down to its last row, or to the end when it is the last chunk.
			fromAt, fromID := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, "00000000-0000-0000-0000-000000000000"
			if read == EndingChunk {
				fromAt, fromID = pgtype.Timestamptz{Time: *lastAt, Valid: true}, *lastID
			}
			var chats []int64
			if err := tx.QueryRow(ctx, scrubChunkSQL, u.TenantID, u.UserID, at, id, fromAt, fromID, *erasedAt).Scan(&c.Erased, &chats); err != nil {
				return err
			}
			for _, chat := range chats {
				if !chatsDone[chat] {
					fresh = append(fresh, chat)
				}
			}
			if len(fresh) == 0 {
				return nil
			}
			ce, err := eraseChats(ctx, tx, u.TenantID, fresh)
			c.ChatErasure = ce
			return err
		})
		if err != nil {
			return e, false, translate(err, "ending notifications")
		}
		e.Ended, e.Cancelled, e.Erased = e.Ended+c.Ended, e.Cancelled+c.Cancelled, e.Erased+c.Erased
		e.ChatErasure = e.ChatErasure.add(c.ChatErasure)
		for _, chat := range fresh {
			chatsDone[chat] = true // only once the chunk committed: one rolled back erased nothing
		}
		if read < EndingChunk {
			_, err := s.pool.Exec(ctx, `DELETE FROM endings_due WHERE tenant_id = $1 AND user_id = $2 AND since = $3`, u.TenantID, u.UserID, since)
			return e, err == nil, translate(err, "recording the endings done")
		}
		at, id = pgtype.Timestamptz{Time: *lastAt, Valid: true}, *lastID
	}
	return e, false, nil
}

// DueEndings lists up to limit users whose endings_due row is older than age, oldest first: the passes a
// process started and did not finish (or never started), for the sweep.
func (s *Store) DueEndings(ctx context.Context, age time.Duration, limit int) ([]UserRef, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `SELECT tenant_id, user_id FROM endings_due WHERE since < now() - $1::interval ORDER BY since LIMIT $2`,
		age.String(), limit)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UserRef, error) {
		var u UserRef
		err := r.Scan(&u.TenantID, &u.UserID)
		return u, err
	})
	return out, translate(err, "listing the endings due")
}
