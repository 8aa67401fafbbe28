-- +goose Up

-- Issue 39, v1 extensions §15: what each tenant sent, counted per UTC hour in the statement that makes the
-- change (store.countUsage): the insert of a send counts it accepted, the statement that moves a
-- notification to a terminal state counts it there (internal/usage maps the states to the columns). The
-- counts outlive the notifications, which retention purges, and are themselves purged after 400 days
-- (store.PurgeUsage). shard spreads one tenant's hour over a few rows — each statement picks one at random
-- — so that concurrent statements of a busy tenant do not queue on one row; a reader sums them.
-- edited stays 0 until replace after send (§13) counts its edits.
CREATE TABLE usage_counts (
    tenant_id      text        NOT NULL,
    hour           timestamptz NOT NULL,
    shard          smallint    NOT NULL,
    accepted       bigint      NOT NULL DEFAULT 0,
    delivered      bigint      NOT NULL DEFAULT 0,
    failed         bigint      NOT NULL DEFAULT 0,
    blocked        bigint      NOT NULL DEFAULT 0,
    expired        bigint      NOT NULL DEFAULT 0,
    cancelled      bigint      NOT NULL DEFAULT 0,
    unlinked       bigint      NOT NULL DEFAULT 0,
    edited         bigint      NOT NULL DEFAULT 0,
    paid_broadcast bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, hour, shard)
);

-- The purge (oldest first) and herald usage across every tenant read by hour.
CREATE INDEX usage_counts_hour_idx ON usage_counts (hour);

-- +goose Down
DROP TABLE usage_counts;
