package store

// The users' time zones as the ingress caches them (internal/ingress/zonecache.go): a template's date
// filter renders in its user's zone (spec v1-extensions §12), and reading it per send cost PostgreSQL more
// than the send's insert. tenants.user_zones_version (migration 00028) says whether any of a tenant's users'
// zones changed: every statement that changes a users.time_zone — SetUserSettings, and the deletes of
// users rows with one (EraseUser, PurgeTenantUsers) — bumps it in its own transaction, through
// bumpZonesSQL. A new writer of users.time_zone must do the same, or the caches keep the old zone.

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// bumpZonesSQL is a WITH item named bumped that increments the tenant's user_zones_version when cond holds
// and returns the new one as v (no row when cond does not hold). tenant and cond are SQL (parameters and
// expressions of the statement it joins).
func bumpZonesSQL(tenant, cond string) string {
	return `bumped AS (UPDATE tenants SET user_zones_version = user_zones_version + 1
	                   WHERE id = ` + tenant + ` AND (` + cond + `) RETURNING user_zones_version AS v)`
}

// UserZonesVersion reads a tenant's user_zones_version; ErrNotFound for an unknown tenant.
func (s *Store) UserZonesVersion(ctx context.Context, tenantID string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT user_zones_version FROM tenants WHERE id = $1`, tenantID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNotFound
	}
	return v, translate(err, "reading the users' zones version of tenant "+tenantID)
}

// ZonedUsers reads up to limit of a tenant's users that have a time zone, by user id: user id → IANA name.
// The caller reads the version first (UserZonesVersion): the users read after it are at least as new.
func (s *Store) ZonedUsers(ctx context.Context, tenantID string, limit int) (map[string]string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT user_id, time_zone FROM users
		WHERE tenant_id = $1 AND time_zone IS NOT NULL ORDER BY user_id LIMIT $2`, tenantID, limit)
	if err != nil {
		return nil, translate(err, "reading the zoned users of tenant "+tenantID)
	}
	out := map[string]string{}
	names := map[string]string{} // one string per zone name: a few hundred names among many users
	var user, zone string
	_, err = pgx.ForEachRow(rows, []any{&user, &zone}, func() error {
		if n, ok := names[zone]; ok {
			zone = n
		} else {
			names[zone] = zone
		}
		out[user] = zone
		return nil
	})
	return out, translate(err, "reading the zoned users of tenant "+tenantID)
}
