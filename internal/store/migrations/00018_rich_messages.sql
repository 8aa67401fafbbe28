-- +goose Up

-- Rich messages (spec v1-extensions §10). As in 00014 and 00016, catalogue changes only: nullable columns
-- without a default, which rewrite nothing and add nothing to the rows already there (a plain-text send
-- stores NULLs: no more bytes than before). The lock timeout makes the migration fail (to be run again)
-- rather than hold up the sends queued behind it while a long transaction runs.
SET LOCAL lock_timeout = '10s';

-- format: 'html' for a send in the platform's HTML subset; NULL for plain text (the default, and every row
-- written before). No CHECK: adding one would scan the table under its lock; the store writes 'html' or NULL.
-- entities: the message entities the markup was parsed into at the door, offsets already shifted past the
-- brand line (UTF-16 code units of body): body and entities are exactly the text and entities sendMessage
-- receives. NULL when none. Erased with the body (retention, a user's erasure): a text_link holds the
-- tenant's URL.
-- The link buttons of a tenant's send go in reply_markup (00001's column, a system message's keyboard until
-- now), as the inline keyboard sendMessage receives; erased with the body too.
-- entities is text, not jsonb: nothing queries inside it, and it holds the entities in internal/richtext's
-- compact form (EncodeEntities: "b25,4a30,5,17:https://a.example"), which the worker turns into
-- sendMessage's JSON; as JSON (which the first builds stored, and the worker still reads) the entities of
-- 1–2 KB of markup made each row several kilobytes wider, which cost the send path more than the parser
-- (docs/benchmarks.md).
-- silent, protect_content, link_preview: the send options, NULL when not given (the API's defaults: false,
-- false, true).
ALTER TABLE notifications
    ADD COLUMN format text,
    ADD COLUMN entities text,
    ADD COLUMN silent boolean,
    ADD COLUMN protect_content boolean,
    ADD COLUMN link_preview boolean;

-- +goose Down
SET LOCAL lock_timeout = '10s';
ALTER TABLE notifications
    DROP COLUMN link_preview,
    DROP COLUMN protect_content,
    DROP COLUMN silent,
    DROP COLUMN entities,
    DROP COLUMN format;
