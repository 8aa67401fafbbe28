package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Link token and verification lifetimes fixed by the spec.
const (
	LinkTokenTTL    = 15 * time.Minute
	VerificationTTL = 10 * time.Minute
)

// CreateLinkToken records a link token's digest with the label snapshot, creating the user record if it
// is new, and returns the expiry.
func (s *Store) CreateLinkToken(ctx context.Context, tenantID, userID string, digest [32]byte, label string) (time.Time, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var expires time.Time
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO users (tenant_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, tenantID, userID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO link_tokens (digest, tenant_id, user_id, label, expires_at)
			VALUES ($1, $2, $3, $4, now() + $5::interval) RETURNING expires_at`,
			digest[:], tenantID, userID, label, LinkTokenTTL.String()).Scan(&expires)
	})
	return expires, translate(err, "creating link token")
}

// StartVerification moves the user's verification to pending for VerificationTTL and inserts the prompt
// (built by prompt from the link's chat id) in the same transaction, then publishes the prompt; a prompt
// that cannot be published now is left to the relay, and publishErr says so. ErrNotFound when the user has
// no link for the tenant.
func (s *Store) StartVerification(ctx context.Context, tenantID, userID, label string, prompt func(chatID int64) NewNotification, publish func(ctx context.Context, n NewNotification) error) (expires time.Time, publishErr, err error) {
	qctx, cancel := withTimeout(ctx)
	defer cancel()
	var n NewNotification
	err = pgx.BeginFunc(qctx, s.pool, func(tx pgx.Tx) error {
		var chatID int64
		// Lock the link so a concurrent relink cannot slip between reading the chat and queuing the prompt.
		if err := tx.QueryRow(qctx, `SELECT chat_id FROM links WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE`, tenantID, userID).Scan(&chatID); err != nil {
			return err
		}
		if err := tx.QueryRow(qctx, `
			INSERT INTO phone_verifications (tenant_id, user_id, status, session_expires_at, label, updated_at)
			VALUES ($1, $2, 'pending', now() + $4::interval, $3, now())
			ON CONFLICT (tenant_id, user_id) DO UPDATE
			  SET status = 'pending', session_expires_at = EXCLUDED.session_expires_at, label = EXCLUDED.label,
			      verified_at = NULL, phone_last4 = NULL, phone_hash = NULL, updated_at = now()
			RETURNING session_expires_at`, tenantID, userID, label, VerificationTTL.String()).Scan(&expires); err != nil {
			return err
		}
		n = prompt(chatID)
		return insertSystem(qctx, tx, n)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil, fmt.Errorf("while starting verification: %w", ErrNotFound)
	}
	if err != nil {
		return time.Time{}, nil, translate(err, "starting verification")
	}
	return expires, s.publishSystem(ctx, []NewNotification{n}, publish), nil
}

// Verification is the tenant-visible phone verification state.
type Verification struct {
	UserID     string
	Status     string
	VerifiedAt *time.Time
	PhoneLast4 *string
	UpdatedAt  time.Time
}

// GetVerification reads a user's verification; ErrNotFound when the user does not exist for the tenant.
// A user without a verification record is unverified; a pending session past its expiry reads as
// unverified.
func (s *Store) GetVerification(ctx context.Context, tenantID, userID string) (Verification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	v := Verification{UserID: userID}
	err := s.pool.QueryRow(ctx, `
		SELECT CASE WHEN v.status = 'pending' AND v.session_expires_at <= now() THEN 'unverified'
		            ELSE COALESCE(v.status, 'unverified') END,
		       v.verified_at, v.phone_last4, COALESCE(v.updated_at, u.created_at)
		FROM users u LEFT JOIN phone_verifications v USING (tenant_id, user_id)
		WHERE u.tenant_id = $1 AND u.user_id = $2`, tenantID, userID).
		Scan(&v.Status, &v.VerifiedAt, &v.PhoneLast4, &v.UpdatedAt)
	return v, translate(err, "reading verification")
}
