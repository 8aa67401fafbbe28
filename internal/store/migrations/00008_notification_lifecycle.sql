-- +goose Up

-- The notification lifecycle for tenants (v1 extensions §1-§6): scheduled sends, expiry, cancellation,
-- metadata, listing. Every new column is nullable without a default, so adding it rewrites nothing, and a
-- send that uses none of the new fields stores NULLs only (no more bytes than before: the row's null
-- bitmap already has room).
--   metadata     the tenant's string → string map as given; NULL when none (the API answers {}).
--   send_at      when a scheduled notification is due (also kept, as given, when it was already due).
--   expires_at   after it, no attempt starts: the notification becomes expired.
--   delivered_at when the platform accepted it.
ALTER TABLE notifications
    ADD COLUMN metadata     jsonb,
    ADD COLUMN send_at      timestamptz,
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN delivered_at timestamptz;

-- The new states: scheduled (waiting in PostgreSQL for send_at, not on Kafka), cancelled, expired. The list
-- is store.Statuses (a test compares them). NOT VALID then VALIDATE: the check of existing rows does not
-- hold the table's exclusive lock.
ALTER TABLE notifications DROP CONSTRAINT notifications_status_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_status_check CHECK (status IN (
    'scheduled', 'queued', 'delivering', 'delivered', 'retrying', 'blocked', 'failed', 'unlinked', 'cancelled', 'expired')) NOT VALID;
ALTER TABLE notifications VALIDATE CONSTRAINT notifications_status_check;

-- The scheduler's rows: only scheduled ones, so a send that is not scheduled writes no entry here, and a
-- backlog of scheduled rows costs the hot path nothing.
CREATE INDEX notifications_scheduled_idx ON notifications (send_at) WHERE status = 'scheduled';

-- The expiry sweep's rows: only notifications that carry an expires_at and are not terminal. A send
-- without expires_at writes no entry here.
CREATE INDEX notifications_expiry_idx ON notifications (expires_at)
    WHERE expires_at IS NOT NULL AND status IN ('scheduled', 'queued', 'retrying', 'delivering');

-- GET /v1/notifications walks one tenant's notifications newest first, by the keyset (created_at,
-- tracking_id). This index starts with the tenant, so a page never reads another tenant's rows, and
-- replaces the (tenant_id, created_at) index, which served /dev_stats and still does. System messages
-- are never listed: they are left out, so they write one index entry less.
DROP INDEX notifications_tenant_created_idx;
CREATE INDEX notifications_tenant_list_idx ON notifications (tenant_id, created_at DESC, tracking_id DESC)
    WHERE kind = 'tenant';

-- Retention's index of kept bodies names the states that are not terminal (00006_retention.sql): scheduled
-- joins them, so that a scheduled notification's body is neither purged nor re-read by every purge.
DROP INDEX notifications_body_kept_idx;
CREATE INDEX notifications_body_kept_idx ON notifications (updated_at)
    WHERE body <> '' AND status NOT IN ('scheduled', 'queued', 'delivering', 'retrying');

-- +goose Down
DROP INDEX notifications_body_kept_idx;
CREATE INDEX notifications_body_kept_idx ON notifications (updated_at)
    WHERE body <> '' AND status NOT IN ('queued', 'delivering', 'retrying');
DROP INDEX notifications_tenant_list_idx;
CREATE INDEX notifications_tenant_created_idx ON notifications (tenant_id, created_at);
DROP INDEX notifications_expiry_idx;
DROP INDEX notifications_scheduled_idx;
-- The old schema has no word for the new states: they become failed (terminal, never sent), saying why.
UPDATE notifications SET status = 'failed', last_error_message = 'was ' || status || ' (state removed by a down migration)'
    WHERE status IN ('scheduled', 'cancelled', 'expired');
ALTER TABLE notifications DROP CONSTRAINT notifications_status_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_status_check CHECK (status IN (
    'queued', 'delivering', 'delivered', 'retrying', 'blocked', 'failed', 'unlinked'));
ALTER TABLE notifications
    DROP COLUMN delivered_at,
    DROP COLUMN expires_at,
    DROP COLUMN send_at,
    DROP COLUMN metadata;
