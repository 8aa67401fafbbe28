-- +goose Up

-- Retention (internal/store/retention.go): the purge job finds what is due through these indexes, in small
-- batches, oldest first, without scanning what it has already purged.

-- Bodies still kept of notifications that are no longer in flight. A row enters when it leaves the
-- in-flight states (once per notification on the hot path) and leaves when its body is erased, so the
-- index holds about the body retention's worth of rows. The predicate names the states that are NOT
-- terminal: a new non-terminal state must be added here (TestRetentionIndexesExcludeEveryNonTerminalState
-- fails until it is), while a new terminal state is covered as it is.
CREATE INDEX notifications_body_kept_idx ON notifications (updated_at)
    WHERE body <> '' AND status NOT IN ('queued', 'delivering', 'retrying');

-- Notifications whose body is erased: the rows the metadata retention deletes. Rows enter only when the
-- purge (or an erasure) empties their body, never on the hot path.
CREATE INDEX notifications_body_erased_idx ON notifications (updated_at) WHERE body = '';

-- Expired phone verification sessions.
CREATE INDEX phone_verifications_pending_idx ON phone_verifications (session_expires_at) WHERE status = 'pending';

-- Idempotency keys and processed update ids, by age.
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
CREATE INDEX processed_updates_processed_idx ON processed_updates (processed_at);

-- +goose Down
DROP INDEX processed_updates_processed_idx;
DROP INDEX idempotency_keys_created_idx;
DROP INDEX phone_verifications_pending_idx;
DROP INDEX notifications_body_erased_idx;
DROP INDEX notifications_body_kept_idx;
