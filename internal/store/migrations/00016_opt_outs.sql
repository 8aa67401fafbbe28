-- +goose Up

-- End users in control (spec v1-extensions §9): blocks as they happen, opt-outs (from the chat and the API),
-- categories. As in 00014, every change to an existing table is in the catalogue only: nullable columns
-- without a default, which rewrite nothing and add nothing to the rows already there (a send that names no
-- category stores a NULL: no more bytes than before). Each ALTER still takes its table's exclusive lock for
-- a moment; the lock timeout makes the migration fail (to be run again) rather than hold up the sends
-- queued behind it while a long transaction runs.
SET LOCAL lock_timeout = '10s';

-- links.blocked_at: the user blocked the bot: set for every link of a (bot, chat) by a my_chat_member update
-- whose new status is kicked, and by a 403 from the platform; cleared by one whose status is member. NULL:
-- not blocked. A notification claimed while it is set ends blocked without a call (1104).
-- links.label: the branding label of the link token the user redeemed, kept with the link so that the
-- replies about this tenant in the chat (/stop, /resume) carry it after the token is purged (a day after it
-- expired); NULL for the links made before (the tenant's developer name brands them).
ALTER TABLE links ADD COLUMN blocked_at timestamptz, ADD COLUMN label text;

-- notifications.category: the send option (§9); NULL when the send named none.
ALTER TABLE notifications ADD COLUMN category text;

-- An event's data beyond its user or its notification: user.opted_out and user.opted_in carry the category
-- (null: the whole tenant) and who made the change ({"category", "by"}); NULL for every other event.
ALTER TABLE callback_inbox ADD COLUMN data jsonb;
ALTER TABLE callback_events ADD COLUMN data jsonb;

-- Opt-outs: the user (in the chat: /stop) or the tenant (POST /v1/users/{user_id}/opt-out) said this user
-- receives none of the tenant's notifications (category '') or none of one category. by says who made it: a
-- tenant cannot lift the user's own (409 opted_out_by_user), the user lifts either (/resume). The send gate
-- probes the primary key for each row it inserts; the erasure of the user (its users row) takes them along.
CREATE TABLE opt_outs (
    tenant_id  text NOT NULL,
    user_id    text NOT NULL,
    category   text NOT NULL DEFAULT '' CHECK (category ~ '^[a-z0-9_.-]{0,40}$'),
    by         text NOT NULL CHECK (by IN ('user', 'tenant')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id, category),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, user_id) ON DELETE CASCADE
);

-- The inline keyboards of /stop and /resume, looked up server-side: a button's callback_data is
-- "<base64url id>:<choice index>", so nothing in it can be forged into a choice. A prompt belongs to the
-- (bot, chat, messenger user) it was shown to (bot_id NULL: the shared bot), holds its choices — each a list
-- of {"tenant_id", "category"} — and is taken once (used_at); retention deletes it a day after it was made
-- (store.StopPromptTTL), when a tap on it changes nothing any more.
CREATE TABLE stop_prompts (
    id                bytea PRIMARY KEY CHECK (length(id) = 16),
    bot_id            bigint,
    chat_id           bigint NOT NULL,
    messenger_user_id bigint NOT NULL,
    kind              text NOT NULL CHECK (kind IN ('stop', 'resume')),
    choices           jsonb NOT NULL CHECK (jsonb_typeof(choices) = 'array'),
    created_at        timestamptz NOT NULL DEFAULT now(),
    used_at           timestamptz
);
-- Retention, by age; the erasure of a user, by the user's chats.
CREATE INDEX stop_prompts_created_idx ON stop_prompts (created_at);
CREATE INDEX stop_prompts_chat_idx ON stop_prompts (chat_id);

-- +goose Down
SET LOCAL lock_timeout = '10s';
DROP TABLE stop_prompts;
DROP TABLE opt_outs;
ALTER TABLE callback_events DROP COLUMN data;
ALTER TABLE callback_inbox DROP COLUMN data;
ALTER TABLE notifications DROP COLUMN category;
ALTER TABLE links DROP COLUMN label, DROP COLUMN blocked_at;
