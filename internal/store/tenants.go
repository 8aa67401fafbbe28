package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/quiet"
)

// Tenant is a row of the tenants table.
type Tenant struct {
	ID            string
	DeveloperName string
	Suspended     bool
	Developers    []int64
	Limits        TenantLimits
	// BotID is the bot the tenant sends through: notification.SharedBot, or its own (SetTenantBot).
	BotID notification.BotID
	// Quiet: the tenant's quiet hours (§14), nil for none (SetTenantQuietHours).
	Quiet     *quiet.Hours
	CreatedAt time.Time
}

// TenantLimits are a tenant's own limits; a nil field takes the installation's default.
type TenantLimits struct {
	SendsPerSecond    *int32
	Burst             *int32
	RequestsPerSecond *int32
	DeliveryWeight    *int32
}

// Equal reports whether two sets of limits are the same.
func (l TenantLimits) Equal(o TenantLimits) bool {
	eq := func(a, b *int32) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
	return eq(l.SendsPerSecond, o.SendsPerSecond) && eq(l.Burst, o.Burst) && eq(l.RequestsPerSecond, o.RequestsPerSecond) &&
		eq(l.DeliveryWeight, o.DeliveryWeight)
}

// tenantColumns are the columns scanTenant reads.
var tenantColumns = `id, developer_name, suspended, developers, sends_per_second, burst, requests_per_second, delivery_weight,
	COALESCE(bot_id, 0), ` + quietColumns("") + `, created_at`

func scanTenant(r pgx.Row) (Tenant, error) {
	var t Tenant
	var q quietScan
	err := r.Scan(&t.ID, &t.DeveloperName, &t.Suspended, &t.Developers,
		&t.Limits.SendsPerSecond, &t.Limits.Burst, &t.Limits.RequestsPerSecond, &t.Limits.DeliveryWeight, &t.BotID,
		&q.start, &q.end, &q.zone, &q.mode, &t.CreatedAt)
	t.Quiet = q.hours()
	return t, err
}

// CreateTenant inserts a new tenant; ErrConflict when the id is taken.
func (s *Store) CreateTenant(ctx context.Context, id, developerName string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO tenants (id, developer_name) VALUES ($1, $2)`, id, developerName)
	return translate(err, "creating tenant")
}

// SetTenantLimits sets a tenant's own limits (nil fields: the installation's defaults); ErrNotFound when
// it does not exist.
func (s *Store) SetTenantLimits(ctx context.Context, id string, l TenantLimits) error {
	return s.updateTenant(ctx, "setting the limits of tenant "+id, map[string]any{"limits": limitsDetails(l)},
		`sends_per_second = $2, burst = $3, requests_per_second = $4, delivery_weight = $5`,
		`(sends_per_second, burst, requests_per_second, delivery_weight) IS DISTINCT FROM ($2, $3, $4, $5)`,
		id, l.SendsPerSecond, l.Burst, l.RequestsPerSecond, l.DeliveryWeight)
}

// SetTenantDeveloperName renames a tenant's developer (the branding fallback); ErrNotFound when it does not
// exist.
func (s *Store) SetTenantDeveloperName(ctx context.Context, id, name string) error {
	return s.updateTenant(ctx, "renaming the developer of tenant "+id, map[string]any{"developer_name": name},
		`developer_name = $2`, `developer_name IS DISTINCT FROM $2`, id, name)
}

// updateTenant sets the columns of tenant id (set, over $2…) where they change (changed) and appends its
// tenant.updated event with details, in one transaction: a change to the same values records nothing.
// ErrNotFound when the tenant does not exist.
func (s *Store) updateTenant(ctx context.Context, doing string, details map[string]any, set, changed, id string, args ...any) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var updated, exists bool
		if err := tx.QueryRow(ctx, `
			WITH u AS (UPDATE tenants SET `+set+`, updated_at = now() WHERE id = $1 AND (`+changed+`) RETURNING id)
			SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM tenants WHERE id = $1)`,
			append([]any{id}, args...)...).Scan(&updated, &exists); err != nil {
			return err
		}
		if !exists {
			return pgx.ErrNoRows
		}
		if !updated {
			return nil
		}
		return appendAudit(ctx, tx, id, audit.TenantUpdated, id, details)
	})
	return translate(err, doing)
}

// limitsDetails are a tenant's limits as tenant.updated's details name them (null: the installation's default).
func limitsDetails(l TenantLimits) map[string]any {
	return map[string]any{"sends_per_second": l.SendsPerSecond, "burst": l.Burst,
		"requests_per_second": l.RequestsPerSecond, "delivery_weight": l.DeliveryWeight}
}

// SetTenantSuspended suspends or resumes a tenant; ErrNotFound when it does not exist.
func (s *Store) SetTenantSuspended(ctx context.Context, id string, suspended bool) error {
	return s.updateTenant(ctx, "suspending tenant", map[string]any{"suspended": suspended},
		`suspended = $2`, `suspended IS DISTINCT FROM $2`, id, suspended)
}

// AddTenantDeveloper lists a messenger user as a developer of the tenant (idempotent).
func (s *Store) AddTenantDeveloper(ctx context.Context, id string, messengerUserID int64) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
		UPDATE tenants SET developers = array_append(developers, $2), updated_at = now()
		WHERE id = $1 AND NOT ($2 = ANY (developers))`, id, messengerUserID)
	if err != nil {
		return translate(err, "adding developer")
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $1)`, id).Scan(&exists); err != nil {
			return translate(err, "adding developer")
		}
		if !exists {
			return translate(pgx.ErrNoRows, "adding developer")
		}
	}
	return nil
}

// ListTenants returns every tenant ordered by id.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY id`)
	if err != nil {
		return nil, translate(err, "listing tenants")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tenant, error) { return scanTenant(r) })
	return out, translate(err, "listing tenants")
}

// GetTenant returns one tenant; ErrNotFound when it does not exist.
func (s *Store) GetTenant(ctx context.Context, id string) (Tenant, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	t, err := scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE id = $1`, id))
	return t, translate(err, "reading tenant")
}

// DeveloperTenants returns the tenants whose developers include the messenger user, or every tenant for a
// platform admin, ordered by id.
func (s *Store) DeveloperTenants(ctx context.Context, messengerUserID int64, admin bool) ([]Tenant, error) {
	if admin {
		return s.ListTenants(ctx)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT `+tenantColumns+` FROM tenants
		WHERE $1 = ANY (developers) ORDER BY id`, messengerUserID)
	if err != nil {
		return nil, translate(err, "listing a developer's tenants")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tenant, error) { return scanTenant(r) })
	return out, translate(err, "listing a developer's tenants")
}

// DeliveryWeights returns the tenants whose delivery weight is set (the others weigh 1).
func (s *Store) DeliveryWeights(ctx context.Context) (map[string]int, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	return queryMap[string, int](ctx, s.pool, "reading delivery weights",
		`SELECT id, delivery_weight FROM tenants WHERE delivery_weight IS NOT NULL`)
}
