-- +goose Up

-- Issue 35: the erasure of a user commits its decision in a short transaction (the link, link tokens,
-- phone verification, opt-outs and user record go) and ends the user's notifications afterwards, in
-- bounded chunks, like an opt-out or a relink (store.FinishEndings): cancelled when waiting, and every one
-- emptied of its body, chat and messenger message id. erased_at is when the latest erasure of the user
-- committed its decision (NULL: none pending): the notifications created until then are the erasure's, and
-- until the pass has reached them the claim ends any of them cancelled without a send (store.claimOnce).
-- The row goes with the pass that finds them all, as for the other endings.
ALTER TABLE endings_due ADD COLUMN erased_at timestamptz;

-- +goose Down
ALTER TABLE endings_due DROP COLUMN erased_at;
