-- +goose Up

-- The prompt of a user's latest verification session (a system message), so the verification status can
-- say what became of it: a user who blocked the bot never sees the prompt, and the tenant reads why.
-- No foreign key: the notification may be purged before the session is forgotten.
ALTER TABLE phone_verifications ADD COLUMN prompt_tracking_id uuid;

-- +goose Down
ALTER TABLE phone_verifications DROP COLUMN prompt_tracking_id;
