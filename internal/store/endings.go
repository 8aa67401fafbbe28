package store

// The endings that follow a decision (issue 35): an opt-out (opt_outs.go) or a relink (link_tokens.go)
// commits in a short transaction the decision and a row of endings_due for its user, and the user's
// notifications it covers are ended afterwards, EndingChunk rows per statement, each statement its own
// transaction with the notification.* events of the rows it ended — so that neither the update's
// transaction nor the user's gate lock (a bucket shared by every tenant) lasts as long as the tenant's
// backlog. Meanwhile nothing covered is sent: the claim reads the opt-outs and the link (claimOnce) and ends
// such a notification without a call. Whoever made the decision starts the pass (the webhook's receiver in
// the background, the API inline for a first chunk); the delivery workers' sweep (DueEndings) finishes
// what a pass left, e.g. when its process died.

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

// endingChunkSQL reads the next chunk of user $2 of tenant $1, newest first, below the keyset ($3, $4)
// (a range of notifications_user_list_idx, EndingChunk rows whatever their state), and ends those of them
// that wait and that an opt-out covers (blocked, "opted out": notification.OptOut) or whose chat is not the
// user's link's any more (unlinked, "relinked": notification.Relink), each with its notification.* event.
// The two sets are disjoint (a row one ends the other does not read), so one statement ends both. It
// returns how many rows it read, the last one's key, and how many it ended.
var endingChunkSQL = `
	WITH picked AS (
		SELECT tracking_id, created_at FROM notifications
		WHERE tenant_id = $1 AND user_id = $2 AND kind = ` + notification.KindTenantSQL + `
		  AND (created_at, tracking_id) < ($3::timestamptz, $4::uuid)
		ORDER BY created_at DESC, tracking_id DESC LIMIT ` + fmt.Sprint(EndingChunk) + `),
	link AS (SELECT chat_id, bot_id FROM links WHERE tenant_id = $1 AND user_id = $2),
	opted AS (` + optOutUpdate(`tracking_id IN (SELECT tracking_id FROM picked)
		AND EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = $1 AND o.user_id = $2 AND `+optOutCovers(`notifications.category`)+`)`) + `
		RETURNING ` + notificationEventColumns + `),
	relinked AS (` + relinkUpdate(`tracking_id IN (SELECT tracking_id FROM picked) AND EXISTS (SELECT 1 FROM link)
		AND NOT EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = $1 AND o.user_id = $2 AND `+optOutCovers(`notifications.category`)+`)`,
	`(SELECT bot_id FROM link)`, `(SELECT chat_id FROM link)`) + `
		RETURNING ` + notificationEventColumns + `),
	ended AS (SELECT * FROM opted UNION ALL SELECT * FROM relinked),
	` + notificationEvents("ended") + `,
	last AS (SELECT created_at, tracking_id FROM picked ORDER BY created_at, tracking_id LIMIT 1)
	SELECT (SELECT count(*) FROM picked), (SELECT created_at FROM last), (SELECT tracking_id::text FROM last),
	       (SELECT count(*) FROM opted) + (SELECT count(*) FROM relinked)`

// FinishEndings ends the notifications of the user that the user's opt-outs and link say must end, at
// most maxChunks statements of EndingChunk rows (0: until done), each its own transaction. It returns how
// many it ended and whether the pass is done; a pass that is done deletes the user's endings_due row unless
// a decision came since the pass began (then the next pass runs again). A user without a row has nothing to
// end. It holds no lock across chunks: a send or a claim of the same user waits for one chunk at most.
func (s *Store) FinishEndings(ctx context.Context, u UserRef, maxChunks int) (int, bool, error) {
	var since time.Time
	err := s.pool.QueryRow(ctx, `SELECT since FROM endings_due WHERE tenant_id = $1 AND user_id = $2`, u.TenantID, u.UserID).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, translate(err, "reading the endings due")
	}
	at, id := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}, "ffffffff-ffff-ffff-ffff-ffffffffffff"
	ended := 0
	for chunk := 0; maxChunks == 0 || chunk < maxChunks; chunk++ {
		if err := ctx.Err(); err != nil {
			return ended, false, fmt.Errorf("while ending notifications: %w", err)
		}
		var read, n int
		var lastAt *time.Time
		var lastID *string
		if err := s.pool.QueryRow(ctx, endingChunkSQL, u.TenantID, u.UserID, at, id).Scan(&read, &lastAt, &lastID, &n); err != nil {
			return ended, false, translate(err, "ending notifications")
		}
		ended += n
		if read < EndingChunk {
			_, err := s.pool.Exec(ctx, `DELETE FROM endings_due WHERE tenant_id = $1 AND user_id = $2 AND since = $3`, u.TenantID, u.UserID, since)
			return ended, err == nil, translate(err, "recording the endings done")
		}
		at, id = pgtype.Timestamptz{Time: *lastAt, Valid: true}, *lastID
	}
	return ended, false, nil
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
