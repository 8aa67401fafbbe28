-- +goose Up

-- Every producer now commits a notification before it publishes the envelope, and inserts it with
-- published_at set. A publish that fails clears published_at for the relay (system messages) or deletes
-- the row (tenant sends, answered 502). This index finds the relay's rows; it holds only failed publishes.
CREATE INDEX notifications_unpublished_idx ON notifications (created_at) WHERE status = 'queued' AND published_at IS NULL;

-- Rows queued under the previous design were produced before they committed: they are published.
UPDATE notifications SET published_at = updated_at WHERE status = 'queued' AND published_at IS NULL;

-- +goose Down
DROP INDEX notifications_unpublished_idx;
