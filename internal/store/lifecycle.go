package store

// The lifecycle transitions of tenant notifications that are not a delivery attempt's: the scheduler's
// release (scheduled → queued), the cancel (scheduled, queued, retrying → cancelled), the expiry
// (scheduled, queued, retrying, or delivering whose worker died → expired), the relink's (scheduled,
// queued, retrying → unlinked, when the user links another messenger account) and the change of bot's
// (the same, when the tenant changes its bot). Each transition is one SQL update, written once
// (releaseSQL, cancelUpdate, expireUpdate, relinkUpdate below; changeBotUpdate in bots.go), guarded by the states
// it may leave and the conditions it needs, both rendered by internal/notification from its table of
// transitions, and returning the rows it moved: a caller that must record more in the same transaction (an
// event per change) has them at hand.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
)

// moveTo is the SET clause of a transition to state to that ends any lease.
func moveTo(to notification.Status) string {
	return `UPDATE notifications SET status = ` + to.SQL() + `, lease_expires_at = NULL, updated_at = now()`
}

// cancelUpdate is the cancel transition for the rows cond selects: only those in a cancellable state move.
func cancelUpdate(cond string) string {
	return moveTo(notification.Cancel.To()) + `
		WHERE ` + cond + ` AND ` + notification.Cancel.SQL()
}

// expireUpdate is the expiry transition for the rows cond selects: only those whose expires_at has passed
// and on which no attempt is running move.
func expireUpdate(cond string) string {
	return moveTo(notification.Expire.To()) + `
		WHERE ` + cond + ` AND ` + expirableSQL
}

// expirableSQL is notification.Expire's condition. It names the states it leaves with IN, as the partial
// index notifications_expiry_idx does, so that the sweep can use that index.
var expirableSQL = notification.Expire.SQL()

// relinkUpdate is the relink's transition for the rows cond selects: those in a state no attempt is running
// in whose chat is not newChat of newBot (SQL expressions; a NULL bot is the shared bot) end unlinked, with
// notification.CodeRelinked. A notification being delivered is its attempt's: it goes to the chat recorded
// at acceptance, and a retry is refused by the claim.
func relinkUpdate(cond, newBot, newChat string) string {
	return moveTo(notification.Relink.To()) + `,
		last_error_code = ` + strconv.Itoa(notification.CodeRelinked) + `, last_error_message = '` + notification.RelinkedMessage + `'
		WHERE ` + cond + ` AND ` + notification.Relink.SQL() + `
		  AND (chat_id IS DISTINCT FROM ` + newChat + ` OR bot_id IS DISTINCT FROM ` + newBot + `)`
}

// cancelOneSQL cancels one tenant notification ($1, of tenant $2) with its notification.cancelled event, and
// returns it as its view.
var cancelOneSQL = `WITH c AS (` + cancelUpdate(`tracking_id = $1 AND tenant_id = $2 AND kind = `+notification.KindTenantSQL) + ` RETURNING *),
	` + notificationEvents("c") + `
	SELECT ` + viewColumns + ` FROM c`

// expireOneSQL expires notification $1 if it must, with its notification.expired event; it returns the
// number of notifications it moved.
var expireOneSQL = `WITH changed AS (` + expireUpdate(`tracking_id = $1`) + ` RETURNING ` + notificationEventColumns + `),
	` + notificationEvents("changed") + `
	SELECT count(*) FROM changed`

// NotCancellable describes a notification a cancel refused: it is delivering or already terminal.
type NotCancellable struct {
	Status notification.Status
}

func (e *NotCancellable) Error() string {
	return fmt.Sprintf("the notification is %s: only scheduled, queued or retrying notifications can be cancelled", e.Status)
}

