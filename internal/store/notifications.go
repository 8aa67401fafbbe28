package store

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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

// Publisher produces the Kafka envelope of a notification whose row is already committed.
type Publisher func(ctx context.Context) error

// PublishWindow bounds how long a producer may take to publish a notification it has just committed: a
// producer that gets no acknowledgement within it takes the notification back (tenant sends) or leaves it
// to the relay (system messages). Producers use shorter timeouts (2 s); the window is what a concurrent
// duplicate of an idempotent send waits for before it trusts the first request's outcome.
const PublishWindow = 5 * time.Second

// Every producer commits a notification's row before it publishes the envelope (an outbox): a worker that
// receives an envelope finds its row, so an envelope without a row is an orphan to drop at once — the
// publish of a request that was answered 502 but that the Kafka client delivered anyway after the broker
// came back. Rows are inserted with published_at set ("a publish is under way"); a publish that fails
// either takes the row back (DiscardNotifications: the tenant was told nothing was stored) or clears
// published_at so that the relay publishes it when the broker is back (MarkUnpublished). A producer that
// dies between the commit and the publish leaves a row with published_at set that nobody consumes; the
// redrive finds it after the queued-redrive threshold.

// EnqueueTenant inserts a tenant notification in state queued when the user has a link and a verified
// phone, commits, and publishes it; a failed publish takes the row (and the Idempotency-Key) back. With idem
// set, a repeat of the same key and request returns the first tracking id (replayed=true) and publishes
// nothing; a repeat with another request is ErrIdempotencyConflict. ErrUnverified when the user may not
// receive notifications. publishErr is set (and err nil) when the publish failed.
func (s *Store) EnqueueTenant(ctx context.Context, n NewNotification, idem *Idempotency, publish Publisher) (trackingID string, replayed bool, publishErr, err error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultQueryTimeout+PublishWindow)
	defer cancel()
	for {
		trackingID, replayed, err = s.insertTenant(ctx, n, idem)
		if err != nil || !replayed {
			break
		}
		// A replay: the first request may still be publishing, and take its notification back if that
		// fails. Answer only once its outcome is certain.
		settled, err := s.settledAfterPublish(ctx, trackingID)
		if err != nil {
			return "", false, nil, err
		}
		if settled {
			return trackingID, true, nil, nil
		}
		// The first request took its notification back: this one is the first now.
	}
	if err != nil {
		return "", false, nil, err
	}
	if perr := publish(ctx); perr != nil {
		if derr := s.DiscardNotifications(context.WithoutCancel(ctx), []string{n.TrackingID}, n.TenantID, idem); derr != nil {
			perr = errors.Join(perr, derr)
		}
		return "", false, perr, nil
	}
	return trackingID, false, nil, nil
}

