package store

// Usage (v1 extensions §15): the counts of what each tenant sent, per UTC hour, written by the statement
// that makes the change they count (countUsage) — the insert of a send (insertTenantSQL), every change of
// a notification to a terminal state (through notificationEvents, the hook they all share), the discard of
// a send whose publish failed — so that a count is exact whatever crashes or retries: a notification reaches
// its terminal state in one guarded statement, once, and that statement commits its count or nothing.
// Which state counts in which column is internal/usage's table. Read without touching notifications
// (Usage), kept 400 days (PurgeUsage), whatever retention does to the notifications themselves.

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/usage"
)

// usageShards is how many rows one tenant's hour is spread over: each statement adds to one of them, at
// random, so that a busy tenant's concurrent statements rarely wait on one another's row lock.
const usageShards = 8

// countUsage is a CTE, name, that adds to usage_counts, for each tenant and UTC hour of the rows rows (a
// FROM clause: a CTE with its WHERE), the sum of each delta. at is the SQL expression of a row's time. The
// rows of one statement go to one shard, in the order of their key, so that two statements that count for
// several tenants lock their rows in the same order. A statement counts through one countUsage at most: one
// INSERT … ON CONFLICT may not update a row twice.
func countUsage(name, rows, at string, deltas []usage.Delta) string {
	cols := make([]string, len(deltas))
	sums := make([]string, len(deltas))
	sets := make([]string, len(deltas))
	for i, d := range deltas {
		c := string(d.Column)
		cols[i], sums[i], sets[i] = c, "sum("+d.SQL+")", c+" = u."+c+" + EXCLUDED."+c
	}
	return name + ` AS (
		INSERT INTO usage_counts AS u (tenant_id, hour, shard, ` + strings.Join(cols, ", ") + `)
		SELECT tenant_id, date_trunc('hour', ` + at + `, 'UTC'), (SELECT floor(random() * ` + strconv.Itoa(usageShards) + `)::smallint),
		       ` + strings.Join(sums, ", ") + `
		FROM ` + rows + `
		GROUP BY 1, 2, 3 ORDER BY 1, 2
		ON CONFLICT (tenant_id, hour, shard) DO UPDATE SET ` + strings.Join(sets, ", ") + `)`
}

// usageSums are the columns summed, in the order of usage.Columns.
var usageSums = func() string {
	s := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		s[i] = "sum(" + string(c) + ")::bigint"
	}
	return strings.Join(s, ", ")
}()

// usageAny holds for a group with any count: a period with nothing is left out.
var usageAny = func() string {
	s := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		s[i] = "sum(" + string(c) + ") <> 0"
	}
	return strings.Join(s, " OR ")
}()

// Usage returns the counts of the periods of w with any, of one tenant (tenantID) or of every tenant
// (""), by period then tenant. A period is in w when it overlaps [w.From, w.To).
func (s *Store) Usage(ctx context.Context, tenantID string, w usage.Window) ([]usage.Period, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	args := []any{string(w.Granularity), w.From, w.To}
	tenant := ""
	if tenantID != "" {
		tenant, args = "tenant_id = $4 AND ", append(args, tenantID)
	}
	// A row's hour is its period at hour granularity: grouping by the column itself spares a date_trunc
	// in a zone per row (a tenant's 400 days are up to 76,800 rows, bench-usage).
	period := "date_trunc($1, hour, 'UTC')"
	if w.Granularity == usage.Hour {
		period = "hour"
	}
	rows, err := s.pool.Query(ctx, `
		SELECT tenant_id, `+period+`, `+usageSums+`
		FROM usage_counts
		WHERE `+tenant+`hour >= date_trunc($1, $2::timestamptz, 'UTC') AND hour < $3
		GROUP BY 1, 2 HAVING `+usageAny+`
		ORDER BY 2, 1`, args...)
	if err != nil {
		return nil, translate(err, "reading usage")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (usage.Period, error) {
		var p usage.Period
		dest := []any{&p.TenantID, &p.Start}
		for _, f := range p.Fields() {
			dest = append(dest, f)
		}
		err := r.Scan(dest...)
		p.Start = p.Start.UTC()
		return p, err
	})
	if err != nil {
		return nil, translate(err, "reading usage")
	}
	return out, nil
}

