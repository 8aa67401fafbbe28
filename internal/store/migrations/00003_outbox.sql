-- +goose Up

-- Every producer now commits a notification before it publishes the envelope, and inserts it with
-- published_at set. A publish that fails clears published_at for the relay (system messages) or deletes
-- the row (tenant sends, answered 502). This index finds the relay's rows; it holds only failed publishes.
CREATE INDEX notifications_unpublished_idx ON notifications (created_at) WHERE status = 'queued' AND published_at IS NULL;

-- Rows queued under the previous design were produced before they committed: they are published.
UPDATE notifications SET published_at = updated_at WHERE status = 'queued' AND published_at IS NULL;

-- An Idempotency-Key now covers a whole request, one notification or a batch of them: it keeps the answer
-- per item (results, written by internal/outbox) rather than one tracking id. Keys written before keep
-- their tracking_id, which reads as a one-item answer.
ALTER TABLE idempotency_keys ALTER COLUMN tracking_id DROP NOT NULL;
ALTER TABLE idempotency_keys ADD COLUMN results jsonb;
-- published: the request that holds the key has been answered, so a repeat may replay it at once (until
-- then a repeat waits for the first request's publish to end). Keys written before were answered.
ALTER TABLE idempotency_keys ADD COLUMN published boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN published;
ALTER TABLE idempotency_keys DROP COLUMN results;
DROP INDEX notifications_unpublished_idx;
