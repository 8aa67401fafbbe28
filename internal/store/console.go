package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
)

// Reads for the dev console of herald dev (internal/dev/console), and for nothing tenant-facing: a tenant's
// latest notifications and where each of its users stands.

// RecentNotifications returns the tenant's latest notifications, newest first (never their bodies).
func (s *Store) RecentNotifications(ctx context.Context, tenantID string, limit int) ([]notification.View, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+viewColumns+`
		FROM notifications WHERE tenant_id = $1 AND kind = `+notification.KindTenantSQL+`
		ORDER BY created_at DESC, tracking_id DESC LIMIT $2`, tenantID, limit)
	if err != nil {
		return nil, translate(err, "listing notifications")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (notification.View, error) {
		var v notification.View
		err := r.Scan(viewScanArgs(&v)...)
		return v, err
	})
	return out, translate(err, "listing notifications")
}

// UserProgress is where a tenant's user stands: asked for (a link token), linked, verified, notified.
type UserProgress struct {
	UserID          string
	CreatedAt       time.Time
	MessengerUserID *int64 // the linked messenger account; nil when not linked
	Verification    string // unverified, pending or verified, as the verification status reads
	PhoneLast4      *string
	Prompt          *PromptDelivery // the latest verification prompt; nil before any session
	Sent            int             // tenant notifications queued for the user
	Delivered       int
}

// UsersProgress returns the tenant's users, the latest first.
func (s *Store) UsersProgress(ctx context.Context, tenantID string, limit int) ([]UserProgress, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT u.user_id, u.created_at, l.messenger_user_id, `+verificationStatusSQL+`, v.phone_last4,
		       p.status, p.last_error_code, p.last_error_message, p.updated_at, c.sent, c.delivered
		FROM users u
		     LEFT JOIN links l USING (tenant_id, user_id)
		     LEFT JOIN phone_verifications v USING (tenant_id, user_id)
		     LEFT JOIN notifications p ON p.tracking_id = v.prompt_tracking_id
		     CROSS JOIN LATERAL (
		       SELECT count(*) AS sent, count(*) FILTER (WHERE n.status = `+notification.Delivered.SQL()+`) AS delivered
		       FROM notifications n WHERE n.tenant_id = u.tenant_id AND n.user_id = u.user_id AND n.kind = `+notification.KindTenantSQL+`) c
		WHERE u.tenant_id = $1
		ORDER BY u.created_at DESC, u.user_id LIMIT $2`, tenantID, limit)
	if err != nil {
		return nil, translate(err, "listing users")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (UserProgress, error) {
		var u UserProgress
		var p PromptDelivery
		var promptStatus *notification.Status
		var promptCode *int
		var promptUpdatedAt *time.Time
		err := r.Scan(&u.UserID, &u.CreatedAt, &u.MessengerUserID, &u.Verification, &u.PhoneLast4,
			&promptStatus, &promptCode, &p.LastErrorMessage, &promptUpdatedAt, &u.Sent, &u.Delivered)
		u.Prompt = p.from(promptStatus, promptCode, promptUpdatedAt)
		return u, err
	})
	return out, translate(err, "listing users")
}
