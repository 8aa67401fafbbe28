package store

// The SQL of the Kubernetes operator: Tenant objects become rows of tenants, ApiKey objects rows of
// api_keys whose owner_ref is "k8s:<namespace>/<name>". The operator keeps the columns that
// authentication reads (tenants.suspended; api_keys.disabled, expires_at, revoked_at) equal to the spec,
// and writes only when a column differs, so a steady state makes no writes.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/internal/audit"
)

// OpenLazy is Open without the initial ping: connections are made on first use, so a process (the
// operator) can start, and report the outage in its status, while PostgreSQL is down.
func OpenLazy(url string, maxConns int32) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("while parsing the database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("while opening the database pool: %w", err)
	}
	return &Store{pool: pool}, nil
}

// TenantRecord is a tenant as the operator declares it.
type TenantRecord struct {
	ID            string
	DeveloperName string
	Suspended     bool
	Developers    []int64
	Limits        TenantLimits
	// Incarnation identifies the Tenant object (its metadata.uid). "" leaves the recorded one as it is.
	Incarnation string
}

// TenantWrite is what UpsertTenantFromSpec did.
type TenantWrite struct {
	// Wrote: the row was created or changed.
	Wrote bool
	// Reincarnated: the row had been written for another incarnation, an earlier Tenant object of the
	// same name that went without the operator purging it. Its keys were revoked and its end users
	// purged (Purge) before the row was given the new incarnation.
	Reincarnated bool
	Purge        TenantPurge
}

// TenantPurge counts what was removed from a tenant.
type TenantPurge struct {
	RevokedKeys     int64
	Users           int64 // with their links, link tokens and phone verifications
	IdempotencyKeys int64
	// CallbackEndpoints were deleted with their secrets and their events: a Tenant re-created under the
	// same name must not push its users' events to the URLs of the earlier one.
	CallbackEndpoints int64
	// Templates were deleted with their versions, as DELETE /v1/templates/{name} deletes one: the names
	// stay, marked deleted, with their version counters, so that a (tenant, name, version) never names
	// two contents (the ingress caches versions by that key forever).
	Templates int64
}

// PurgeBatchSize is how many users (or idempotency keys) one transaction of a purge deletes: locks are
// held for one batch, not for the whole tenant.
const PurgeBatchSize = 500

// UpsertTenantFromSpec creates the tenant or brings its row to t. It writes only when a column differs,
// and reports what it did. Developers are stored sorted: the spec's list is a set.
//
// When the row records another incarnation than t's, it belonged to a deleted Tenant of the same name:
// its keys are revoked and its end users purged first, so the new Tenant inherits none of them. The new
// incarnation is recorded only after the purge, so a purge interrupted half way is resumed next time.
func (s *Store) UpsertTenantFromSpec(ctx context.Context, t TenantRecord) (TenantWrite, error) {
	var out TenantWrite
	devs := slices.Clone(t.Developers)
	if devs == nil {
		devs = []int64{}
	}
	slices.Sort(devs)
	devs = slices.Compact(devs)

	var cur TenantRecord
	var incarnation *string
	err := func() error {
		ctx, cancel := withTimeout(ctx)
		defer cancel()
		return s.pool.QueryRow(ctx,
			`SELECT developer_name, suspended, developers, incarnation,
			        sends_per_second, burst, requests_per_second, delivery_weight FROM tenants WHERE id = $1`, t.ID,
		).Scan(&cur.DeveloperName, &cur.Suspended, &cur.Developers, &incarnation,
			&cur.Limits.SendsPerSecond, &cur.Limits.Burst, &cur.Limits.RequestsPerSecond, &cur.Limits.DeliveryWeight)
	}()
	switch {
	case err == nil:
		if incarnation != nil && t.Incarnation != "" && *incarnation != t.Incarnation {
			revoked, err := s.revokeTenantKeys(ctx, t.ID, false)
			if err != nil {
				return out, err
			}
			purge, err := s.PurgeTenantUsers(ctx, t.ID)
			if err != nil {
				return out, err
			}
			purge.RevokedKeys = revoked
			out.Reincarnated, out.Purge = true, purge
		}
		sameIncarnation := t.Incarnation == "" || (incarnation != nil && *incarnation == t.Incarnation)
		if cur.DeveloperName == t.DeveloperName && cur.Suspended == t.Suspended && slices.Equal(cur.Developers, devs) && sameIncarnation &&
			cur.Limits.Equal(t.Limits) {
			return out, nil
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return out, translate(err, "reading tenant "+t.ID)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var tag pgconn.CommandTag
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, `
INSERT INTO tenants (id, developer_name, suspended, developers, incarnation,
                     sends_per_second, burst, requests_per_second, delivery_weight)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, $8, $9)
ON CONFLICT (id) DO UPDATE
   SET developer_name      = EXCLUDED.developer_name,
       suspended           = EXCLUDED.suspended,
       developers          = EXCLUDED.developers,
       incarnation         = COALESCE(EXCLUDED.incarnation, tenants.incarnation),
       sends_per_second    = EXCLUDED.sends_per_second,
       burst               = EXCLUDED.burst,
       requests_per_second = EXCLUDED.requests_per_second,
       delivery_weight     = EXCLUDED.delivery_weight,
       updated_at          = now()
 WHERE (tenants.developer_name, tenants.suspended, tenants.developers, tenants.incarnation,
        tenants.sends_per_second, tenants.burst, tenants.requests_per_second, tenants.delivery_weight)
       IS DISTINCT FROM (EXCLUDED.developer_name, EXCLUDED.suspended, EXCLUDED.developers,
                         COALESCE(EXCLUDED.incarnation, tenants.incarnation),
                         EXCLUDED.sends_per_second, EXCLUDED.burst, EXCLUDED.requests_per_second, EXCLUDED.delivery_weight)`,
			t.ID, t.DeveloperName, t.Suspended, devs, t.Incarnation,
			t.Limits.SendsPerSecond, t.Limits.Burst, t.Limits.RequestsPerSecond, t.Limits.DeliveryWeight)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		// What the spec sets, as the tenant now has it (the bot has its own event, in SetTenantBot).
		return appendAudit(ctx, tx, t.ID, audit.TenantUpdated, t.ID, map[string]any{
			"developer_name": t.DeveloperName, "suspended": t.Suspended, "limits": limitsDetails(t.Limits), "developers": len(devs)})
	})
	if err != nil {
		return out, translate(err, "upserting tenant "+t.ID)
	}
	out.Wrote = tag.RowsAffected() > 0
	return out, nil
}

