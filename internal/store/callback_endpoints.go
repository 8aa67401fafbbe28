package store

// Callback endpoints and their secrets (tables callback_endpoints, callback_secrets). Secrets arrive
// sealed (internal/signing): this package never sees one in clear.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
)

// MaxCallbackEndpoints is how many endpoints a tenant may have (spec v1-extensions §7).
const MaxCallbackEndpoints = 5

// SecretOverlap is how long a rotated-out secret keeps signing beside the new one.
const SecretOverlap = 24 * time.Hour

// MaxPreviousSecrets bounds the rotated-out secrets that sign beside the current one: rotating more often
// than that within SecretOverlap ends the oldest overlap early (each signature is about 50 bytes of a
// header).
const MaxPreviousSecrets = 4

// MaxPendingPings bounds the ping events (POST /v1/callbacks/{id}/test) an endpoint holds undelivered.
const MaxPendingPings = 3

// ErrLimitReached means the tenant has MaxCallbackEndpoints endpoints already.
var ErrLimitReached = errors.New("limit reached")

// CallbackEndpoint is an endpoint as the tenant sees it (never its secrets).
type CallbackEndpoint struct {
	ID            string
	TenantID      string
	URL           string
	Events        []string
	CreatedAt     time.Time
	LastSuccessAt *time.Time
	LastFailureAt *time.Time
}

// CreateCallbackEndpoint stores an endpoint (ID, TenantID, URL, Events) with its first secret, sealed for
// e.ID, and returns it with its creation time. ErrLimitReached when the tenant has MaxCallbackEndpoints
// already. Concurrent creations of one tenant are serialised on the tenant's row (FOR NO KEY UPDATE: sends,
// which only reference the row, are not held up), so the limit holds.
func (s *Store) CreateCallbackEndpoint(ctx context.Context, e CallbackEndpoint, sealed []byte) (CallbackEndpoint, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, e.TenantID); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM callback_endpoints WHERE tenant_id = $1`, e.TenantID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxCallbackEndpoints {
			return ErrLimitReached
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO callback_endpoints (id, tenant_id, url, events) VALUES ($1, $2, $3, $4) RETURNING created_at`,
			e.ID, e.TenantID, e.URL, e.Events).Scan(&e.CreatedAt); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO callback_secrets (endpoint_id, sealed) VALUES ($1, $2)`, e.ID, sealed); err != nil {
			return err
		}
		// The events subscribed to, not the URL (its query may hold a token of the tenant's) nor the secret.
		return appendAudit(ctx, tx, e.TenantID, audit.CallbackCreated, e.ID, map[string]any{"events": e.Events})
	})
	if errors.Is(err, ErrLimitReached) {
		return e, fmt.Errorf("while creating a callback endpoint: %w", ErrLimitReached)
	}
	return e, translate(err, "creating a callback endpoint")
}

// ListCallbackEndpoints returns the tenant's endpoints, oldest first.
func (s *Store) ListCallbackEndpoints(ctx context.Context, tenantID string) ([]CallbackEndpoint, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id::text, tenant_id, url, events, created_at, last_success_at, last_failure_at
		FROM callback_endpoints WHERE tenant_id = $1 ORDER BY created_at, id`, tenantID)
	if err != nil {
		return nil, translate(err, "listing callback endpoints")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CallbackEndpoint, error) {
		var e CallbackEndpoint
		err := r.Scan(&e.ID, &e.TenantID, &e.URL, &e.Events, &e.CreatedAt, &e.LastSuccessAt, &e.LastFailureAt)
		return e, err
	})
	return out, translate(err, "listing callback endpoints")
}

