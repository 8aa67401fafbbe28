-- +goose NO TRANSACTION
-- +goose Up

-- Update ids are per bot on the platform: a processed update is (bot_id, update_id), 0 for the shared bot
-- (a key column cannot be NULL). The rows already there are the shared bot's: a constant default adds the
-- column in the catalogue only (no rewrite). The new key's index is built CONCURRENTLY, beside the old
-- one, so that updates keep being claimed while it builds (the table holds two days of updates); the swap
-- of the primary key is then a moment's lock. The webhook of the previous release goes on working
-- throughout: its claim (INSERT … ON CONFLICT DO NOTHING) names no constraint, and its rows get bot 0.
-- Without a transaction each statement commits alone, and can run again after a failure half way; the
-- ones that take an exclusive lock set a lock timeout, so that they fail (to be run again) rather than
-- hold up the webhook behind a long transaction.
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    ALTER TABLE processed_updates ADD COLUMN IF NOT EXISTS bot_id bigint NOT NULL DEFAULT 0;
END $$;
-- +goose StatementEnd
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS processed_updates_bot_update_idx ON processed_updates (bot_id, update_id);

-- The foreign key of links.bot_id (00014) holds for every link made since; this checks the rows made
-- before (all NULL) under a lock that lets links be made and removed meanwhile.
ALTER TABLE links VALIDATE CONSTRAINT links_bot_id_fkey;

-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    IF EXISTS (SELECT 1 FROM pg_class WHERE relname = 'processed_updates_bot_update_idx') THEN
        ALTER TABLE processed_updates DROP CONSTRAINT processed_updates_pkey,
            ADD CONSTRAINT processed_updates_pkey PRIMARY KEY USING INDEX processed_updates_bot_update_idx;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
-- Two bots' updates may share an update id: only the shared bot's go back under the old key.
DELETE FROM processed_updates WHERE bot_id <> 0;
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS processed_updates_update_idx ON processed_updates (update_id);
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '10s', true);
    IF EXISTS (SELECT 1 FROM pg_class WHERE relname = 'processed_updates_update_idx') THEN
        ALTER TABLE processed_updates DROP CONSTRAINT processed_updates_pkey,
            ADD CONSTRAINT processed_updates_pkey PRIMARY KEY USING INDEX processed_updates_update_idx;
    END IF;
    ALTER TABLE processed_updates DROP COLUMN IF EXISTS bot_id;
END $$;
-- +goose StatementEnd