// RevokeTenantKeys revokes every key of the tenant, whoever minted it, and suspends the tenant in the same
// transaction, so that a key minted concurrently cannot authenticate either. Upserting the tenant again
// lifts the suspension (the revoked keys stay revoked). It returns how many keys it revoked.
func (s *Store) RevokeTenantKeys(ctx context.Context, tenantID string) (int64, error) {
	return s.revokeTenantKeys(ctx, tenantID, true)
}

func (s *Store) revokeTenantKeys(ctx context.Context, tenantID string, suspend bool) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var revoked int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if suspend {
			tag, err := tx.Exec(ctx,
				`UPDATE tenants SET suspended = true, updated_at = now() WHERE id = $1 AND NOT suspended`, tenantID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() > 0 {
				if err := appendAudit(ctx, tx, tenantID, audit.TenantUpdated, tenantID, map[string]any{"suspended": true}); err != nil {
					return err
				}
			}
		}
		var err error
		revoked, err = revokeKeys(ctx, tx, `tenant_id = $1`, tenantID)
		return err
	})
	if err != nil {
		return 0, translate(err, "revoking the keys of tenant "+tenantID)
	}
	return revoked, nil
}

// PurgeTenantUsers deletes the tenant's end users with their links, link tokens and phone verifications,
// and its idempotency keys, PurgeBatchSize users (or keys) per transaction, then its callback endpoints.
// The tenant row, its keys and its notifications stay: a notification still queued finds no link when a
// worker claims it and ends unlinked. It is safe to run again after an interruption.
func (s *Store) PurgeTenantUsers(ctx context.Context, tenantID string) (TenantPurge, error) {
	var out TenantPurge
	var err error
	if out.Users, err = purgeInBatches(ctx, tenantID, s.purgeUserBatch); err != nil {
		return out, translate(err, "purging the users of tenant "+tenantID)
	}
	if out.IdempotencyKeys, err = purgeInBatches(ctx, tenantID, s.purgeIdempotencyBatch); err != nil {
		return out, translate(err, "purging the idempotency keys of tenant "+tenantID)
	}
	// At most MaxCallbackEndpoints rows; their secrets and events go with them (ON DELETE CASCADE).
	dctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(dctx, `DELETE FROM callback_endpoints WHERE tenant_id = $1`, tenantID)
	if err == nil {
		_, err = s.pool.Exec(dctx, `DELETE FROM callback_inbox WHERE tenant_id = $1`, tenantID)
	}
	if err != nil {
		return out, translate(err, "purging the callback endpoints of tenant "+tenantID)
	}
	out.CallbackEndpoints = tag.RowsAffected()
	// At most one row a template name: a tenant has few.
	err = pgx.BeginFunc(dctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(dctx, `UPDATE template_names SET deleted_at = now() WHERE tenant_id = $1 AND deleted_at IS NULL AND latest_version > 0`, tenantID)
		if err != nil {
			return err
		}
		out.Templates = tag.RowsAffected()
		_, err = tx.Exec(dctx, `DELETE FROM template_versions WHERE tenant_id = $1`, tenantID)
		return err
	})
	if err != nil {
		return out, translate(err, "purging the templates of tenant "+tenantID)
	}
	return out, nil
}