// UsageSince returns the counts of one tenant summed over its hours that begin at or after since (a
// Tenant's status shows the last day's, usage.LastDaySince): at most a shard row per hour of the span, read
// from the key's index, never the notifications. A tenant with nothing counted gets zeros.
func (s *Store) UsageSince(ctx context.Context, tenantID string, since time.Time) (usage.Counts, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var c usage.Counts
	dest := make([]any, 0, len(usage.Columns))
	for _, f := range c.Fields() {
		dest = append(dest, f)
	}
	err := s.pool.QueryRow(ctx, `SELECT `+usageTotals+` FROM usage_counts WHERE tenant_id = $1 AND hour >= $2`,
		tenantID, since).Scan(dest...)
	if err != nil {
		return usage.Counts{}, translate(err, "reading the usage of tenant "+tenantID)
	}
	return c, nil
}

// usageTotals are the columns summed over any number of rows, none included: 0, not NULL.
var usageTotals = func() string {
	s := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		s[i] = "coalesce(sum(" + string(c) + "), 0)::bigint"
	}
	return strings.Join(s, ", ")
}()

// usagePurgeRule deletes the counts of the hours older than usage.Retention ($1 is the purge's age, set
// to it).
var usagePurgeRule = purgeRule{
	purge: `DELETE FROM usage_counts u USING (
		SELECT tenant_id, hour, shard FROM usage_counts WHERE hour < now() - $1::interval
		ORDER BY hour LIMIT $2 FOR UPDATE SKIP LOCKED) d
		WHERE u.tenant_id = d.tenant_id AND u.hour = d.hour AND u.shard = d.shard`,
	oldest: `SELECT min(hour) + $1::interval FROM usage_counts WHERE hour < now() - $1::interval`,
	age:    func(RetentionPolicy) time.Duration { return usage.Retention },
}

// usageFoldRule folds the shards of the hours settled for usage.SettleAfter ($1) into shard 0, up to $2
// shard rows a statement; it removes the rows it folds, and the counts stay exact: the rows are read and
// locked in one step (FOR UPDATE returns a row's latest version), their sums added to shard 0 and the rows
// deleted in the same statement, and a late count of a folded hour (a statement that began before the
// hour ended) re-creates its shard, which a reader sums and the next pass folds.
var usageFoldRule = purgeRule{
	purge: func() string {
		cols := make([]string, len(usage.Columns))
		sums := make([]string, len(usage.Columns))
		sets := make([]string, len(usage.Columns))
		for i, c := range usage.Columns {
			cols[i] = string(c)
			sums[i] = "sum(" + string(c) + ")"
			sets[i] = string(c) + " = u." + string(c) + " + EXCLUDED." + string(c)
		}
		return `WITH picked AS (
			SELECT tenant_id, hour, shard, ` + strings.Join(cols, ", ") + ` FROM usage_counts
			WHERE shard <> 0 AND hour < now() - $1::interval
			ORDER BY hour LIMIT $2 FOR UPDATE SKIP LOCKED),
		folded AS (
			INSERT INTO usage_counts AS u (tenant_id, hour, shard, ` + strings.Join(cols, ", ") + `)
			SELECT tenant_id, hour, 0, ` + strings.Join(sums, ", ") + ` FROM picked GROUP BY 1, 2
			ON CONFLICT (tenant_id, hour, shard) DO UPDATE SET ` + strings.Join(sets, ", ") + `)
		DELETE FROM usage_counts u USING picked p WHERE u.tenant_id = p.tenant_id AND u.hour = p.hour AND u.shard = p.shard`
	}(),
	oldest: `SELECT min(hour) + $1::interval FROM usage_counts WHERE shard <> 0 AND hour < now() - $1::interval`,
	age:    func(RetentionPolicy) time.Duration { return usage.SettleAfter },
}
