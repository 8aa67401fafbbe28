package store

import (
	"context"
	"crypto/subtle"
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

// ErrIdempotencyConflict: the Idempotency-Key was used with a different request.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

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

// Idempotency identifies a POST /v1/send by its Idempotency-Key.
type Idempotency struct {
	Key         string
	RequestHash [32]byte
}

// IdempotencyWindow is how long an Idempotency-Key is remembered.
const IdempotencyWindow = 24 * time.Hour

// Publisher produces the Kafka envelope of a notification inside its insert transaction: the row commits
// only after the broker acknowledged, so a failed produce leaves nothing behind.
type Publisher func(ctx context.Context) error

// EnqueueTenant inserts a tenant notification in state queued when the user has a link and a verified
// phone, publishes it, and commits. With idem set, a repeat of the same key and request returns the first
// tracking id (replayed=true) and publishes nothing; a repeat with another request is
// ErrIdempotencyConflict. ErrUnverified when the user may not receive notifications.
func (s *Store) EnqueueTenant(ctx context.Context, n NewNotification, idem *Idempotency, publish Publisher) (trackingID string, replayed bool, err error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if idem != nil {
			// Claim the key, or take over one older than the window. A concurrent claim of the same key waits
			// here for the other transaction, so two duplicates never both enqueue.
			var claimed string
			err := tx.QueryRow(ctx, `
				INSERT INTO idempotency_keys (tenant_id, key, request_hash, tracking_id) VALUES ($1, $2, $3, $4)
				ON CONFLICT (tenant_id, key) DO UPDATE
				  SET request_hash = EXCLUDED.request_hash, tracking_id = EXCLUDED.tracking_id, created_at = now()
				  WHERE idempotency_keys.created_at < now() - $5::interval
				RETURNING tracking_id::text`, n.TenantID, idem.Key, idem.RequestHash[:], n.TrackingID, IdempotencyWindow.String()).Scan(&claimed)
			if errors.Is(err, pgx.ErrNoRows) {
				var hash []byte
				if err := tx.QueryRow(ctx, `SELECT request_hash, tracking_id::text FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`,
					n.TenantID, idem.Key).Scan(&hash, &trackingID); err != nil {
					return fmt.Errorf("reading idempotency key: %w", err)
				}
				if subtle.ConstantTimeCompare(hash, idem.RequestHash[:]) != 1 {
					return ErrIdempotencyConflict
				}
				replayed = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("claiming idempotency key: %w", err)
			}
		}
		// The gate and the insert are one statement: a user is sendable when linked with a verified phone.
		tag, err := tx.Exec(ctx, `
			INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status)
			SELECT $1, 'tenant', $2, $3, $4, $5, 'queued'
			WHERE EXISTS (
				SELECT 1 FROM phone_verifications v JOIN links l USING (tenant_id, user_id)
				WHERE v.tenant_id = $2 AND v.user_id = $3 AND v.status = 'verified')`,
			n.TrackingID, n.TenantID, n.UserID, n.Priority, n.Body)
		if err != nil {
			return fmt.Errorf("inserting notification: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return ErrUnverified
		}
		trackingID = n.TrackingID
		return publish(ctx)
	})
	if errors.Is(err, ErrUnverified) || errors.Is(err, ErrIdempotencyConflict) {
		return "", false, err
	}
	if err != nil {
		return "", false, translate(err, "enqueueing notification")
	}
	return trackingID, replayed, nil
}

// EnqueueSystem inserts a system message (addressed to n.ChatID) in state queued, publishes it, commits.
func (s *Store) EnqueueSystem(ctx context.Context, n NewNotification, publish Publisher) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := insertSystem(ctx, tx, n); err != nil {
			return err
		}
		return publish(ctx)
	})
	return translate(err, "enqueueing system message")
}

