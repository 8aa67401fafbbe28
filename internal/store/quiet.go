package store

// Quiet hours (spec v1-extensions §14): a tenant's window, the users' time zones the ingress reads it in,
// and the worker's hold of a claimed notification that reached its turn inside the window. The window's
// arithmetic is internal/quiet's.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/quiet"
)

// quietColumns are a tenant's quiet hours, in the order quietScan reads them (prefix: the tenants alias,
// with its dot, or "").
func quietColumns(prefix string) string {
	return prefix + `quiet_start, ` + prefix + `quiet_end, ` + prefix + `quiet_zone, ` + prefix + `quiet_mode`
}

// quietScan holds the nullable columns of quietColumns while a row is scanned.
type quietScan struct {
	start, end *int16
	zone, mode *string
}

// hours is the scanned window; nil when the tenant has none.
func (q *quietScan) hours() *quiet.Hours {
	if q.start == nil || q.end == nil || q.zone == nil || q.mode == nil {
		return nil
	}
	return &quiet.Hours{Start: quiet.Clock(*q.start), End: quiet.Clock(*q.end), Zone: *q.zone, Mode: quiet.Mode(*q.mode)}
}

// quietArgs are h as the four parameters of quietColumns (NULLs for none).
func quietArgs(h *quiet.Hours) []any {
	if h == nil {
		return []any{nil, nil, nil, nil}
	}
	return []any{int16(h.Start), int16(h.End), h.Zone, string(h.Mode)}
}

// SetTenantQuietHours sets (nil: clears) a tenant's quiet hours, validated by the caller (quiet.Hours.Validate),
// and reports whether the row changed; ErrNotFound when the tenant does not exist. The ingress reads them
// with the tenant's keys (Principal.Quiet: within the authentication cache's TTL), the worker at each claim.
func (s *Store) SetTenantQuietHours(ctx context.Context, id string, h *quiet.Hours) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	args := append([]any{id}, quietArgs(h)...)
	var changed bool
	err := s.pool.QueryRow(ctx, `
		WITH t AS (SELECT id FROM tenants WHERE id = $1),
		     u AS (UPDATE tenants SET quiet_start = $2, quiet_end = $3, quiet_zone = $4, quiet_mode = $5, updated_at = now()
		           WHERE id = $1 AND (`+quietColumns("")+`) IS DISTINCT FROM ($2::smallint, $3::smallint, $4::text, $5::text)
		           RETURNING id),
		     `+auditSQL("audited", audit.TenantUpdated, "$6", `(SELECT id AS tenant_id, id AS target,
		           jsonb_build_object('quiet_hours', CASE WHEN $2::smallint IS NULL THEN NULL
		               ELSE jsonb_build_object('start', $2::smallint, 'end', $3::smallint, 'zone', $4::text, 'mode', $5::text) END) AS details
		           FROM u) u_audit`)+`
		SELECT EXISTS (SELECT 1 FROM u) FROM t`, append(args, audit.ActorOf(ctx))...).Scan(&changed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ErrNotFound
	}
	return changed, translate(err, "setting the quiet hours of tenant "+id)
}

// UserTimeZones returns the time_zone (§12) of those of a tenant's users that have one.
func (s *Store) UserTimeZones(ctx context.Context, tenantID string, userIDs []string) (map[string]string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return queryMap[string, string](ctx, s.pool, "reading the users' time zones", `SELECT user_id, time_zone FROM users
		WHERE tenant_id = $1 AND user_id = ANY($2::text[]) AND time_zone IS NOT NULL`, tenantID, userIDs)
}

// holdSQL is notification.Hold, written under the attempt's number like an outcome: the claimed row goes
// back to scheduled with send_at at the window's end, and the attempt it started does not count (nothing
// was sent). published_at is cleared: the scheduler publishes it again when it is released.
var holdSQL = `
	UPDATE notifications
	SET status = ` + notification.Hold.To().SQL() + `, send_at = $3, attempts = attempts - 1,
	    lease_expires_at = NULL, published_at = NULL, updated_at = now()
	WHERE tracking_id = $1 AND ` + notification.Hold.SQL() + ` AND attempts = $2`

// HoldDelivery puts a claimed notification back to wait until the quiet hours it reached its turn in end
// (notification.Hold). It reports false when the claim is no longer this attempt's (its lease ran out and
// another worker took it over): nothing was written.
func (s *Store) HoldDelivery(ctx context.Context, d notification.Delivery, until time.Time) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, holdSQL, d.TrackingID, d.Attempts, until)
	if err != nil {
		return false, translate(err, "holding notification "+d.TrackingID+" for quiet hours")
	}
	return tag.RowsAffected() == 1, nil
}
