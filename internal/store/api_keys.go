package store

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/quiet"
)

// APIKey is a row of the api_keys table (never the key itself: only its digest is stored).
type APIKey struct {
	ID        string
	TenantID  string
	Prefix    string
	Label     *string
	OwnerRef  *string
	Disabled  bool
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// Principal is what authentication establishes about a caller: the tenant and the branding label.
type Principal struct {
	KeyID    string
	TenantID string
	// Label is the key's label, or the tenant's developer name when the key has none.
	Label string
	// ExpiresAt bounds how long the principal may be cached.
	ExpiresAt *time.Time
	// Limits are the tenant's own limits (nil fields: the installation's defaults). They reach every
	// replica with the authentication cache, so a change applies within its TTL.
	Limits TenantLimits
	// Quiet: the tenant's quiet hours (§14), nil for none; like Limits, a change applies within the cache's TTL.
	Quiet *quiet.Hours
}

// InsertAPIKey stores a key's digest for a tenant and returns the row id. ErrConflict when the tenant does
// not exist (foreign key) or the digest is taken.
func (s *Store) InsertAPIKey(ctx context.Context, tenantID string, digest [32]byte, prefix string, label *string, expiresAt *time.Time) (string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var id string
	err := s.pool.QueryRow(ctx, `
		WITH k AS (
			INSERT INTO api_keys (tenant_id, digest, prefix, label, expires_at)
			VALUES ($1, $2, $3, $4, $5) RETURNING id, tenant_id, label),
		`+auditSQL("audited", audit.APIKeyCreated, "$6", keyAuditSrc("k"))+`
		SELECT id::text FROM k`, tenantID, digest[:], prefix, label, expiresAt, audit.ActorOf(ctx)).Scan(&id)
	return id, translate(err, "inserting API key")
}

// RevokeAPIKeys revokes the keys of a tenant whose prefix starts with prefixOrID or whose id equals it,
// and returns how many were revoked.
func (s *Store) RevokeAPIKeys(ctx context.Context, tenantID, prefixOrID string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	n, err := revokeKeys(ctx, s.pool, `tenant_id = $1 AND (id::text = $2 OR starts_with(prefix, $2))`, tenantID, prefixOrID)
	return n, translate(err, "revoking API key")
}

// keyAuditSrc is the audit source (auditSQL) of the api_keys rows of the CTE keys, which returns id,
// tenant_id and label: the key's id, and its label (never its digest nor its prefix).
func keyAuditSrc(keys string) string {
	return `(SELECT tenant_id, id::text AS target, jsonb_strip_nulls(jsonb_build_object('label', label)) AS details FROM ` + keys + `) ` + keys + `_src`
}

// revokeKeys revokes the unrevoked keys cond selects (over args), each with its api_key.revoked event by
// ctx's actor, in one statement, and returns how many it revoked.
func revokeKeys(ctx context.Context, q querier, cond string, args ...any) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `
		WITH r AS (
			UPDATE api_keys SET revoked_at = now(), updated_at = now() WHERE `+cond+` AND revoked_at IS NULL
			RETURNING id, tenant_id, label),
		`+auditSQL("audited", audit.APIKeyRevoked, "$"+strconv.Itoa(len(args)+1), keyAuditSrc("r"))+`
		SELECT count(*) FROM r`, append(args, audit.ActorOf(ctx))...).Scan(&n)
	return n, err
}

// ListAPIKeys returns a tenant's keys (all tenants when tenantID is empty), newest first.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id::text, tenant_id, prefix, label, owner_ref, disabled, expires_at, revoked_at, created_at
		FROM api_keys WHERE $1 = '' OR tenant_id = $1 ORDER BY created_at DESC, id`, tenantID)
	if err != nil {
		return nil, translate(err, "listing API keys")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		err := r.Scan(&k.ID, &k.TenantID, &k.Prefix, &k.Label, &k.OwnerRef, &k.Disabled, &k.ExpiresAt, &k.RevokedAt, &k.CreatedAt)
		return k, err
	})
	return out, translate(err, "listing API keys")
}

// Authenticate finds the active key with this digest. A key is active when it is not disabled, not
// revoked, not expired, and its tenant is not suspended; anything else is ErrNotFound.
func (s *Store) Authenticate(ctx context.Context, digest [32]byte) (Principal, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var p Principal
	var q quietScan
	err := s.pool.QueryRow(ctx, `
		SELECT k.id::text, k.tenant_id, COALESCE(k.label, t.developer_name), k.expires_at,
		       t.sends_per_second, t.burst, t.requests_per_second, `+quietColumns("t.")+`
		FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
		WHERE k.digest = $1 AND NOT k.disabled AND k.revoked_at IS NULL
		  AND (k.expires_at IS NULL OR k.expires_at > now()) AND NOT t.suspended`, digest[:]).
		Scan(&p.KeyID, &p.TenantID, &p.Label, &p.ExpiresAt, &p.Limits.SendsPerSecond, &p.Limits.Burst, &p.Limits.RequestsPerSecond,
			&q.start, &q.end, &q.zone, &q.mode)
	p.Quiet = q.hours()
	return p, translate(err, "authenticating API key")
}