// purgeInBatches runs batch (one transaction each) until a batch deletes fewer than PurgeBatchSize rows, and
// returns how many rows the batches deleted, those before an error included.
func purgeInBatches(ctx context.Context, tenantID string, batch func(context.Context, string) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := batch(ctx, tenantID)
		if err != nil {
			return total, err
		}
		total += n
		if n < PurgeBatchSize {
			return total, nil
		}
	}
}

// purgeUserBatch deletes up to PurgeBatchSize users of the tenant, and what refers to them, in one
// transaction, and returns how many users it deleted.
func (s *Store) purgeUserBatch(ctx context.Context, tenantID string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx,
			`SELECT user_id FROM users WHERE tenant_id = $1 ORDER BY user_id LIMIT $2 FOR UPDATE`, tenantID, PurgeBatchSize)
		if err != nil {
			return err
		}
		users, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(users) == 0 {
			return err
		}
		for _, q := range []string{
			`DELETE FROM link_tokens WHERE tenant_id = $1 AND user_id = ANY($2)`,
			`DELETE FROM phone_verifications WHERE tenant_id = $1 AND user_id = ANY($2)`,
			`DELETE FROM links WHERE tenant_id = $1 AND user_id = ANY($2)`,
		} {
			if _, err := tx.Exec(ctx, q, tenantID, users); err != nil {
				return err
			}
		}
		// Users with a time zone change the tenant's zones (zones.go).
		return tx.QueryRow(ctx, `
			WITH d AS (DELETE FROM users WHERE tenant_id = $1 AND user_id = ANY($2) RETURNING time_zone),
			     `+bumpZonesSQL("$1", "EXISTS (SELECT 1 FROM d WHERE time_zone IS NOT NULL)")+`
			SELECT count(*) FROM d`, tenantID, users).Scan(&n)
	})
	return n, err
}

func (s *Store) purgeIdempotencyBatch(ctx context.Context, tenantID string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
DELETE FROM idempotency_keys
 WHERE tenant_id = $1 AND key IN (SELECT key FROM idempotency_keys WHERE tenant_id = $1 LIMIT $2)`, tenantID, PurgeBatchSize)
	return tag.RowsAffected(), err
}

// CountActiveKeys counts the tenant's keys that are neither disabled, revoked nor expired.
func (s *Store) CountActiveKeys(ctx context.Context, tenantID string) (int, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `
SELECT count(*) FROM api_keys
 WHERE tenant_id = $1 AND NOT disabled AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`,
		tenantID).Scan(&n)
	if err != nil {
		return 0, translate(err, "counting the active keys of tenant "+tenantID)
	}
	return n, nil
}

// KeyState is the part of a key the operator keeps equal to its ApiKey's spec.
type KeyState struct {
	Label     string // "" is stored as NULL: the tenant's developer name brands the messages
	Disabled  bool
	ExpiresAt *time.Time
}

// Equal reports whether two states would be stored identically (timestamps at PostgreSQL's microsecond
// precision).
func (a KeyState) Equal(b KeyState) bool {
	if a.Label != b.Label || a.Disabled != b.Disabled || (a.ExpiresAt == nil) != (b.ExpiresAt == nil) {
		return false
	}
	return a.ExpiresAt == nil || a.ExpiresAt.Truncate(time.Microsecond).Equal(b.ExpiresAt.Truncate(time.Microsecond))
}

// OwnedKey is an unrevoked key of the key store managed by an owner (an ApiKey object).
type OwnedKey struct {
	ID        string
	TenantID  string
	Digest    [32]byte
	Prefix    string
	State     KeyState
	CreatedAt time.Time
}

// NewOwnedKey is a key to insert for an owner.
type NewOwnedKey struct {
	TenantID string
	OwnerRef string
	Digest   [32]byte
	Prefix   string
	State    KeyState
}

// KeysByOwner lists the unrevoked keys of ownerRef, oldest first.
func (s *Store) KeysByOwner(ctx context.Context, ownerRef string) ([]OwnedKey, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
SELECT id::text, tenant_id, digest, prefix, coalesce(label, ''), disabled, expires_at, created_at
  FROM api_keys
 WHERE owner_ref = $1 AND revoked_at IS NULL
 ORDER BY created_at, id`, ownerRef)
	if err != nil {
		return nil, translate(err, "listing the keys of "+ownerRef)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OwnedKey, error) {
		var k OwnedKey
		var digest []byte
		err := row.Scan(&k.ID, &k.TenantID, &digest, &k.Prefix, &k.State.Label, &k.State.Disabled, &k.State.ExpiresAt, &k.CreatedAt)
		copy(k.Digest[:], digest)
		return k, err
	})
	if err != nil {
		return nil, translate(err, "listing the keys of "+ownerRef)
	}
	return keys, nil
}

