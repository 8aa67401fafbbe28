package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tenant is a row of the tenants table.
type Tenant struct {
	ID            string
	DeveloperName string
	Suspended     bool
	Developers    []int64
	CreatedAt     time.Time
}

// CreateTenant inserts a new tenant; ErrConflict when the id is taken.
func (s *Store) CreateTenant(ctx context.Context, id, developerName string) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO tenants (id, developer_name) VALUES ($1, $2)`, id, developerName)
	return translate(err, "creating tenant")
}

// SetTenantSuspended suspends or resumes a tenant; ErrNotFound when it does not exist.
func (s *Store) SetTenantSuspended(ctx context.Context, id string, suspended bool) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE tenants SET suspended = $2, updated_at = now() WHERE id = $1`, id, suspended)
	if err != nil {
		return translate(err, "suspending tenant")
	}
	if tag.RowsAffected() == 0 {
		return translate(pgx.ErrNoRows, "suspending tenant")
	}
	return nil
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
	rows, err := s.pool.Query(ctx, `SELECT id, developer_name, suspended, developers, created_at FROM tenants ORDER BY id`)
	if err != nil {
		return nil, translate(err, "listing tenants")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tenant, error) {
		var t Tenant
		err := r.Scan(&t.ID, &t.DeveloperName, &t.Suspended, &t.Developers, &t.CreatedAt)
		return t, err
	})
	return out, translate(err, "listing tenants")
}

// GetTenant returns one tenant; ErrNotFound when it does not exist.
func (s *Store) GetTenant(ctx context.Context, id string) (Tenant, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var t Tenant
	err := s.pool.QueryRow(ctx, `SELECT id, developer_name, suspended, developers, created_at FROM tenants WHERE id = $1`, id).
		Scan(&t.ID, &t.DeveloperName, &t.Suspended, &t.Developers, &t.CreatedAt)
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
		SELECT id, developer_name, suspended, developers, created_at FROM tenants
		WHERE $1 = ANY (developers) ORDER BY id`, messengerUserID)
	if err != nil {
		return nil, translate(err, "listing a developer's tenants")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tenant, error) {
		var t Tenant
		err := r.Scan(&t.ID, &t.DeveloperName, &t.Suspended, &t.Developers, &t.CreatedAt)
		return t, err
	})
	return out, translate(err, "listing a developer's tenants")
}