// CancelNotification cancels a tenant notification of this tenant that is scheduled, queued or retrying,
// and returns it as it is now. ErrNotFound for an unknown id, another tenant's or a system message; a
// *NotCancellable when it is delivering or terminal. Cancelled is terminal, so a worker that receives the
// notification's envelope afterwards (published before the cancel, or a due retry) does not claim it; a
// worker that claimed it first holds it delivering, and the cancel is refused.
func (s *Store) CancelNotification(ctx context.Context, tenantID, trackingID string) (notification.View, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	for try := 0; ; try++ {
		rows, _ := s.pool.Query(ctx, cancelOneSQL, trackingID, tenantID)
		v, err := pgx.CollectExactlyOneRow(rows, scanView)
		if !errors.Is(err, pgx.ErrNoRows) {
			return v, translate(err, "cancelling notification")
		}
		// Nothing moved: say why, from the row as it is now (ErrNotFound when there is none). The update and
		// this read see different snapshots: a row that became cancellable in between (a delivering attempt
		// that ended retrying) is cancelled after all.
		v, err = getView(ctx, s.pool, tenantID, trackingID)
		if err != nil {
			return v, err
		}
		if !v.Status.Cancellable() || try == 2 {
			return v, &NotCancellable{Status: v.Status}
		}
	}
}

// schedulerLock is the transaction-scoped advisory lock that makes one worker at a time the scheduler
// (an arbitrary constant of Herald's: "herald.sched").
const schedulerLock int64 = 0x6865_7261_6c64_7363

// releaseSQL is the scheduler's transition: up to $1 scheduled notifications whose send_at has come (and
// whose expires_at has not: those are the expiry sweep's) become queued, published_at set ("a publish is
// under way", as a send's insert does). Each keeps the chat recorded when it was accepted (its envelope's
// key): a user who linked another account meanwhile had it ended by the relink. It reads the partial index
// notifications_scheduled_idx only. The selection is a materialized CTE, so that it runs once (see
// expireDueSQL).
var releaseSQL = `
	WITH due AS MATERIALIZED (
		SELECT tracking_id FROM notifications
		WHERE ` + notification.Release.SQL() + `
		ORDER BY send_at LIMIT $1 FOR UPDATE SKIP LOCKED)
	UPDATE notifications n
	SET status = ` + notification.Release.To().SQL() + `, published_at = now(), updated_at = now()
	FROM due
	WHERE n.tracking_id = due.tracking_id AND ` + notification.StatusIn(notification.Release.From()...) + `
	RETURNING n.tracking_id::text, n.kind, n.tenant_id, n.user_id, COALESCE(n.chat_id, 0), COALESCE(n.bot_id, 0), n.priority, n.status`

// ReleaseScheduled moves up to limit due scheduled notifications to queued and commits, and returns them
// for the caller to publish (internal/outbox: a publish that fails goes to the relay). The commit comes
// first, as for every publish: a worker that receives the envelope finds the row queued, never still
// scheduled (which it could not claim). One caller at a time releases (a transaction-scoped advisory
// lock): the others get nothing and locked false, and try again on their next tick. Rows that a
// concurrent cancel holds are skipped, not waited for.
func (s *Store) ReleaseScheduled(ctx context.Context, limit int) (released []Pending, locked bool, err error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, schedulerLock).Scan(&locked); err != nil || !locked {
			return err
		}
		rows, _ := tx.Query(ctx, releaseSQL, limit)
		released, err = pgx.CollectRows(rows, scanPending)
		return err
	})
	if err != nil {
		return nil, locked, translate(err, "releasing scheduled notifications")
	}
	return released, locked, nil
}

// expireDueSQL expires up to $1 notifications; its selection reads the partial index
// notifications_expiry_idx only. The selection is a materialized CTE, so that it runs once: a LIMIT …
// SKIP LOCKED subquery that the plan rescans may return more rows than the limit.
var expireDueSQL = `WITH due AS MATERIALIZED (
	SELECT tracking_id FROM notifications WHERE ` + expirableSQL + `
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED),
	changed AS (` + expireUpdate(`tracking_id IN (SELECT tracking_id FROM due)`) + ` RETURNING ` + notificationEventColumns + `),
	` + notificationEvents("changed") + `
	SELECT tracking_id::text FROM changed`

// ExpireDue is the expiry sweep: it moves up to limit notifications whose expires_at has passed and on
// which no attempt is running to expired, and returns their tracking ids. Workers run it concurrently:
// rows another sweep (or a claim, a cancel) holds are skipped.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, expireDueSQL, limit)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, translate(err, "expiring notifications")
}

// expireOne expires one notification if it must (the claim's refusal after expires_at), and reports
// whether it did.
func (s *Store) expireOne(ctx context.Context, trackingID string) (bool, error) {
	var n int
	err := s.pool.QueryRow(ctx, expireOneSQL, trackingID).Scan(&n)
	return err == nil && n == 1, err
}
