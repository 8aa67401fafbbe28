-- +goose Up

-- Quiet hours (spec v1-extensions §14). As in 00014, 00016, 00018 and 00020, changes to existing tables are
-- in the catalogue only: nullable columns without a default, which rewrite nothing. The lock timeout makes
-- the migration fail (to be run again) rather than hold up the sends queued behind it.
SET LOCAL lock_timeout = '10s';

-- A tenant's quiet hours: the daily window [quiet_start, quiet_end) in minutes since midnight (it wraps
-- midnight when start > end), read in the user's time_zone or else in quiet_zone (an IANA name, validated
-- by the operator's CEL and the admin CLI), and what happens inside it. All four or none.
ALTER TABLE tenants
    ADD COLUMN quiet_start smallint CHECK (quiet_start BETWEEN 0 AND 1439),
    ADD COLUMN quiet_end   smallint CHECK (quiet_end BETWEEN 0 AND 1439),
    ADD COLUMN quiet_zone  text,
    ADD COLUMN quiet_mode  text CHECK (quiet_mode IN ('hold', 'silent')),
    ADD CONSTRAINT tenants_quiet_hours_whole CHECK (
        (quiet_start IS NULL) = (quiet_end IS NULL) AND (quiet_start IS NULL) = (quiet_zone IS NULL)
        AND (quiet_start IS NULL) = (quiet_mode IS NULL) AND (quiet_start IS NULL OR quiet_start <> quiet_end));

-- A send's quiet_hours option, resolved at acceptance ("ignore" given, or its default at priority 7 and
-- above): true ignores the tenant's quiet hours; NULL respects them (most rows: nothing stored).
ALTER TABLE notifications ADD COLUMN quiet_ignore boolean;

-- +goose Down
ALTER TABLE notifications DROP COLUMN quiet_ignore;
ALTER TABLE tenants
    DROP CONSTRAINT tenants_quiet_hours_whole,
    DROP COLUMN quiet_start,
    DROP COLUMN quiet_end,
    DROP COLUMN quiet_zone,
    DROP COLUMN quiet_mode;