// MintOwnedKey inserts a new key and, in the same transaction, revokes the keys revokeIDs and gives the
// keys retireIDs an expiry of retireAt at the latest (their rotation grace period).
func (s *Store) MintOwnedKey(ctx context.Context, k NewOwnedKey, revokeIDs, retireIDs []string, retireAt time.Time) (OwnedKey, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	out := OwnedKey{TenantID: k.TenantID, Digest: k.Digest, Prefix: k.Prefix, State: k.State}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(revokeIDs) > 0 {
			if _, err := revokeKeys(ctx, tx, `id = ANY($1::uuid[])`, revokeIDs); err != nil {
				return err
			}
		}
		if len(retireIDs) > 0 {
			// LEAST ignores NULL: a key without expiry gets retireAt, an earlier expiry is kept.
			if _, err := tx.Exec(ctx, `
UPDATE api_keys SET expires_at = LEAST(expires_at, $2), updated_at = now()
 WHERE id = ANY($1::uuid[]) AND revoked_at IS NULL AND expires_at IS DISTINCT FROM LEAST(expires_at, $2)`,
				retireIDs, retireAt); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, `
WITH k AS (
	INSERT INTO api_keys (tenant_id, digest, prefix, label, owner_ref, disabled, expires_at)
	VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7)
	RETURNING id, tenant_id, label, created_at),
`+auditSQL("audited", audit.APIKeyCreated, "$8", keyAuditSrc("k"))+`
SELECT id::text, created_at FROM k`,
			k.TenantID, k.Digest[:], k.Prefix, k.State.Label, k.OwnerRef, k.State.Disabled, k.State.ExpiresAt, audit.ActorOf(ctx),
		).Scan(&out.ID, &out.CreatedAt)
	})
	if err != nil {
		return OwnedKey{}, translate(err, "minting a key for "+k.OwnerRef)
	}
	return out, nil
}

// SetKeyState brings an unrevoked key to state, writing only when a column differs, and reports whether
// it wrote.
func (s *Store) SetKeyState(ctx context.Context, id string, state KeyState) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `
UPDATE api_keys
   SET label = NULLIF($2::text, ''), disabled = $3, expires_at = $4, updated_at = now()
 WHERE id = $1::uuid AND revoked_at IS NULL
   AND (label, disabled, expires_at) IS DISTINCT FROM (NULLIF($2::text, ''), $3::boolean, $4::timestamptz)`,
		id, state.Label, state.Disabled, state.ExpiresAt)
	if err != nil {
		return false, translate(err, "updating key "+id)
	}
	return tag.RowsAffected() > 0, nil
}

// RevokeKeys revokes the given keys; already revoked ones are left alone.
func (s *Store) RevokeKeys(ctx context.Context, ids []string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	n, err := revokeKeys(ctx, s.pool, `id = ANY($1::uuid[])`, ids)
	return n, translate(err, "revoking keys")
}

// RevokeOwnerKeys revokes every unrevoked key of ownerRef and returns how many it revoked.
func (s *Store) RevokeOwnerKeys(ctx context.Context, ownerRef string) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	n, err := revokeKeys(ctx, s.pool, `owner_ref = $1`, ownerRef)
	return n, translate(err, "revoking the keys of "+ownerRef)
}

// OperatorKey is an unrevoked key some ApiKey object manages (owner_ref "k8s:…"), as the orphan sweep of
// the operator looks at it.
type OperatorKey struct {
	ID       string
	OwnerRef string
	TenantID string
	Prefix   string
}

// OperatorKeys lists the unrevoked keys whose owner_ref the operator writes ("k8s:" prefix). Keys made
// with the admin CLI (owner_ref NULL) are never among them.
func (s *Store) OperatorKeys(ctx context.Context) ([]OperatorKey, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
SELECT id::text, owner_ref, tenant_id, prefix
  FROM api_keys
 WHERE owner_ref IS NOT NULL AND starts_with(owner_ref, 'k8s:') AND revoked_at IS NULL
 ORDER BY owner_ref, created_at, id`)
	if err != nil {
		return nil, translate(err, "listing the operator's keys")
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[OperatorKey])
	if err != nil {
		return nil, translate(err, "listing the operator's keys")
	}
	return keys, nil
}
