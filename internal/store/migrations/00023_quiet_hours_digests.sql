-- +goose Up

-- Quiet hours (spec v1-extensions §14). As in 00014, 00016, 00018 and 00020, changes to existing tables are
-- in the catalogue only: nullable columns without a default, which rewrite nothing. The lock timeout makes
-- the migration fail (to be run again) rather than hold up the sends queued behind it.
SET LOCAL lock_timeout = '10s';

-- A tenant's quiet hours: the daily window [quiet_start, quiet_end) in minutes since midnight (it wraps
-- midnight when start > end), read in the user's time_zone or else in quiet_zone (an IANA name, validated
-- by the operator's CEL and the admin CLI), and what happens inside it. All four or none.
ALTER TABLE tenants
    ADD COLUMN quiet_start smallint CHECK (quiet_start BETWEEN 0 AND 1439),
    ADD COLUMN quiet_end   smallint CHECK (quiet_end BETWEEN 0 AND 1439),
    ADD COLUMN quiet_zone  text,
    ADD COLUMN quiet_mode  text CHECK (quiet_mode IN ('hold', 'silent')),
    ADD CONSTRAINT tenants_quiet_hours_whole CHECK (
        (quiet_start IS NULL) = (quiet_end IS NULL) AND (quiet_start IS NULL) = (quiet_zone IS NULL)
        AND (quiet_start IS NULL) = (quiet_mode IS NULL) AND (quiet_start IS NULL OR quiet_start <> quiet_end));

-- A send's quiet_hours option, resolved at acceptance ("ignore" given, or its default at priority 7 and
-- above): true ignores the tenant's quiet hours; NULL respects them (most rows: nothing stored).
ALTER TABLE notifications ADD COLUMN quiet_ignore boolean;

-- Digests (§14): the notifications with one tenant, user and key accepted within a window of the first are
-- delivered as one message. A digest is open (items join it) until its window ends, its max_items is
-- reached, or a worker gathers its items to send them; the partial unique index keeps at most one open
-- digest per key, so concurrent sends (from any ingress replica) never open two: the second waits on the
-- first's row (INSERT … ON CONFLICT) and joins it, and one that comes after a worker closed it opens the
-- next (store.JoinDigests, GatherDigest). format: the format its items share ('' for text).
CREATE TABLE digests (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id text        NOT NULL,
    user_id   text        NOT NULL,
    key       text        NOT NULL CHECK (key ~ '^[A-Za-z0-9_.:-]{1,64}$'),
    format    text        NOT NULL,
    max_items smallint    NOT NULL CHECK (max_items BETWEEN 2 AND 50),
    items     smallint    NOT NULL CHECK (items >= 1),
    opened_at timestamptz NOT NULL DEFAULT now(),
    closes_at timestamptz NOT NULL,
    open      boolean     NOT NULL DEFAULT true
);
CREATE UNIQUE INDEX digests_open_idx ON digests (tenant_id, user_id, key) WHERE open;
CREATE INDEX digests_closed_idx ON digests (closes_at) WHERE NOT open;

-- The items of a digest, in the order accepted (position from 1). Their own table, not a column of
-- notifications: a digest's items are found by its id without an index on the large table.
CREATE TABLE digest_items (
    tracking_id uuid     PRIMARY KEY,
    digest_id   bigint   NOT NULL REFERENCES digests (id) ON DELETE CASCADE,
    position    smallint NOT NULL,
    UNIQUE (digest_id, position)
);

-- The resource's digest_key (the send's) and digest_size (the items of the message it went in, set when a
-- worker gathers them).
ALTER TABLE notifications
    ADD COLUMN digest_key  text,
    ADD COLUMN digest_size smallint;

-- +goose Down
ALTER TABLE notifications DROP COLUMN digest_key, DROP COLUMN digest_size;
DROP TABLE digest_items;
DROP TABLE digests;
ALTER TABLE notifications DROP COLUMN quiet_ignore;
ALTER TABLE tenants
    DROP CONSTRAINT tenants_quiet_hours_whole,
    DROP COLUMN quiet_start,
    DROP COLUMN quiet_end,
    DROP COLUMN quiet_zone,
    DROP COLUMN quiet_mode;
