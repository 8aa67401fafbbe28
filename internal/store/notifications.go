package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notification kinds.
const (
	KindTenant = "tenant"
	KindSystem = "system"
)

// NewNotification is a notification to insert.
type NewNotification struct {
	TrackingID  string
	Kind        string
	TenantID    string // empty for a system message of no tenant
	UserID      string // tenant notifications
	ChatID      int64  // system messages
	Priority    int
	Body        string          // branded snapshot
	ReplyMarkup json.RawMessage // system messages: keyboards
}

// Every row is committed before its envelope is published (internal/outbox), so a worker that receives an
// envelope finds its row, and an envelope without a row is an orphan to drop. Rows are inserted with
// published_at set ("a publish is under way"); a publish that fails either takes the row back
// (DiscardNotifications: the tenant is told nothing was stored) or clears published_at for the relay
// (MarkUnpublished). A producer that dies between the commit and the publish leaves a row with
// published_at set that nobody consumes: the redrive (RepublishStuck) finds it.

// insertTenantSQL inserts tenant notifications in state queued, each only when its user has a link and a
// verified phone (the send gate and the insert are one statement), and returns the ones it inserted.
const insertTenantSQL = `
	INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, published_at)
	SELECT r.tracking_id, 'tenant', r.tenant_id, r.user_id, r.priority, r.body, 'queued', now()
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[], $5::text[]) AS r(tracking_id, tenant_id, user_id, priority, body)
	WHERE EXISTS (
		SELECT 1 FROM phone_verifications v JOIN links l USING (tenant_id, user_id)
		WHERE v.tenant_id = r.tenant_id AND v.user_id = r.user_id AND v.status = 'verified')
	RETURNING tracking_id::text`

// InsertTenantNotifications inserts tenant notifications in one statement of its own (committed when it
// returns), each gated on its user's verified phone, and returns the tracking ids it inserted; the others'
// users may not receive notifications.
func (s *Store) InsertTenantNotifications(ctx context.Context, ns []NewNotification) (map[string]bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return insertTenant(ctx, s.pool, ns)
}

// InsertTenantNotifications is the transaction's variant of Store.InsertTenantNotifications.
func (tx *Tx) InsertTenantNotifications(ctx context.Context, ns []NewNotification) (map[string]bool, error) {
	return insertTenant(ctx, tx.tx, ns)
}

func insertTenant(ctx context.Context, q querier, ns []NewNotification) (map[string]bool, error) {
	ids := make([]string, len(ns))
	tenants := make([]string, len(ns))
	users := make([]string, len(ns))
	prios := make([]int16, len(ns))
	bodies := make([]string, len(ns))
	for i, n := range ns {
		ids[i], tenants[i], users[i], prios[i], bodies[i] = n.TrackingID, n.TenantID, n.UserID, int16(n.Priority), n.Body
	}
	rows, err := q.Query(ctx, insertTenantSQL, ids, tenants, users, prios, bodies)
	if err != nil {
		return nil, translate(err, "inserting notifications")
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(err, "inserting notifications")
	}
	accepted := make(map[string]bool, len(got))
	for _, id := range got {
		accepted[id] = true
	}
	return accepted, nil
}

// insertSystemSQL inserts a system message in state queued; systemArgs are its arguments.
const insertSystemSQL = `
	INSERT INTO notifications (tracking_id, kind, tenant_id, chat_id, priority, body, reply_markup, status, published_at)
	VALUES ($1, 'system', NULLIF($2, ''), $3, $4, $5, $6::jsonb, 'queued', now())`

func systemArgs(n NewNotification) []any {
	var markup any
	if len(n.ReplyMarkup) > 0 {
		markup = string(n.ReplyMarkup)
	}
	return []any{n.TrackingID, n.TenantID, n.ChatID, n.Priority, n.Body, markup}
}

func insertSystem(ctx context.Context, q querier, n NewNotification) error {
	if _, err := q.Exec(ctx, insertSystemSQL, systemArgs(n)...); err != nil {
		return fmt.Errorf("inserting system message: %w", err)
	}
	return nil
}

// InsertSystemMessage inserts one system message (addressed to n.ChatID) in state queued, on its own.
func (s *Store) InsertSystemMessage(ctx context.Context, n NewNotification) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return translate(insertSystem(ctx, s.pool, n), "inserting a system message")
}

