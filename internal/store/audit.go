package store

// The audit trail (v1 extensions §15): every change to what a tenant configures or holds appends its event
// in the transaction of the change (appendAudit, or the auditSQL CTE inside the change's one statement),
// with the actor its context carries (audit.ActorOf): a change that rolls back leaves no event, and one
// that commits always has its event. Append-only; purged 400 days after (PurgeAuditEvents).

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
)

// appendAudit appends events of type typ, each (tenant, target, details), with ctx's actor, through q (the
// transaction of the change).
func appendAudit(ctx context.Context, q querier, tenantID string, typ audit.Type, target string, details map[string]any) error {
	if details == nil {
		details = map[string]any{}
	}
	d, err := json.Marshal(details)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO audit_events (tenant_id, type, actor, target, details) VALUES ($1, $2, $3, $4, $5::jsonb)`,
		tenantID, typ, audit.ActorOf(ctx), target, string(d))
	return translate(err, "appending audit event "+string(typ))
}

// auditSQL is a CTE, name, that appends an event of each row of src (a FROM clause with tenant_id, target,
// details: jsonb), of type typ, by actor (a SQL expression: a parameter, or a CASE over src's columns), in the
// statement of the change.
func auditSQL(name string, typ audit.Type, actor, src string) string {
	return name + ` AS (
		INSERT INTO audit_events (tenant_id, type, actor, target, details)
		SELECT tenant_id, '` + string(typ) + `', ` + actor + `, target, details FROM ` + src + `)`
}

// AuditCursor is the position after the last event of a page.
type AuditCursor struct{ ID int64 }

// auditFingerprint binds a cursor to its types.
func auditFingerprint(types []audit.Type) []byte {
	h := sha256.Sum256([]byte(strings.Join(typeNames(types), ",")))
	return h[:6]
}

func typeNames(types []audit.Type) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = string(t)
	}
	return out
}

// Encode renders the cursor for types, opaque.
func (c AuditCursor) Encode(types []audit.Type) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(c.ID))
	return base64.RawURLEncoding.EncodeToString(append(b, auditFingerprint(types)...))
}

// DecodeAuditCursor reads a cursor Encode made for the same types.
func DecodeAuditCursor(s string, types []audit.Type) (AuditCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 14 || string(b[8:]) != string(auditFingerprint(types)) || binary.BigEndian.Uint64(b[:8]) > 1<<63-1 {
		return AuditCursor{}, errors.New("not a cursor of a listing with these filters")
	}
	return AuditCursor{ID: int64(binary.BigEndian.Uint64(b[:8]))}, nil
}

// AuditEvents returns up to limit events of a tenant ("": every tenant), of types (none: every type),
// newest first, after the cursor, and the cursor of the next page (nil on the last).
func (s *Store) AuditEvents(ctx context.Context, tenantID string, types []audit.Type, limit int, after *AuditCursor) ([]audit.Event, *AuditCursor, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var before int64 = 1<<63 - 1
	if after != nil {
		before = after.ID
	}
	// The filters are spelled out, not "($1 = '' OR tenant_id = $1)": a plan cached for one caller must
	// still read the tenant's (and type's) index for the next (audit_events_tenant_idx, _tenant_type_idx).
	where, args := []string{`id < $1`}, []any{before}
	if tenantID != "" {
		args = append(args, tenantID)
		where = append(where, `tenant_id = $`+strconv.Itoa(len(args)))
	}
	if len(types) > 0 {
		args = append(args, typeNames(types))
		where = append(where, `type = ANY ($`+strconv.Itoa(len(args))+`::text[])`)
	}
	args = append(args, limit+1)
	rows, err := s.pool.Query(ctx, `
		SELECT id, tenant_id, type, actor, target, at, details FROM audit_events
		WHERE `+strings.Join(where, ` AND `)+`
		ORDER BY id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, nil, translate(err, "listing audit events")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (audit.Event, error) {
		var e audit.Event
		err := r.Scan(&e.ID, &e.TenantID, &e.Type, &e.Actor, &e.Target, &e.At, &e.Details)
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, nil, translate(err, "listing audit events")
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	return out, &AuditCursor{ID: out[limit-1].ID}, nil
}

// auditPurgeRule deletes the events older than audit.Retention.
var auditPurgeRule = purgeRule{
	purge: `DELETE FROM audit_events WHERE id IN (
		SELECT id FROM audit_events WHERE at < now() - $1::interval ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	oldest: `SELECT min(at) + $1::interval FROM audit_events WHERE at < now() - $1::interval`,
	age:    func(RetentionPolicy) time.Duration { return audit.Retention },
}
