-- +goose Up

-- published_at: when a worker's scheduler or redrive loop last produced an envelope for this notification.
-- A due retry or a stuck notification is re-published only when it is NULL or older than the lease, so
-- several workers (and successive ticks of one) do not flood Kafka with copies of the same envelope.
-- Ingress does not set it: its envelope is produced inside the insert transaction.
ALTER TABLE notifications ADD COLUMN published_at timestamptz;

-- +goose Down
ALTER TABLE notifications DROP COLUMN published_at;
