-- +goose Up

-- Issue 39, v1 extensions §15: what each tenant sent, counted per UTC hour in the statement that makes the
-- change (store.countUsage): the insert of a send counts it accepted, the statement that moves a
-- notification to a terminal state counts it there (internal/usage maps the states to the columns). The
-- counts outlive the notifications, which retention purges, and are themselves purged after 400 days
-- (store.PurgeUsage). shard spreads one tenant's hour over a few rows — each statement picks one at random
-- — so that concurrent statements of a busy tenant do not queue on one row; a reader sums them.
-- edited stays 0 until replace after send (§13) counts its edits. integer: a row is one shard of one tenant's
-- hour (2^31 is 600,000 a second for the hour); its sums are bigint, and integers sum faster than bigints.
CREATE TABLE usage_counts (
    tenant_id      text        NOT NULL,
    hour           timestamptz NOT NULL,
    shard          smallint    NOT NULL,
    accepted       integer     NOT NULL DEFAULT 0,
    delivered      integer     NOT NULL DEFAULT 0,
    failed         integer     NOT NULL DEFAULT 0,
    blocked        integer     NOT NULL DEFAULT 0,
    expired        integer     NOT NULL DEFAULT 0,
    cancelled      integer     NOT NULL DEFAULT 0,
    unlinked       integer     NOT NULL DEFAULT 0,
    edited         integer     NOT NULL DEFAULT 0,
    paid_broadcast integer     NOT NULL DEFAULT 0,
    -- The counts ride in the key's index, so that a reader's range of one tenant is an index-only scan
    -- (one tenant's hours lie on as many heap pages as it has rows: they are written an hour apart, among
    -- every other tenant's). An update is then never HOT; the statement that counts makes one per tenant.
    PRIMARY KEY (tenant_id, hour, shard)
        INCLUDE (accepted, delivered, failed, blocked, expired, cancelled, unlinked, edited, paid_broadcast)
);

-- The purge (oldest first) and herald usage across every tenant read by hour; rows are written in the
-- order of their hour, which is what a BRIN index summarises, at a fraction of a btree's cost per write.
CREATE INDEX usage_counts_hour_idx ON usage_counts USING brin (hour);

-- +goose Down
DROP TABLE usage_counts;
