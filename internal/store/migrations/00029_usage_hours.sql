-- +goose Up

-- Issue 39, v1 extensions §15: the settled hours' counts in a table of their own, one row per tenant and
-- hour with anything counted. usage_counts keeps only the hours still written (spread over 8 shards each,
-- against row-lock contention); the retention pass (purge kind usage_shards, store.usageFoldRule) moves an
-- hour's shards here once the hour is settled, summed, and deletes them. Folding into usage_counts' own
-- shard 0, as before, left a tenant's 9,600 hours of 400 days on the pages its 76,800 shard entries had
-- filled (1,416 index pages for 100 tenants, bench-usage); here they are written once, in the order of the
-- key within each tenant, so a tenant's 400 days are about a hundred dense index pages, read in the key's
-- order with no grouping. A late count of a folded hour (a statement that began before the hour ended)
-- re-creates its shard in usage_counts, and the next fold adds it here (ON CONFLICT … DO UPDATE).
CREATE TABLE usage_hours (
    tenant_id      text        NOT NULL,
    hour           timestamptz NOT NULL,
    accepted       integer     NOT NULL DEFAULT 0,
    delivered      integer     NOT NULL DEFAULT 0,
    failed         integer     NOT NULL DEFAULT 0,
    blocked        integer     NOT NULL DEFAULT 0,
    expired        integer     NOT NULL DEFAULT 0,
    cancelled      integer     NOT NULL DEFAULT 0,
    unlinked       integer     NOT NULL DEFAULT 0,
    edited         integer     NOT NULL DEFAULT 0,
    paid_broadcast integer     NOT NULL DEFAULT 0,
    -- As usage_counts': the counts ride in the key's index, so a reader's range is an index-only scan.
    PRIMARY KEY (tenant_id, hour)
        INCLUDE (accepted, delivered, failed, blocked, expired, cancelled, unlinked, edited, paid_broadcast)
);

-- The purge (oldest first) and herald usage across every tenant read by hour; the fold writes the rows in
-- the order of their hour.
CREATE INDEX usage_hours_hour_idx ON usage_hours USING brin (hour);

-- The hours settled when this runs (usage.SettleAfter, 2 hours after the hour began), moved and summed;
-- the hours still written stay in their shards.
INSERT INTO usage_hours (tenant_id, hour, accepted, delivered, failed, blocked, expired, cancelled, unlinked,
                         edited, paid_broadcast)
SELECT tenant_id, hour, sum(accepted), sum(delivered), sum(failed), sum(blocked), sum(expired), sum(cancelled),
       sum(unlinked), sum(edited), sum(paid_broadcast)
FROM usage_counts WHERE hour < now() - interval '2 hours'
GROUP BY 1, 2 ORDER BY 2, 1;
DELETE FROM usage_counts WHERE hour < now() - interval '2 hours';

-- usage_counts now holds a few hours; the fold finds every row of a settled hour (shard 0 too) by hour.
DROP INDEX usage_counts_shards_idx;
DROP INDEX usage_counts_hour_idx;
CREATE INDEX usage_counts_hour_idx ON usage_counts (hour);

-- +goose Down
-- The settled hours go back to usage_counts as shard 0 (where the fold of 00027 kept them).
DROP INDEX usage_counts_hour_idx;
INSERT INTO usage_counts AS u (tenant_id, hour, shard, accepted, delivered, failed, blocked, expired, cancelled,
                               unlinked, edited, paid_broadcast)
SELECT tenant_id, hour, 0, accepted, delivered, failed, blocked, expired, cancelled, unlinked, edited,
       paid_broadcast
FROM usage_hours ORDER BY hour, tenant_id
ON CONFLICT (tenant_id, hour, shard) DO UPDATE SET
    accepted = u.accepted + EXCLUDED.accepted, delivered = u.delivered + EXCLUDED.delivered,
    failed = u.failed + EXCLUDED.failed, blocked = u.blocked + EXCLUDED.blocked,
    expired = u.expired + EXCLUDED.expired, cancelled = u.cancelled + EXCLUDED.cancelled,
    unlinked = u.unlinked + EXCLUDED.unlinked, edited = u.edited + EXCLUDED.edited,
    paid_broadcast = u.paid_broadcast + EXCLUDED.paid_broadcast;
DROP TABLE usage_hours;
CREATE INDEX usage_counts_hour_idx ON usage_counts USING brin (hour);
CREATE INDEX usage_counts_shards_idx ON usage_counts (hour) WHERE shard <> 0;
