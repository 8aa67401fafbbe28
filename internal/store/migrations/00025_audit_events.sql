-- +goose Up

-- Issue 39, v1 extensions §15: who changed what a tenant configures or holds, appended in the transaction
-- of the change (store.appendAudit, store.auditSQL), never updated; purged 400 days after it was made (store.PurgeAuditEvents).
-- details names what changed, never a secret, a token, a phone number or a message body. No foreign key: the
-- events outlive the tenant's deletion.
CREATE TABLE audit_events (
    id        bigserial   PRIMARY KEY,
    tenant_id text        NOT NULL,
    -- audit.Types (TestStatesMatchTheSchema holds the two lists equal).
    type      text        NOT NULL CHECK (type IN ('api_key.created', 'api_key.revoked', 'tenant.updated',
                                                  'callback.created', 'callback.deleted', 'callback.secret_rotated',
                                                  'template.saved', 'template.deleted',
                                                  'user.opted_out', 'user.opted_in', 'user.erased')),
    -- "api_key:<key id>", "operator", "admin_cli", "user" (and "unknown": a store call no path named).
    actor     text        NOT NULL CHECK (actor IN ('operator', 'admin_cli', 'user', 'unknown') OR actor LIKE 'api_key:%'),
    target    text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    details   jsonb       NOT NULL DEFAULT '{}'
);

-- GET /v1/audit-events, newest first, with or without a type.
CREATE INDEX audit_events_tenant_idx ON audit_events (tenant_id, id DESC);
CREATE INDEX audit_events_tenant_type_idx ON audit_events (tenant_id, type, id DESC);
-- The purge, oldest first; rows are written in the order of at.
CREATE INDEX audit_events_at_idx ON audit_events USING brin (at);

-- +goose Down
DROP TABLE audit_events;
