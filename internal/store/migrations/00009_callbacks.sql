-- +goose Up

-- Status callbacks (docs/callbacks.md): the URLs a tenant has events pushed to, at most 5 per tenant.
-- events lists the event types the endpoint receives. last_success_at, last_failure_at and
-- consecutive_failures are written by the sender (internal/callback) after its attempts.
CREATE TABLE callback_endpoints (
    id                   uuid PRIMARY KEY,
    tenant_id            text NOT NULL REFERENCES tenants (id),
    url                  text NOT NULL,
    events               text[] NOT NULL CHECK (cardinality(events) > 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    last_success_at      timestamptz,
    last_failure_at      timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0
);
CREATE INDEX callback_endpoints_tenant_idx ON callback_endpoints (tenant_id);

-- The secrets an endpoint's requests are signed with, sealed with AES-256-GCM under
-- HERALD_CALLBACK_SECRET_KEY (the endpoint id is the additional data), so a dump of the database alone
-- cannot forge a signature. The current secret has no expiry; a rotated-out one signs beside it until
-- expires_at (24 hours after the rotation).
CREATE TABLE callback_secrets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id uuid NOT NULL REFERENCES callback_endpoints (id) ON DELETE CASCADE,
    sealed      bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);
CREATE UNIQUE INDEX callback_secrets_current_idx ON callback_secrets (endpoint_id) WHERE expires_at IS NULL;
CREATE INDEX callback_secrets_endpoint_idx ON callback_secrets (endpoint_id);

-- The inbox of callback events: the statement of a change records its events here (store.emitEvents), in
-- the change's transaction — one narrow row per event however many endpoints will receive it, and no
-- foreign key, so the delivery path pays little. Only tenants with a subscribed endpoint get rows. The
-- sender moves rows from here into callback_events, one per subscribed endpoint, in one statement
-- (DispatchCallbackEvents). event_id is the webhook-id: one per event, the same for every endpoint and
-- every retry.
CREATE TABLE callback_inbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id    uuid NOT NULL DEFAULT gen_random_uuid(),
    tenant_id   text NOT NULL,
    type        text NOT NULL,
    tracking_id uuid,
    user_id     text,
    created_at  timestamptz NOT NULL
);

-- The outbox of callbacks proper: one row per event and endpoint, sent by the sender, which claims due
-- rows with SKIP LOCKED. created_at is the
-- event's timestamp. A claim sets leased_until (and moves next_attempt_at past it, so a sender that dies
-- mid-send leaves the row due again when the lease ends) and counts the attempt; the result write is
-- guarded by that count. payload keeps the body rendered at the first attempt while the event is retried,
-- so every retry sends the same bytes. delivered and dropped rows are kept until the retention purge
-- (PurgeCallbackEvents).
CREATE TABLE callback_events (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        uuid NOT NULL,
    endpoint_id     uuid NOT NULL REFERENCES callback_endpoints (id) ON DELETE CASCADE,
    type            text NOT NULL,
    tracking_id     uuid,
    user_id         text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dropped')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    leased_until    timestamptz,
    payload         bytea,
    last_status     integer,
    last_error      text,
    finished_at     timestamptz
);
-- The sender's claim: an endpoint's due events, oldest first.
CREATE INDEX callback_events_due_idx ON callback_events (endpoint_id, next_attempt_at) WHERE state = 'pending';
-- The per-endpoint bound on attempts in flight counts the rows under a lease.
CREATE INDEX callback_events_leased_idx ON callback_events (endpoint_id, leased_until) WHERE leased_until IS NOT NULL;
-- The retention purge: finished rows by age.
CREATE INDEX callback_events_finished_idx ON callback_events (finished_at) WHERE state <> 'pending';

-- +goose Down
DROP TABLE callback_events;
DROP TABLE callback_inbox;
DROP TABLE callback_secrets;
DROP TABLE callback_endpoints;