// DeleteCallbackEndpoint deletes the tenant's endpoint id with its secrets and its events, sent or not.
// ErrNotFound when the tenant has no such endpoint (another tenant's included).
func (s *Store) DeleteCallbackEndpoint(ctx context.Context, tenantID, id string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM callback_endpoints WHERE id = $1 AND tenant_id = $2`, id, tenantID)
		if err == nil && tag.RowsAffected() == 0 {
			err = pgx.ErrNoRows
		}
		if err != nil {
			return err
		}
		return appendAudit(ctx, tx, tenantID, audit.CallbackDeleted, id, nil)
	})
	return translate(err, "deleting a callback endpoint")
}

// inEndpointTx runs fn in a transaction that holds the tenant's endpoint id locked (FOR NO KEY UPDATE), so
// that the changes of one endpoint are serialised; pgx.ErrNoRows (ErrNotFound once translated) when the
// tenant has no such endpoint.
func (s *Store) inEndpointTx(ctx context.Context, tenantID, id string, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var found bool
		if err := tx.QueryRow(ctx, `SELECT true FROM callback_endpoints WHERE id = $1 AND tenant_id = $2 FOR NO KEY UPDATE`,
			id, tenantID).Scan(&found); err != nil {
			return err
		}
		return fn(tx)
	})
}

// RotateCallbackSecret makes sealed (sealed for id) the endpoint's current secret; the one it replaces
// keeps signing beside it for overlap (SecretOverlap), within MaxPreviousSecrets. ErrNotFound when the
// tenant has no such endpoint. Rotations of one endpoint are serialised on its row.
func (s *Store) RotateCallbackSecret(ctx context.Context, tenantID, id string, sealed []byte, overlap time.Duration) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := s.inEndpointTx(ctx, tenantID, id, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE callback_secrets SET expires_at = now() + make_interval(secs => $2)
			WHERE endpoint_id = $1 AND expires_at IS NULL`, id, overlap.Seconds()); err != nil {
			return err
		}
		// Expired secrets go, and the previous ones beyond the bound, oldest first.
		if _, err := tx.Exec(ctx, `DELETE FROM callback_secrets WHERE endpoint_id = $1 AND (expires_at <= now() OR id IN (
				SELECT id FROM callback_secrets WHERE endpoint_id = $1 AND expires_at IS NOT NULL
				ORDER BY expires_at DESC, id DESC OFFSET $2))`, id, MaxPreviousSecrets); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO callback_secrets (endpoint_id, sealed) VALUES ($1, $2)`, id, sealed); err != nil {
			return err
		}
		return appendAudit(ctx, tx, tenantID, audit.CallbackSecretRotated, id, map[string]any{"overlap_seconds": int(overlap.Seconds())})
	})
	return translate(err, "rotating a callback secret")
}

// EnqueuePing records a ping event for the tenant's endpoint id (POST /v1/callbacks/{id}/test); the
// endpoint receives it whatever events it subscribed to. ErrNotFound when the tenant has no such endpoint.
//
// An endpoint holds at most MaxPendingPings undelivered pings, so test calls cannot fill the outbox (each
// undelivered ping is retried for a day). Beyond them a call adds none, since a ping is on its way; it makes
// one of them due now instead (unless one is due or in flight), so a test after a receiver is fixed still sends
// a ping at once — and its success makes the endpoint's backlog due. Test calls of one endpoint are
// serialised on its row, so that the bound holds.
func (s *Store) EnqueuePing(ctx context.Context, tenantID, id string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := s.inEndpointTx(ctx, tenantID, id, func(tx pgx.Tx) error {
		// Through callback_events_pending_ping_idx (migration 00013).
		_, err := tx.Exec(ctx, `
			WITH pending AS (
				SELECT id, next_attempt_at, leased_until FROM callback_events
				WHERE endpoint_id = $1 AND type = '`+EventPing+`' AND state = `+callbackstate.Pending.SQL()+`),
			added AS (
				INSERT INTO callback_events (event_id, endpoint_id, type)
				SELECT gen_random_uuid(), $1, '`+EventPing+`' WHERE (SELECT count(*) FROM pending) < $2)
			UPDATE callback_events SET next_attempt_at = now()
			WHERE id = (SELECT id FROM pending
			            WHERE (SELECT count(*) FROM pending) >= $2 AND leased_until IS NULL AND next_attempt_at > now()
			              AND NOT EXISTS (SELECT 1 FROM pending WHERE leased_until IS NULL AND next_attempt_at <= now())
			            ORDER BY next_attempt_at LIMIT 1)`, id, MaxPendingPings)
		return err
	})
	return translate(err, "queuing a ping")
}

// SealedSecret is an endpoint's valid secret, sealed for it.
type SealedSecret struct {
	EndpointID string
	Sealed     []byte
}

// CallbackSecretsByURL returns the valid secrets of every endpoint whose URL matches the SQL LIKE pattern
// (herald dev: the simulator's receiver verifies the signatures of what reaches it).
func (s *Store) CallbackSecretsByURL(ctx context.Context, like string) ([]SealedSecret, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT ep.id::text, sc.sealed FROM callback_endpoints ep JOIN callback_secrets sc ON sc.endpoint_id = ep.id
		WHERE ep.url LIKE $1 AND (sc.expires_at IS NULL OR sc.expires_at > now())`, like)
	if err != nil {
		return nil, translate(err, "reading callback secrets")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SealedSecret, error) {
		var s SealedSecret
		err := r.Scan(&s.EndpointID, &s.Sealed)
		return s, err
	})
	return out, translate(err, "reading callback secrets")
}

// StoredSecret is a valid secret of an endpoint, sealed, with its row.
type StoredSecret struct {
	ID         int64
	EndpointID string
	Sealed     []byte
}

// CallbackSecretsSealedOtherwise returns up to limit valid secrets whose sealed form does not start with
// current (signing.Key.CurrentPrefix: sealed under the key that seals now), and how many there are in all:
// the secrets a rotation of HERALD_CALLBACK_SECRET_KEY still has to seal again. (The table holds a few rows
// per endpoint: a scan of it is cheap.)
func (s *Store) CallbackSecretsSealedOtherwise(ctx context.Context, current []byte, limit int) ([]StoredSecret, int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id, endpoint_id::text, sealed, count(*) OVER () FROM callback_secrets
		WHERE substring(sealed FROM 1 FOR length($1::bytea)) <> $1::bytea AND (expires_at IS NULL OR expires_at > now())
		ORDER BY id LIMIT $2`, current, limit)
	if err != nil {
		return nil, 0, translate(err, "reading callback secrets to seal again")
	}
	var total int64
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredSecret, error) {
		var s StoredSecret
		err := r.Scan(&s.ID, &s.EndpointID, &s.Sealed, &total)
		return s, err
	})
	return out, total, translate(err, "reading callback secrets to seal again")
}

// ResealCallbackSecret replaces the sealed form of secret id, old, with resealed (the same secret sealed
// under another key); false when the row no longer holds old (deleted meanwhile).
func (s *Store) ResealCallbackSecret(ctx context.Context, id int64, old, resealed []byte) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE callback_secrets SET sealed = $3 WHERE id = $1 AND sealed = $2`, id, old, resealed)
	if err != nil {
		return false, translate(err, "sealing a callback secret again")
	}
	return tag.RowsAffected() == 1, nil
}
