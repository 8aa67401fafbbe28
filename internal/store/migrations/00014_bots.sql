-- +goose Up

-- A tenant's own bot (spec v1-extensions §11). Every change here is in the catalogue only: new tables, and
-- new nullable columns without a default on existing ones, which rewrite nothing and add nothing to the
-- rows already there (a NULL bot is the shared bot, what every existing row means). Each ALTER still
-- takes its table's exclusive lock for a moment, and waits for the transactions already on the table to
-- end; the lock timeout makes the migration fail (to be run again) rather than hold up the sends queued
-- behind it while a long transaction runs.
SET LOCAL lock_timeout = '10s';

-- The bots of tenants that bring their own (the shared bot, HERALD_MESSENGER_BOT_TOKEN, has no row). id is
-- the platform's own id of the bot (getMe), so that two tenants that name the same token share one row.
--   token_sealed           the token, AES-256-GCM under HERALD_BOT_TOKEN_KEY with the id as additional
--                          data (internal/bot): the database alone cannot send as the bot.
--   token_digest           SHA-256 of the token: a change of token is seen without opening it.
--   webhook_url            where setWebhook pointed the bot (HERALD_PUBLIC_URL/messenger/webhook/{id}): a
--                          change of HERALD_PUBLIC_URL is seen by comparing it.
--   webhook_secret_digest  SHA-256 of the secret_token given to setWebhook; the webhook compares digests.
--   rate_limit             messages per second; NULL: the workers' HERALD_MESSENGER_RATE_LIMIT.
--   paid_broadcast         sends past the platform's free 30 a second carry allow_paid_broadcast.
--   state                  ready; token_invalid (the platform refused the token: getMe, or a worker's 401);
--                          webhook_failed (setWebhook was refused). state_message says why, for people.
CREATE TABLE bots (
    id                    bigint PRIMARY KEY CHECK (id > 0),
    username              text NOT NULL,
    token_sealed          bytea NOT NULL,
    token_digest          bytea NOT NULL CHECK (length(token_digest) = 32),
    webhook_url           text,
    webhook_secret_digest bytea CHECK (length(webhook_secret_digest) = 32),
    rate_limit            integer CHECK (rate_limit BETWEEN 1 AND 1000),
    paid_broadcast        boolean NOT NULL DEFAULT false,
    state                 text NOT NULL CHECK (state IN ('ready', 'token_invalid', 'webhook_failed')),
    state_message         text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
-- The caches of the webhook and the workers read what changed since they last looked.
CREATE INDEX bots_updated_idx ON bots (updated_at);

-- The bot a tenant sends through; NULL: the shared bot. Tenants are few: the foreign key's check and the
-- index cost nothing that matters.
ALTER TABLE tenants ADD COLUMN bot_id bigint REFERENCES bots (id);
CREATE INDEX tenants_bot_idx ON tenants (bot_id) WHERE bot_id IS NOT NULL;

-- The bot a link was made through (NULL: the shared bot). A user's chat with one bot is not their chat with
-- another (the chat ids are the same: a private chat's id is its user's), so a link names both. Links may be
-- many: the foreign key is added NOT VALID, so that adding it reads no row under this transaction's
-- exclusive lock (it holds for every link made from now on); 00015 validates it under a lock that lets
-- links be made and removed meanwhile.
ALTER TABLE links ADD COLUMN bot_id bigint;
ALTER TABLE links ADD CONSTRAINT links_bot_id_fkey FOREIGN KEY (bot_id) REFERENCES bots (id) NOT VALID;

-- The bot a notification goes through, recorded at acceptance from its link (a tenant notification) or
-- given by its producer (a system message); NULL: the shared bot. No foreign key: the hot path's insert
-- would pay a lookup for each row.
ALTER TABLE notifications ADD COLUMN bot_id bigint;

-- +goose Down
SET LOCAL lock_timeout = '10s';
ALTER TABLE notifications DROP COLUMN bot_id;
ALTER TABLE links DROP COLUMN bot_id;
DROP INDEX tenants_bot_idx;
ALTER TABLE tenants DROP COLUMN bot_id;
DROP TABLE bots;
