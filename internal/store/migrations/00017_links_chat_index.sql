-- +goose NO TRANSACTION
-- +goose Up

-- A block is set and cleared for every link of a (bot, chat) — a my_chat_member update, a 403 — which the
-- links' keys do not find: this index does. A link is written once per /start, never on the send path.
-- CONCURRENTLY: links may be many, and /start must not stop while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS links_chat_idx ON links (chat_id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS links_chat_idx;
