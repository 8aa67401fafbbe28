-- +goose NO TRANSACTION
-- +goose Up

-- incarnation: the metadata.uid of the Tenant object the operator last wrote the row for. A Tenant deleted
-- and re-created under the same name is a new incarnation: the operator then revokes the keys and purges
-- the end-user data of the old one before the new one is used. NULL: a row made with the admin CLI or
-- before this column existed; the operator adopts it without purging.
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS incarnation text;

-- Purging a tenant deletes its users in batches; every deleted user is checked against link_tokens (a
-- foreign key), which had no index on the user. CONCURRENTLY: the table is never pruned and may be large,
-- and link token creation must not stop while the index builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS link_tokens_user_idx ON link_tokens (tenant_id, user_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS link_tokens_user_idx;
ALTER TABLE tenants DROP COLUMN IF EXISTS incarnation;
