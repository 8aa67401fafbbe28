-- +goose Up

-- Tenants: the third-party applications. developer_name is the branding fallback; developers are the
-- messenger user ids allowed the /dev_* commands for this tenant.
CREATE TABLE tenants (
    id             text PRIMARY KEY,
    developer_name text NOT NULL,
    suspended      boolean NOT NULL DEFAULT false,
    developers     bigint[] NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- API keys: only the SHA-256 digest of the key is stored; prefix is the first characters, for humans.
-- owner_ref names whatever manages the key (for example "k8s:<namespace>/<name>" for the operator, NULL
-- for keys created with the admin CLI).
CREATE TABLE api_keys (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id  text NOT NULL REFERENCES tenants (id),
    digest     bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
    prefix     text NOT NULL,
    label      text,
    owner_ref  text,
    disabled   boolean NOT NULL DEFAULT false,
    expires_at timestamptz,
    revoked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);
CREATE INDEX api_keys_owner_idx ON api_keys (owner_ref) WHERE owner_ref IS NOT NULL;

-- Users exist for a tenant once the tenant asked for a link token for them.
CREATE TABLE users (
    tenant_id  text NOT NULL REFERENCES tenants (id),
    user_id    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- The link between a tenant's user and a messenger account/chat.
CREATE TABLE links (
    tenant_id         text NOT NULL,
    user_id           text NOT NULL,
    messenger_user_id bigint NOT NULL,
    chat_id           bigint NOT NULL,
    linked_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id)
);
CREATE INDEX links_messenger_user_idx ON links (messenger_user_id);

-- One-time link tokens, stored as SHA-256 digests with a snapshot of the branding label.
CREATE TABLE link_tokens (
    digest     bytea PRIMARY KEY CHECK (length(digest) = 32),
    tenant_id  text NOT NULL,
    user_id    text NOT NULL,
    label      text NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id)
);
CREATE INDEX link_tokens_expires_idx ON link_tokens (expires_at);

-- Phone verification per tenant user. The phone is kept as its last four digits and an HMAC-SHA256 of the
-- E.164 number, never in clear. label is the branding snapshot taken when the session started.
CREATE TABLE phone_verifications (
    tenant_id          text NOT NULL,
    user_id            text NOT NULL,
    status             text NOT NULL CHECK (status IN ('unverified', 'pending', 'verified')),
    session_expires_at timestamptz,
    label              text,
    phone_last4        text,
    phone_hash         bytea,
    verified_at        timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id)
);

-- Notifications: tenant notifications (kind 'tenant') and the system messages Herald itself sends to end
-- users (kind 'system': link confirmations, verification prompts, webhook replies). body is the branded
-- snapshot; the API never returns it. A tenant notification is addressed by (tenant_id, user_id) and its
-- chat resolved at delivery time; a system message carries its chat_id.
CREATE TABLE notifications (
    tracking_id          uuid PRIMARY KEY,
    kind                 text NOT NULL CHECK (kind IN ('tenant', 'system')),
    tenant_id            text REFERENCES tenants (id),
    user_id              text,
    chat_id              bigint,
    priority             smallint NOT NULL CHECK (priority BETWEEN 0 AND 9),
    body                 text NOT NULL,
    reply_markup         jsonb,
    status               text NOT NULL CHECK (status IN ('queued', 'delivering', 'delivered', 'retrying', 'blocked', 'failed', 'unlinked')),
    attempts             integer NOT NULL DEFAULT 0,
    next_attempt_at      timestamptz,
    lease_expires_at     timestamptz,
    messenger_message_id text,
    last_error_code      integer NOT NULL DEFAULT 0,
    last_error_message   text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (kind = 'system' OR (tenant_id IS NOT NULL AND user_id IS NOT NULL)),
    CHECK (kind = 'tenant' OR chat_id IS NOT NULL)
);
CREATE INDEX notifications_tenant_created_idx ON notifications (tenant_id, created_at);
CREATE INDEX notifications_retry_due_idx ON notifications (next_attempt_at) WHERE status = 'retrying';
CREATE INDEX notifications_inflight_idx ON notifications (updated_at) WHERE status IN ('queued', 'delivering');

-- Idempotency-Key records for POST /v1/send, kept 24 hours.
CREATE TABLE idempotency_keys (
    tenant_id    text NOT NULL REFERENCES tenants (id),
    key          text NOT NULL,
    request_hash bytea NOT NULL,
    tracking_id  uuid NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

-- Messenger updates already handled, so a redelivered update_id takes effect at most once.
CREATE TABLE processed_updates (
    update_id    bigint PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE processed_updates;
DROP TABLE idempotency_keys;
DROP TABLE notifications;
DROP TABLE phone_verifications;
DROP TABLE link_tokens;
DROP TABLE links;
DROP TABLE users;
DROP TABLE api_keys;
DROP TABLE tenants;
