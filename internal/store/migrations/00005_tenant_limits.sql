-- +goose Up

-- Per-tenant limits (the Tenant resource's spec.limits, or `herald tenant update`). NULL: the
-- installation's default (the ingress's HERALD_TENANT_* settings; a delivery weight of 1).
ALTER TABLE tenants
    ADD COLUMN sends_per_second    integer CHECK (sends_per_second > 0),
    ADD COLUMN burst               integer CHECK (burst > 0),
    ADD COLUMN requests_per_second integer CHECK (requests_per_second > 0),
    ADD COLUMN delivery_weight     integer CHECK (delivery_weight BETWEEN 1 AND 100);

-- The central token buckets every ingress replica leases from (internal/ratelimit): one GCRA state per
-- tenant and kind of request ('sends', 'requests'). tat is the bucket's theoretical arrival time, at the
-- rate it was last leased under (a changed limit rescales what is owed).
CREATE TABLE rate_buckets (
    tenant_id text NOT NULL,
    kind      text NOT NULL,
    tat       timestamptz NOT NULL,
    rate      float8 NOT NULL,
    PRIMARY KEY (tenant_id, kind)
);

-- Requests refused over a tenant's limits, per minute, for /dev_stats (the ingress adds its counts now and
-- then; rows older than a day are dropped as new ones come).
CREATE TABLE rate_refusals (
    tenant_id text NOT NULL,
    kind      text NOT NULL,
    minute    timestamptz NOT NULL,
    count     bigint NOT NULL,
    PRIMARY KEY (tenant_id, kind, minute)
);

-- +goose Down
DROP TABLE rate_refusals;
DROP TABLE rate_buckets;
ALTER TABLE tenants DROP COLUMN sends_per_second, DROP COLUMN burst, DROP COLUMN requests_per_second,
    DROP COLUMN delivery_weight;
