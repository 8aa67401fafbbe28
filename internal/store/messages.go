package store

// The deletion of a delivered message (spec v1-extensions §13, DELETE /v1/notifications/{id}/message):
// the tenant's request commits a due time on the row (message_delete_requested_at, migration 00022), and
// the delivery workers' sweep takes each due one under a short lease, calls deleteMessage and records the
// outcome. A request outlives the process that answered 202: whichever worker sweeps next deletes it.

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
)

// EventMessageDeleted is the callback event of a message deleted on the tenant's request.
const EventMessageDeleted = "notification.message_deleted"

// NotDeletable is a deletion refused (409 not_deletable); Reason is one of notification.NotDeletable*.
type NotDeletable struct{ Reason string }

func (e *NotDeletable) Error() string { return e.Reason }

// windowSQL is notification.MessageWindow in SQL.
var windowSQL = `make_interval(secs => ` + strconv.Itoa(int(notification.MessageWindow.Seconds())) + `)`

// RequestMessageDelete records the tenant's request to delete the message of its notification and
// returns the notification as it is now. ErrNotFound for an unknown id, another tenant's or a system
// message; a *NotDeletable when it was not delivered, its message was sent more than
// notification.MessageWindow ago, or it is deleted already (or its deletion is under way).
func (s *Store) RequestMessageDelete(ctx context.Context, tenantID, trackingID string) (notification.View, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `
		UPDATE notifications SET message_delete_requested_at = now()
		WHERE tracking_id = $1 AND tenant_id = $2 AND kind = `+notification.KindTenantSQL+`
		  AND status = `+notification.Delivered.SQL()+` AND messenger_message_id IS NOT NULL AND chat_id IS NOT NULL
		  AND COALESCE(message_sent_at, delivered_at) > now() - `+windowSQL+`
		  AND message_delete_requested_at IS NULL AND message_deleted_at IS NULL
		RETURNING `+viewColumns, trackingID, tenantID)
	v, err := pgx.CollectExactlyOneRow(rows, scanView)
	if !errors.Is(err, pgx.ErrNoRows) {
		return v, translate(err, "requesting the deletion of a message")
	}
	// Nothing changed: say why, from the row as it is now.
	var delivered, tooOld, deleted bool
	err = s.pool.QueryRow(ctx, `
		SELECT status = `+notification.Delivered.SQL()+` AND messenger_message_id IS NOT NULL AND chat_id IS NOT NULL,
		       COALESCE(message_sent_at, delivered_at, now()) <= now() - `+windowSQL+`,
		       message_delete_requested_at IS NOT NULL OR message_deleted_at IS NOT NULL
		FROM notifications WHERE tracking_id = $1 AND tenant_id = $2 AND kind = `+notification.KindTenantSQL,
		trackingID, tenantID).Scan(&delivered, &tooOld, &deleted)
	switch {
	case err != nil:
		return v, translate(err, "reading notification")
	case !delivered:
		return v, &NotDeletable{Reason: notification.NotDeletableUndelivered}
	case deleted:
		return v, &NotDeletable{Reason: notification.NotDeletableDeleted}
	case tooOld:
		return v, &NotDeletable{Reason: notification.NotDeletableTooOld}
	}
	// It became deletable between the two statements (it cannot: delivered is terminal); say so rather
	// than loop.
	return v, &NotDeletable{Reason: notification.NotDeletableDeleted}
}

// MessageDelete is a deletion taken on by a worker: the message and where it is.
type MessageDelete struct {
	TrackingID string
	TenantID   string
	Bot        notification.BotID
	ChatID     int64
	MessageID  string // the platform's message_id, as recorded
}

