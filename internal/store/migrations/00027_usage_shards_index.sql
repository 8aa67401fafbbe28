-- +goose Up

-- The retention pass folds each settled hour's shards into shard 0 (purge kind usage_shards,
-- store.usageFoldRule) and finds them, oldest first, through this index: in the steady state it holds the
-- shards of the last two hours or so, whatever the table's 400 days hold (without it, each statement of
-- the pass read the whole table to find them). Written only by counts that land in shards 1-7.
CREATE INDEX usage_counts_shards_idx ON usage_counts (hour) WHERE shard <> 0;

-- +goose Down
DROP INDEX usage_counts_shards_idx;
