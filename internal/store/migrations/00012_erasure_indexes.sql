-- +goose NO TRANSACTION
-- +goose Up

-- The erasure of a user (DELETE /v1/users/{user_id}, store.EraseUser) finds the user's callback events and
-- the tenant's system messages to the user's chat through these, instead of reading the whole tables in
-- the erasure's transaction. Each is partial: only user.* events carry a user id, and system messages are
-- few beside tenant notifications, so the hot paths (a notification's events, a send) write no entry.
-- CONCURRENTLY: sends and callbacks must not stop while they build on large tables.
CREATE INDEX CONCURRENTLY IF NOT EXISTS callback_events_user_idx ON callback_events (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS callback_inbox_user_idx ON callback_inbox (tenant_id, user_id) WHERE user_id IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_system_chat_idx ON notifications (tenant_id, chat_id) WHERE kind = 'system';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notifications_system_chat_idx;
DROP INDEX CONCURRENTLY IF EXISTS callback_inbox_user_idx;
DROP INDEX CONCURRENTLY IF EXISTS callback_events_user_idx;