// insertTenant is the transaction of EnqueueTenant: claim the Idempotency-Key, gate and insert.
func (s *Store) insertTenant(ctx context.Context, n NewNotification, idem *Idempotency) (trackingID string, replayed bool, err error) {
	qctx, cancel := withTimeout(ctx)
	defer cancel()
	err = pgx.BeginFunc(qctx, s.pool, func(tx pgx.Tx) error {
		if idem != nil {
			// Claim the key, or take over one older than the window. A concurrent claim of the same key waits
			// here for the other transaction, so two duplicates never both enqueue.
			var claimed string
			err := tx.QueryRow(qctx, `
				INSERT INTO idempotency_keys (tenant_id, key, request_hash, tracking_id) VALUES ($1, $2, $3, $4)
				ON CONFLICT (tenant_id, key) DO UPDATE
				  SET request_hash = EXCLUDED.request_hash, tracking_id = EXCLUDED.tracking_id, created_at = now()
				  WHERE idempotency_keys.created_at < now() - $5::interval
				RETURNING tracking_id::text`, n.TenantID, idem.Key, idem.RequestHash[:], n.TrackingID, IdempotencyWindow.String()).Scan(&claimed)
			if errors.Is(err, pgx.ErrNoRows) {
				var hash []byte
				if err := tx.QueryRow(qctx, `SELECT request_hash, tracking_id::text FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`,
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
		tag, err := tx.Exec(qctx, `
			INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, published_at)
			SELECT $1, 'tenant', $2, $3, $4, $5, 'queued', now()
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
		return nil
	})
	if errors.Is(err, ErrUnverified) || errors.Is(err, ErrIdempotencyConflict) {
		return "", false, err
	}
	return trackingID, replayed, translate(err, "enqueueing notification")
}

// settledAfterPublish waits until the publish of a notification inserted by another request must have
// ended (PublishWindow after its row was created) and reports whether the notification still exists:
// false when that request took it back after a failed publish.
func (s *Store) settledAfterPublish(ctx context.Context, trackingID string) (bool, error) {
	for {
		var settled bool
		qctx, cancel := withTimeout(ctx)
		err := s.pool.QueryRow(qctx, `SELECT created_at < now() - $2::interval FROM notifications WHERE tracking_id = $1`,
			trackingID, PublishWindow.String()).Scan(&settled)
		cancel()
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, translate(err, "reading a replayed notification")
		}
		if settled {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// DiscardNotifications deletes notifications whose publish failed, so that the 502 the tenant receives is
// true. With idem, the tenant's Idempotency-Key that names the (one) notification goes too, so that a
// retry with the same key starts afresh.
func (s *Store) DiscardNotifications(ctx context.Context, trackingIDs []string, tenantID string, idem *Idempotency) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if idem != nil {
			if _, err := tx.Exec(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = $1 AND key = $2 AND tracking_id = ANY($3::uuid[])`,
				tenantID, idem.Key, trackingIDs); err != nil {
				return err
			}
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

// EnqueueSystem inserts a system message (addressed to n.ChatID) in state queued, commits, and publishes
// it; a failed publish leaves it to the relay.
func (s *Store) EnqueueSystem(ctx context.Context, n NewNotification, publish Publisher) error {
	qctx, cancel := withTimeout(ctx)
	defer cancel()
	if _, err := s.pool.Exec(qctx, insertSystemSQL, systemArgs(n)...); err != nil {
		return translate(err, "enqueueing system message")
	}
	return s.publishSystem(ctx, []NewNotification{n}, func(ctx context.Context, n NewNotification) error { return publish(ctx) })
}

// publishSystem publishes committed system messages concurrently (the producer puts them in one request per
// partition) and hands those it could not publish to the relay. It returns the first publish error.
func (s *Store) publishSystem(ctx context.Context, ns []NewNotification, publish func(ctx context.Context, n NewNotification) error) error {
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = publish(ctx, n) })
	}
	wg.Wait()
	var failed []string
	var first error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, ns[i].TrackingID)
			first = cmp.Or(first, err)
		}
	}
	if len(failed) > 0 {
		if err := s.MarkUnpublished(context.WithoutCancel(ctx), failed); err != nil {
			first = errors.Join(first, err)
		}
	}
	return first
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
// commits, and hands the accepted ones to publish; when publish fails it takes them back. It returns the
// tracking ids that passed the gate (the others are unverified) and the publish error, if any. Batching is
// what lets one ingress replica accept thousands of sends per second: one statement and one produce
// request serve a whole batch, and no transaction stays open across the produce.
func (s *Store) EnqueueTenantBatch(ctx context.Context, ns []NewNotification, publish func(ctx context.Context, accepted []NewNotification) error) (accepted map[string]bool, publishErr, err error) {
	ids := make([]string, len(ns))
	tenants := make([]string, len(ns))
	users := make([]string, len(ns))
	prios := make([]int16, len(ns))
	bodies := make([]string, len(ns))
	for i, n := range ns {
		ids[i], tenants[i], users[i], prios[i], bodies[i] = n.TrackingID, n.TenantID, n.UserID, int16(n.Priority), n.Body
	}
	accepted = make(map[string]bool, len(ns))
	qctx, cancel := withTimeout(ctx)
	rows, err := s.pool.Query(qctx, `
		INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, published_at)
		SELECT r.tracking_id, 'tenant', r.tenant_id, r.user_id, r.priority, r.body, 'queued', now()
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[], $5::text[]) AS r(tracking_id, tenant_id, user_id, priority, body)
		WHERE EXISTS (
			SELECT 1 FROM phone_verifications v JOIN links l USING (tenant_id, user_id)
			WHERE v.tenant_id = r.tenant_id AND v.user_id = r.user_id AND v.status = 'verified')
		RETURNING tracking_id::text`, ids, tenants, users, prios, bodies)
	if err == nil {
		var got []string
		got, err = pgx.CollectRows(rows, pgx.RowTo[string])
		for _, id := range got {
			accepted[id] = true
		}
	}
	cancel()
	if err != nil {
		return nil, nil, translate(err, "enqueueing notifications")
	}
	if len(accepted) == 0 {
		return accepted, nil, nil
	}
	out := make([]NewNotification, 0, len(accepted))
	for _, n := range ns {
		if accepted[n.TrackingID] {
			out = append(out, n)
		}
	}
	if perr := publish(ctx, out); perr != nil {
		taken := make([]string, len(out))
		for i, n := range out {
			taken[i] = n.TrackingID
		}
		if derr := s.DiscardNotifications(context.WithoutCancel(ctx), taken, "", nil); derr != nil {
			perr = errors.Join(perr, derr)
		}
		return accepted, perr, nil
	}
	return accepted, nil, nil
}
