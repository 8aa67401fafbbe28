-- +goose NO TRANSACTION
-- +goose Up

-- Replace and delete after send (spec v1-extensions §13). As in 00018, nullable columns without a
-- default: catalogue changes only, nothing rewritten, nothing added to a row that does not use them.
-- replace_key: the send's replace_key, NULL for none.
-- delivered_as: 'sent' (a new message) or 'edited' (editMessageText of the key's message); NULL until
-- delivered, and on every row delivered before this migration (they were all sent: the view reads NULL
-- of a delivered row as 'sent').
-- message_sent_at: when the message the row names (messenger_message_id) was sent — its own delivery for
-- 'sent', the edited message's for 'edited' — from which the platform's 48 hours run: an edit does not
-- restart them.
-- message_delete_requested_at: the tenant asked for the message to be deleted (DELETE …/message, 202);
-- the workers' sweep deletes it (deleteMessage) and sets message_deleted_at. A column, not a goroutine:
-- a process that dies after the 202 leaves the request for another.
-- Without a transaction (the indexes below are built CONCURRENTLY) the ALTER sets its own lock timeout, as
-- in 00015: it fails, to be run again, rather than hold up the sends queued behind a long transaction.
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    ALTER TABLE notifications
        ADD COLUMN IF NOT EXISTS replace_key text,
        ADD COLUMN IF NOT EXISTS delivered_as text,
        ADD COLUMN IF NOT EXISTS message_sent_at timestamptz,
        ADD COLUMN IF NOT EXISTS message_delete_requested_at timestamptz,
        ADD COLUMN IF NOT EXISTS message_deleted_at timestamptz;
END $$;
-- +goose StatementEnd

-- A key's notifications (the claim: its latest delivered message, and the ones accepted before it that
-- are still on their way). Only rows with a key are in it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_replace_key_idx
    ON notifications (tenant_id, user_id, replace_key, created_at)
    WHERE replace_key IS NOT NULL;

-- The deletions due (the workers' sweep): a row is here from the 202 until its message is deleted.
CREATE INDEX CONCURRENTLY IF NOT EXISTS notifications_delete_due_idx
    ON notifications (message_delete_requested_at)
    WHERE message_delete_requested_at IS NOT NULL AND message_deleted_at IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS notifications_delete_due_idx;
DROP INDEX CONCURRENTLY IF EXISTS notifications_replace_key_idx;
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    ALTER TABLE notifications
        DROP COLUMN IF EXISTS message_deleted_at,
        DROP COLUMN IF EXISTS message_delete_requested_at,
        DROP COLUMN IF EXISTS message_sent_at,
        DROP COLUMN IF EXISTS delivered_as,
        DROP COLUMN IF EXISTS replace_key;
END $$;
-- +goose StatementEnd
