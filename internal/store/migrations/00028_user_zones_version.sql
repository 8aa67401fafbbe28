-- +goose Up

-- The ingress keeps, per tenant, the time zones of the tenant's users that have one (the date filter of a
-- template renders in them, spec v1-extensions §12), and asks PostgreSQL at most once a second whether they
-- changed: user_zones_version is bumped in the same transaction as every change of a users.time_zone of the
-- tenant (store.SetUserSettings, EraseUser, PurgeTenantUsers), so that one tiny read answers the question
-- (internal/ingress/zonecache.go).
ALTER TABLE tenants ADD COLUMN user_zones_version bigint NOT NULL DEFAULT 0;

-- The reload of a tenant's zoned users reads only them, however many users the tenant has: most have none.
CREATE INDEX users_zoned_idx ON users (tenant_id, user_id) INCLUDE (time_zone) WHERE time_zone IS NOT NULL;

-- +goose Down
SET LOCAL lock_timeout = '10s';
DROP INDEX users_zoned_idx;
ALTER TABLE tenants DROP COLUMN user_zones_version;
