-- +goose Up

-- Issue 35: an opt-out or a relink commits its decision in a short transaction and ends the user's
-- covered notifications afterwards, in bounded chunks (store.FinishEndings), so that what a tenant queued
-- for one user never sizes the transaction of a /stop, an API opt-out or a relink. A row here says that the
-- user's waiting notifications must be checked again (an opt-out covering them ends them blocked, a link to
-- another chat ends them unlinked); it goes once a pass has found them all, so that a process that dies
-- mid-way leaves it for the delivery workers' sweep (Worker.finishEndings). since is when the latest
-- decision was recorded: a pass deletes the row only if no decision came after the pass began.
-- No foreign key: the erasure of the user (or of the tenant) leaves nothing to end, and the sweep deletes the
-- row after an empty pass.
CREATE TABLE endings_due (
    tenant_id text        NOT NULL,
    user_id   text        NOT NULL,
    since     timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant_id, user_id)
);

-- +goose Down
DROP TABLE endings_due;
