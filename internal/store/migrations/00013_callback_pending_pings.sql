-- +goose NO TRANSACTION
-- +goose Up

-- POST /v1/callbacks/{id}/test keeps at most a few undelivered pings per endpoint (store.EnqueuePing): it
-- counts them here, without walking the endpoint's other pending events (a failing endpoint can hold many).
-- Only pending pings are in it, so the hot path's rows never are. CONCURRENTLY: a large callback_events
-- must not stop the senders while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS callback_events_pending_ping_idx
    ON callback_events (endpoint_id) WHERE type = 'ping' AND state = 'pending';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS callback_events_pending_ping_idx;