// DiscardNotifications deletes queued notifications whose publish failed, so that the 502 the tenant
// receives is true, together with the Idempotency-Keys of their requests, so that a retry with the same key
// starts afresh.
func (s *Store) DiscardNotifications(ctx context.Context, trackingIDs []string, keys []IdempotencyKey) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := deleteIdempotencyKeys(ctx, tx, keys); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM notifications WHERE tracking_id = ANY($1::uuid[]) AND status = 'queued'`, trackingIDs)
		return err
	})
	return translate(err, "discarding unpublished notifications")
}

// MarkUnpublished hands notifications whose publish failed to the relay (RepublishUnpublished).
func (s *Store) MarkUnpublished(ctx context.Context, trackingIDs []string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `UPDATE notifications SET published_at = NULL WHERE tracking_id = ANY($1::uuid[]) AND status = 'queued'`, trackingIDs)
	return translate(err, "marking notifications unpublished")
}

// NotificationView is the tenant-visible metadata of a notification (never the body).
type NotificationView struct {
	TrackingID         string
	UserID             string
	Priority           int
	Status             Status
	Attempts           int
	CreatedAt          time.Time
	UpdatedAt          time.Time
	MessengerMessageID *string
	LastErrorCode      int
	LastErrorMessage   *string
}

const viewColumns = `tracking_id::text, user_id, priority, status, attempts, created_at, updated_at,
	messenger_message_id, last_error_code, last_error_message`

func (v *NotificationView) scanArgs() []any {
	return []any{&v.TrackingID, &v.UserID, &v.Priority, &v.Status, &v.Attempts, &v.CreatedAt, &v.UpdatedAt,
		&v.MessengerMessageID, &v.LastErrorCode, &v.LastErrorMessage}
}

// GetNotification reads a tenant notification of this tenant; ErrNotFound for another tenant's, a system
// message, or an unknown id.
func (s *Store) GetNotification(ctx context.Context, tenantID, trackingID string) (NotificationView, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var v NotificationView
	err := s.pool.QueryRow(ctx, `SELECT `+viewColumns+`
		FROM notifications WHERE tracking_id = $1 AND tenant_id = $2 AND kind = 'tenant'`, trackingID, tenantID).
		Scan(v.scanArgs()...)
	return v, translate(err, "reading notification")
}

// TenantNotification is a tenant notification's metadata with its tenant (never the body).
type TenantNotification struct {
	TenantID string
	NotificationView
}

// FindTenantNotification reads the metadata of a tenant notification that belongs to one of tenantIDs
// (a developer's tenants); ErrNotFound otherwise (unknown id, a system message, or another tenant's).
func (s *Store) FindTenantNotification(ctx context.Context, tenantIDs []string, trackingID string) (TenantNotification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var v TenantNotification
	err := s.pool.QueryRow(ctx, `SELECT tenant_id, `+viewColumns+`
		FROM notifications WHERE tracking_id = $1 AND kind = 'tenant' AND tenant_id = ANY ($2)`, trackingID, tenantIDs).
		Scan(append([]any{&v.TenantID}, v.scanArgs()...)...)
	return v, translate(err, "reading notification")
}

// StatusCount is the number of a tenant's notifications in one status.
type StatusCount struct {
	TenantID string
	Status   Status
	Count    int64
}

// NotificationStats counts the tenant notifications of the given tenants created within the last window,
// by tenant and status, ordered by tenant and status.
func (s *Store) NotificationStats(ctx context.Context, tenantIDs []string, window time.Duration) ([]StatusCount, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT tenant_id, status, count(*) FROM notifications
		WHERE kind = 'tenant' AND tenant_id = ANY ($1) AND created_at > now() - $2::interval
		GROUP BY tenant_id, status ORDER BY tenant_id, status`, tenantIDs, window.String())
	if err != nil {
		return nil, translate(err, "counting notifications")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatusCount, error) {
		var c StatusCount
		err := r.Scan(&c.TenantID, &c.Status, &c.Count)
		return c, err
	})
	return out, translate(err, "counting notifications")
}

// NotificationCreatedAt reads when a notification was inserted and whether its publish must have ended
// by now (it was inserted more than PublishWindow ago); ErrNotFound when it does not exist (any more).
func (s *Store) NotificationCreatedAt(ctx context.Context, trackingID string) (settled bool, err error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err = s.pool.QueryRow(ctx, `SELECT created_at < now() - $2::interval FROM notifications WHERE tracking_id = $1`,
		trackingID, PublishWindow.String()).Scan(&settled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("while reading notification %s: %w", trackingID, ErrNotFound)
	}
	return settled, translate(err, "reading notification "+trackingID)
}

// PublishWindow bounds how long a producer may take to publish a notification it has just committed: one
// that gets no acknowledgement within it has given up (its rows are discarded or left to the relay).
// Producers use shorter timeouts (2 s); the window is what a concurrent duplicate of an idempotent send
// waits for before it trusts the first request's outcome.
const PublishWindow = 5 * time.Second

// TenantNotifications reads the metadata of tenant notifications by tracking id, each with its tenant (the
// payloads of callbacks); ids that name nothing (any more) are absent from the result.
func (s *Store) TenantNotifications(ctx context.Context, trackingIDs []string) (map[string]TenantNotification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT tenant_id, `+viewColumns+`
		FROM notifications WHERE tracking_id = ANY ($1::uuid[]) AND kind = 'tenant'`, trackingIDs)
	if err != nil {
		return nil, translate(err, "reading notifications")
	}
	out := map[string]TenantNotification{}
	var v TenantNotification
	_, err = pgx.ForEachRow(rows, append([]any{&v.TenantID}, v.scanArgs()...), func() error {
		out[v.TrackingID] = v
		return nil
	})
	return out, translate(err, "reading notifications")
}
