package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/phone"
)

// VerificationTTL is the lifetime of a phone verification session, fixed by the spec.
const VerificationTTL = 10 * time.Minute

// StartVerification moves the user's verification to pending for VerificationTTL and inserts the prompt
// (built by prompt from the link's chat id, and sent through the bot of the link) in the same transaction;
// the caller publishes the prompt it returns. ErrNotFound when the user has no link for the tenant.
func (s *Store) StartVerification(ctx context.Context, tenantID, userID, label string, prompt func(chatID int64) NewNotification) (expires time.Time, n NewNotification, err error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var chatID int64
		var bot notification.BotID
		// Lock the link so a concurrent relink cannot slip between reading the chat and queuing the prompt.
		if err := tx.QueryRow(ctx, `SELECT chat_id, COALESCE(bot_id, 0) FROM links WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE`,
			tenantID, userID).Scan(&chatID, &bot); err != nil {
			return err
		}
		n = prompt(chatID)
		n.Bot = bot
		if err := tx.QueryRow(ctx, `
			INSERT INTO phone_verifications (tenant_id, user_id, status, session_expires_at, label, prompt_tracking_id, updated_at)
			VALUES ($1, $2, `+phone.Pending.SQL()+`, now() + $4::interval, $3, $5, now())
			ON CONFLICT (tenant_id, user_id) DO UPDATE
			  SET status = `+phone.Pending.SQL()+`, session_expires_at = EXCLUDED.session_expires_at, label = EXCLUDED.label,
			      prompt_tracking_id = EXCLUDED.prompt_tracking_id,
			      verified_at = NULL, phone_last4 = NULL, phone_hash = NULL, updated_at = now()
			RETURNING session_expires_at`, tenantID, userID, label, VerificationTTL.String(), n.TrackingID).Scan(&expires); err != nil {
			return err
		}
		return insertSystem(ctx, tx, n)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, n, fmt.Errorf("while starting verification: %w", ErrNotFound)
	}
	return expires, n, translate(err, "starting verification")
}

// verificationStatusSQL is the verification status a tenant sees, from phone_verifications v (NULL when the
// user has none): a pending session past its expiry, or no record, reads as unverified.
var verificationStatusSQL = phone.SeenSQL(`v`)

// Verification is the tenant-visible phone verification state.
type Verification struct {
	UserID     string
	Status     phone.Status
	VerifiedAt *time.Time
	PhoneLast4 *string
	UpdatedAt  time.Time
	// Prompt is the delivery of the latest session's prompt; nil before any session (or once purged).
	Prompt *PromptDelivery
}

// PromptDelivery is what became of a verification prompt: its delivery state and last error (a user who
// blocked the bot: blocked, 403), never its text.
type PromptDelivery struct {
	Status           notification.Status
	LastErrorCode    int
	LastErrorMessage *string
	UpdatedAt        time.Time
}

// GetVerification reads a user's verification; ErrNotFound when the user does not exist for the tenant.
// A user without a verification record is unverified; a pending session past its expiry reads as
// unverified.
func (s *Store) GetVerification(ctx context.Context, tenantID, userID string) (Verification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	v := Verification{UserID: userID}
	var p PromptDelivery
	var promptStatus *notification.Status
	var promptUpdatedAt *time.Time
	var promptCode *int
	err := s.pool.QueryRow(ctx, `
		SELECT `+verificationStatusSQL+`,
		       v.verified_at, v.phone_last4, COALESCE(v.updated_at, u.created_at),
		       p.status, p.last_error_code, p.last_error_message, p.updated_at
		FROM users u LEFT JOIN phone_verifications v USING (tenant_id, user_id)
		     LEFT JOIN notifications p ON p.tracking_id = v.prompt_tracking_id
		WHERE u.tenant_id = $1 AND u.user_id = $2`, tenantID, userID).
		Scan(&v.Status, &v.VerifiedAt, &v.PhoneLast4, &v.UpdatedAt, &promptStatus, &promptCode, &p.LastErrorMessage, &promptUpdatedAt)
	v.Prompt = p.from(promptStatus, promptCode, promptUpdatedAt)
	return v, translate(err, "reading verification")
}

