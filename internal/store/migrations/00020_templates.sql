-- +goose Up

-- Templates and locales (spec v1-extensions §12). As in 00014, 00016 and 00018, changes to existing tables
-- are in the catalogue only: nullable columns without a default, which rewrite nothing (a send without a
-- template stores NULLs). The lock timeout makes the migration fail (to be run again) rather than hold up
-- the sends queued behind it.
SET LOCAL lock_timeout = '10s';

-- A tenant's template names. latest_version counts the versions ever made, also across a deletion, so a
-- (tenant, name, version) names one content forever: the ingress caches versions by that key without
-- invalidation (internal/ingress/templates.go). deleted_at: DELETE /v1/templates/{name}; its versions are
-- deleted, the name stays (with its counter) until a later PUT makes it live again.
CREATE TABLE template_names (
    tenant_id      text NOT NULL REFERENCES tenants (id),
    name           text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{0,63}$'),
    latest_version integer NOT NULL CHECK (latest_version >= 0), -- 0: being made (no version yet)
    deleted_at     timestamptz,
    PRIMARY KEY (tenant_id, name)
);

-- The versions, kept. locales is the locales object as the tenant gave it ({"en": {"message", "buttons"}}),
-- its sources at most 16 KiB a locale (checked by the ingress).
CREATE TABLE template_versions (
    tenant_id      text NOT NULL,
    name           text NOT NULL,
    version        integer NOT NULL CHECK (version >= 1),
    format         text NOT NULL CHECK (format IN ('text', 'html')),
    default_locale text NOT NULL,
    locales        jsonb NOT NULL CHECK (jsonb_typeof(locales) = 'object'),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name, version),
    FOREIGN KEY (tenant_id, name) REFERENCES template_names (tenant_id, name) ON DELETE CASCADE
);

-- A notification sent with a template: which version in which locale was rendered (the body holds what was
-- rendered; the template can change or go without changing it). NULL: sent without a template.
ALTER TABLE notifications
    ADD COLUMN template_name text,
    ADD COLUMN template_version integer,
    ADD COLUMN template_locale text;

-- What the tenant set for its user (PATCH /v1/users/{user_id}); NULL: not set. Erased with the users row.
ALTER TABLE users ADD COLUMN locale text, ADD COLUMN time_zone text;

-- The language the messenger reported for a chat, from the latest update through that bot (bot_id 0: the
-- shared bot, as in processed_updates): the from.language_code of each update, recorded by the statement that
-- claims the update (store.ApplyUpdates). Erased with a user's erasure (for the user's chats); a later update
-- records it again.
CREATE TABLE chat_languages (
    bot_id        bigint NOT NULL,
    chat_id       bigint NOT NULL,
    language_code text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (bot_id, chat_id)
);

-- +goose Down
SET LOCAL lock_timeout = '10s';
DROP TABLE chat_languages;
ALTER TABLE users DROP COLUMN time_zone, DROP COLUMN locale;
ALTER TABLE notifications DROP COLUMN template_locale, DROP COLUMN template_version, DROP COLUMN template_name;
DROP TABLE template_versions;
DROP TABLE template_names;