// insertSystemSQL inserts a system message in state queued; systemArgs are its arguments.
const insertSystemSQL = `
	INSERT INTO notifications (tracking_id, kind, tenant_id, chat_id, priority, body, reply_markup, status)
	VALUES ($1, 'system', NULLIF($2, ''), $3, $4, $5, $6::jsonb, 'queued')`

func systemArgs(n NewNotification) []any {
	var markup any
	if len(n.ReplyMarkup) > 0 {
		markup = string(n.ReplyMarkup)
	}
	return []any{n.TrackingID, n.TenantID, n.ChatID, n.Priority, n.Body, markup}
}

func insertSystem(ctx context.Context, tx pgx.Tx, n NewNotification) error {
	if _, err := tx.Exec(ctx, insertSystemSQL, systemArgs(n)...); err != nil {
		return fmt.Errorf("inserting system message: %w", err)
	}
	return nil
}

// NotificationView is the tenant-visible metadata of a notification (never the body).
type NotificationView struct {
	TrackingID         string
	UserID             string
	Priority           int
	Status             string
	Attempts           int
	CreatedAt          time.Time
	UpdatedAt          time.Time
	MessengerMessageID *string
	LastErrorCode      int
	LastErrorMessage   *string
}

// GetNotification reads a tenant notification of this tenant; ErrNotFound for another tenant's, a system
// message, or an unknown id.
func (s *Store) GetNotification(ctx context.Context, tenantID, trackingID string) (NotificationView, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var v NotificationView
	err := s.pool.QueryRow(ctx, `
		SELECT tracking_id::text, user_id, priority, status, attempts, created_at, updated_at,
		       messenger_message_id, last_error_code, last_error_message
		FROM notifications WHERE tracking_id = $1 AND tenant_id = $2 AND kind = 'tenant'`, trackingID, tenantID).
		Scan(&v.TrackingID, &v.UserID, &v.Priority, &v.Status, &v.Attempts, &v.CreatedAt, &v.UpdatedAt,
			&v.MessengerMessageID, &v.LastErrorCode, &v.LastErrorMessage)
	return v, translate(err, "reading notification")
}

// EnqueueTenantBatch inserts many tenant notifications in one statement, each gated like EnqueueTenant,
// hands the accepted ones to publish, and commits only when publish succeeds. It returns the tracking ids
// that passed the gate; the others are unverified. Batching is what lets one ingress replica accept
// thousands of sends per second: one transaction and one produce request serve a whole batch.
func (s *Store) EnqueueTenantBatch(ctx context.Context, ns []NewNotification, publish func(ctx context.Context, accepted []NewNotification) error) (map[string]bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	ids := make([]string, len(ns))
	tenants := make([]string, len(ns))
	users := make([]string, len(ns))
	prios := make([]int16, len(ns))
	bodies := make([]string, len(ns))
	for i, n := range ns {
		ids[i], tenants[i], users[i], prios[i], bodies[i] = n.TrackingID, n.TenantID, n.UserID, int16(n.Priority), n.Body
	}
	accepted := make(map[string]bool, len(ns))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status)
			SELECT r.tracking_id, 'tenant', r.tenant_id, r.user_id, r.priority, r.body, 'queued'
			FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[], $5::text[]) AS r(tracking_id, tenant_id, user_id, priority, body)
			WHERE EXISTS (
				SELECT 1 FROM phone_verifications v JOIN links l USING (tenant_id, user_id)
				WHERE v.tenant_id = r.tenant_id AND v.user_id = r.user_id AND v.status = 'verified')
			RETURNING tracking_id::text`, ids, tenants, users, prios, bodies)
		if err != nil {
			return fmt.Errorf("inserting notifications: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			accepted[id] = true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("inserting notifications: %w", err)
		}
		if len(accepted) == 0 {
			return nil
		}
		out := make([]NewNotification, 0, len(accepted))
		for _, n := range ns {
			if accepted[n.TrackingID] {
				out = append(out, n)
			}
		}
		return publish(ctx, out)
	})
	if err != nil {
		return nil, translate(err, "enqueueing notifications")
	}
	return accepted, nil
}