// from completes p with the columns of a LEFT JOINed prompt; nil when there is none.
func (p *PromptDelivery) from(status *notification.Status, code *int, updatedAt *time.Time) *PromptDelivery {
	if status == nil || code == nil || updatedAt == nil {
		return nil
	}
	p.Status, p.LastErrorCode, p.UpdatedAt = *status, *code, *updatedAt
	return p
}

// ContactShare is the sender's own contact, shared in a private chat: only the last four digits and the
// keyed digest of the E.164 number, never the number.
type ContactShare struct {
	MessengerUserID int64
	PhoneLast4      string
	PhoneHash       [32]byte
	// Bot is the bot the contact was shared with: it completes the sessions of the links made through it
	// only (a verification proves a phone to one bot's chat).
	Bot notification.BotID
}

// Session is one phone verification session of a tenant user.
type Session struct {
	TenantID string
	UserID   string
	Label    string // the session's label snapshot, or the tenant's developer name
}

// VerificationResult describes a contact share.
type VerificationResult struct {
	Verified []Session
	// Expired is set when nothing was completed but the sender has a pending session past its expiry (the
	// most recent one, for branding the reply).
	Expired *Session
}

// CompleteVerifications is the effect of the sender's own contact: it verifies every pending, unexpired
// session of the tenant users linked to the sender's messenger account through c.Bot, across tenants (recording a
// user.verified callback event for each), and inserts the replies built from the result (filled into
// *VerificationResult when ApplyUpdates returns).
func CompleteVerifications(updateID int64, c ContactShare, replies func(VerificationResult) []NewNotification) (*Effect, *VerificationResult) {
	var res VerificationResult
	return &Effect{
		UpdateID: updateID,
		first: func(b *pgx.Batch) {
			res = VerificationResult{}
			// The verifications and their user.verified callback events, in one statement.
			b.Queue(`
				WITH verified AS (
					UPDATE phone_verifications v
					SET status = `+phone.Verified.SQL()+`, phone_last4 = $2, phone_hash = $3, verified_at = now(), updated_at = now()
					FROM links l, tenants t
					WHERE l.messenger_user_id = $1 AND l.bot_id IS NOT DISTINCT FROM $4::bigint
					  AND v.tenant_id = l.tenant_id AND v.user_id = l.user_id
					  AND t.id = v.tenant_id AND v.status = `+phone.Pending.SQL()+` AND v.session_expires_at > now()
					RETURNING v.tenant_id, v.user_id, COALESCE(v.label, t.developer_name) AS label, v.verified_at AS at),
				`+userEvents("verified", EventUserVerified)+`
				SELECT tenant_id, user_id, label FROM verified`,
				c.MessengerUserID, c.PhoneLast4, c.PhoneHash[:], botArg(c.Bot)).Query(func(rows pgx.Rows) error {
				var err error
				res.Verified, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Session, error) {
					var v Session
					err := r.Scan(&v.TenantID, &v.UserID, &v.Label)
					return v, err
				})
				return err
			})
			// The most recent expired session, for the reply when nothing was completed. Sessions verified
			// just above are no longer pending, so they cannot show up here.
			b.Queue(`
				SELECT v.tenant_id, v.user_id, COALESCE(v.label, t.developer_name)
				FROM phone_verifications v JOIN links l USING (tenant_id, user_id) JOIN tenants t ON t.id = v.tenant_id
				WHERE l.messenger_user_id = $1 AND l.bot_id IS NOT DISTINCT FROM $2::bigint
				  AND v.status = `+phone.Pending.SQL()+` AND v.session_expires_at <= now()
				ORDER BY v.session_expires_at DESC LIMIT 1`, c.MessengerUserID, botArg(c.Bot)).QueryRow(func(row pgx.Row) error {
				var e Session
				err := row.Scan(&e.TenantID, &e.UserID, &e.Label)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				if err == nil && len(res.Verified) == 0 {
					res.Expired = &e
				}
				return err
			})
		},
		then: func(*pgx.Batch) ([]NewNotification, error) { return replies(res), nil },
	}, &res
}
