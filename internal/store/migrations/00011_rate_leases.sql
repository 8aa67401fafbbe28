-- +goose Up

-- The bot's global send rate, shared by the delivery workers by demand (internal/delivery/ratelease.go):
-- one row per live worker. demand is what the worker could use (messages per second), rate what it was
-- given and may send at until expires_at. Under the pool's advisory lock the rates of unexpired rows never
-- add up to more than the limit; a worker raises its own only from what the others leave free, and lowers
-- it before the row says so.
CREATE TABLE rate_leases (
    pool       text NOT NULL,
    holder     text NOT NULL,
    demand     float8 NOT NULL CHECK (demand >= 0),
    rate       float8 NOT NULL CHECK (rate >= 0),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (pool, holder)
);

-- +goose Down
DROP TABLE rate_leases;