// TakeMessageDeletes takes up to limit due deletions for one attempt each: their due time moves lease
// ahead, so that another worker's sweep leaves them alone while this one calls the platform, and takes
// them again if this one dies. The oldest requests first.
func (s *Store) TakeMessageDeletes(ctx context.Context, limit int, lease time.Duration) ([]MessageDelete, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `
		WITH due AS MATERIALIZED (
			SELECT tracking_id FROM notifications
			WHERE message_delete_requested_at IS NOT NULL AND message_deleted_at IS NULL AND message_delete_requested_at <= now()
			ORDER BY message_delete_requested_at LIMIT $1 FOR UPDATE SKIP LOCKED)
		UPDATE notifications n SET message_delete_requested_at = now() + make_interval(secs => $2)
		FROM due WHERE n.tracking_id = due.tracking_id
		RETURNING n.tracking_id::text, n.tenant_id, COALESCE(n.bot_id, 0), COALESCE(n.chat_id, 0), COALESCE(n.messenger_message_id, '')`,
		limit, lease.Seconds())
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MessageDelete, error) {
		var m MessageDelete
		err := row.Scan(&m.TrackingID, &m.TenantID, &m.Bot, &m.ChatID, &m.MessageID)
		return m, err
	})
	return out, translate(err, "taking the deletions due")
}

// deletedSQL records that the message of notification $1 is gone: message_deleted_at on it and on every
// notification of its replace_key that names the same message (the edits of one status message are one
// message: deleting it deletes them all), and the event notification.message_deleted for the ones whose
// deletion was requested. Guarded by message_deleted_at IS NULL: a second worker's result adds nothing.
var deletedSQL = `
	WITH t AS (SELECT tracking_id, tenant_id, user_id, replace_key, chat_id, bot_id, messenger_message_id
	           FROM notifications WHERE tracking_id = $1),
	named AS (
		SELECT tracking_id FROM t
		UNION
		SELECT n.tracking_id FROM notifications n, t
		WHERE t.replace_key IS NOT NULL AND n.tenant_id = t.tenant_id AND n.user_id = t.user_id AND n.replace_key = t.replace_key
		  AND n.chat_id = t.chat_id AND n.bot_id IS NOT DISTINCT FROM t.bot_id AND n.messenger_message_id = t.messenger_message_id),
	changed AS (
		UPDATE notifications n SET message_deleted_at = now(), updated_at = now()
		FROM named WHERE n.tracking_id = named.tracking_id AND n.status = ` + notification.Delivered.SQL() + `
		  AND n.message_deleted_at IS NULL
		RETURNING n.tenant_id, n.tracking_id, n.updated_at, n.message_delete_requested_at IS NOT NULL AS requested),
	src AS (
		SELECT tenant_id, '` + EventMessageDeleted + `'::text AS type, tracking_id, NULL::text AS user_id, updated_at AS at,
		       NULL::jsonb AS data
		FROM changed WHERE requested),
	` + emitEvents("events", "src") + `
	SELECT count(*) FROM changed`

// MessageDeleted records that the platform deleted the message of a deletion taken on (or no longer had
// it: it counts as deleted), with its callback event; false when it was recorded already.
func (s *Store) MessageDeleted(ctx context.Context, trackingID string) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, deletedSQL, trackingID).Scan(&n)
	return n > 0, translate(err, "recording the deletion of a message")
}

// DeferMessageDelete makes a deletion due again after wait (the platform asked to wait: its 429).
func (s *Store) DeferMessageDelete(ctx context.Context, trackingID string, wait time.Duration) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		UPDATE notifications SET message_delete_requested_at = now() + make_interval(secs => $2)
		WHERE tracking_id = $1 AND message_delete_requested_at IS NOT NULL AND message_deleted_at IS NULL`,
		trackingID, wait.Seconds())
	return translate(err, "deferring the deletion of a message")
}

// DropMessageDelete gives a deletion up: the platform refused it for good (the message can no longer be
// deleted: past its 48 hours, or the user blocked the bot). The message stays; message_deleted_at stays
// NULL, and the tenant may ask again (and is refused, with the reason, once the 48 hours are over).
func (s *Store) DropMessageDelete(ctx context.Context, trackingID string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		UPDATE notifications SET message_delete_requested_at = NULL
		WHERE tracking_id = $1 AND message_deleted_at IS NULL`, trackingID)
	return translate(err, "giving up the deletion of a message")
}
