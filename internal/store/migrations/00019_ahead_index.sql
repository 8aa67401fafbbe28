-- +goose NO TRANSACTION
-- +goose Up

-- The per-chat order between kinds and priorities (notification.AheadSQL): a tenant notification's claim
-- looks for a system or high-priority message to its chat that is still pending and was accepted before
-- it. Only those rows are in this index — few, and each only until its attempt ends — so the look is one
-- probe, and writes to normal notifications never touch it. CONCURRENTLY: notifications may be many.
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_ahead_idx ON notifications (chat_id)
    WHERE status IN ('queued', 'delivering') AND (kind = 'system' OR priority >= 7);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notifications_ahead_idx;
