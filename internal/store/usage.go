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

// usageCols are the count columns, in the order of usage.Columns.
var usageCols = func() string {
	s := make([]string, len(usage.Columns))
	for i, c := range usage.Columns {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}()

// usageRows is a FROM clause of the rows of counts whose hours satisfy where (a condition on tenant_id and
// hour), of both tables: the settled hours' one row each in usage_hours, the hours still written in their
// shards in usage_counts (and the shard of a late count of a settled hour, until the next fold moves it).
// A reader sums them by tenant and period.
func usageRows(where string) string {
	return `(SELECT tenant_id, hour, ` + usageCols + ` FROM usage_hours WHERE ` + where + `
		UNION ALL
		SELECT tenant_id, hour, ` + usageCols + ` FROM usage_counts WHERE ` + where + `) u`
}

// usageSQL is the read of Usage, with its arguments. By the hour, the rows are read as they are, in the
// order of the periods, and EachUsage adds up the rows of one tenant's hour, which lie next to each other:
// a settled hour is one row of usage_hours (and rarely a late count's shard besides), so the 9,600 rows of
// a tenant's 400 days need no grouping in PostgreSQL — only the few hours still in shards are grouped. By
// the day, PostgreSQL sums the hours of each day.
func usageSQL(tenantID string, w usage.Window) (string, []any) {
	args := []any{string(w.Granularity), w.From, w.To}
	where := `hour >= date_trunc($1, $2::timestamptz, 'UTC') AND hour < $3`
	if tenantID != "" {
		where, args = "tenant_id = $4 AND "+where, append(args, tenantID)
	}
	if w.Granularity == usage.Hour {
		return `SELECT tenant_id, hour, ` + usageCols + ` FROM usage_hours WHERE ` + where + `
			UNION ALL
			SELECT tenant_id, hour, ` + usageSums + ` FROM usage_counts WHERE ` + where + ` GROUP BY 1, 2
			ORDER BY 2, 1`, args
	}
	return `SELECT tenant_id, date_trunc($1, hour, 'UTC'), ` + usageSums + `
		FROM ` + usageRows(where) + `
		GROUP BY 1, 2 HAVING ` + usageAny + `
		ORDER BY 2, 1`, args
}

// Usage returns the counts of the periods of w with any, of one tenant (tenantID) or of every tenant
// (""), by period then tenant. A period is in w when it overlaps [w.From, w.To).
func (s *Store) Usage(ctx context.Context, tenantID string, w usage.Window) ([]usage.Period, error) {
	var out []usage.Period
	err := s.EachUsage(ctx, tenantID, w, func(p *usage.Period) error {
		out = append(out, *p)
		return nil
	})
	return out, err
}

// EachUsage calls f with each period Usage returns, in its order, as the rows arrive: GET /v1/usage
// writes 400 days by the hour (9,600 periods) without a slice of them. f's period is reused: f copies
// what it keeps. An error of f stops the read and is returned.
func (s *Store) EachUsage(ctx context.Context, tenantID string, w usage.Window, f func(*usage.Period) error) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	q, args := usageSQL(tenantID, w)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return translate(err, "reading usage")
	}
	defer rows.Close()
	// The period being summed (p, while held) and the row just read (r): rows of the same tenant and
	// period are added up; a period is passed on when the next begins, unless it counts nothing.
	var p, r usage.Period
	held := false
	dest := []any{&r.TenantID, &r.Start}
	for _, c := range r.Fields() {
		dest = append(dest, c)
	}
	flush := func() error {
		if !held || p.Counts == (usage.Counts{}) {
			return nil
		}
		return f(&p)
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return translate(err, "reading usage")
		}
		if held && r.TenantID == p.TenantID && r.Start.Equal(p.Start) {
			p.Add(r.Counts)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		p, held = r, true
		p.Start = p.Start.UTC()
	}
	if err := rows.Err(); err != nil {
		return translate(err, "reading usage")
	}
	return flush()
}

// ExplainUsage is PostgreSQL's EXPLAIN (ANALYZE, BUFFERS) of Usage's read: what make bench-usage prints
// beside its figures.
func (s *Store) ExplainUsage(ctx context.Context, tenantID string, w usage.Window) (string, error) {
	q, args := usageSQL(tenantID, w)
	rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		return "", translate(err, "explaining the usage read")
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", translate(err, "explaining the usage read")
	}
	return strings.Join(lines, "\n"), nil
}

// UsageSince returns the counts of one tenant summed over its hours that begin at or after since (a
// Tenant's status shows the last day's, usage.LastDaySince): a row per settled hour of the span and the
// shards of the last few, read from the keys' indexes of both tables, never the notifications. A tenant
// with nothing counted gets zeros.
func (s *Store) UsageSince(ctx context.Context, tenantID string, since time.Time) (usage.Counts, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var c usage.Counts
	dest := make([]any, 0, len(usage.Columns))
	for _, f := range c.Fields() {
		dest = append(dest, f)
	}
	err := s.pool.QueryRow(ctx, `SELECT `+usageTotals+` FROM `+usageRows(`tenant_id = $1 AND hour >= $2`),
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
// to it). They are in usage_hours: the fold moves every hour there two hours after it began, long before.
var usagePurgeRule = purgeRule{
	purge: `DELETE FROM usage_hours u USING (
		SELECT tenant_id, hour FROM usage_hours WHERE hour < now() - $1::interval
		ORDER BY hour LIMIT $2 FOR UPDATE SKIP LOCKED) d
		WHERE u.tenant_id = d.tenant_id AND u.hour = d.hour`,
	oldest: `SELECT min(hour) + $1::interval FROM usage_hours WHERE hour < now() - $1::interval`,
	age:    func(RetentionPolicy) time.Duration { return usage.Retention },
}

// usageFoldRule moves the shards of the hours settled for usage.SettleAfter ($1) from usage_counts to
// usage_hours, summed into the hour's one row there, up to $2 shard rows a statement, oldest hour first.
// The counts stay exact: the rows are read and locked in one step (FOR UPDATE returns a row's latest
// version; a row a counting statement holds is skipped, for the next pass), their sums added to
// usage_hours and the rows deleted in the same statement; a counting statement that waited on a row the
// fold deleted inserts it anew (ON CONFLICT finds no row left), and a late count of a folded hour (a
// statement that began before the hour ended) re-creates its shard — a reader sums both tables, and the
// next pass adds it to the hour's row. An hour split between two statements by the LIMIT is added to
// the same way.
var usageFoldRule = purgeRule{
	purge: func() string {
		sums := make([]string, len(usage.Columns))
		sets := make([]string, len(usage.Columns))
		for i, c := range usage.Columns {
			sums[i] = "sum(" + string(c) + ")"
			sets[i] = string(c) + " = u." + string(c) + " + EXCLUDED." + string(c)
		}
		return `WITH picked AS (
			SELECT tenant_id, hour, shard, ` + usageCols + ` FROM usage_counts
			WHERE hour < now() - $1::interval
			ORDER BY hour LIMIT $2 FOR UPDATE SKIP LOCKED),
		moved AS (
			INSERT INTO usage_hours AS u (tenant_id, hour, ` + usageCols + `)
			SELECT tenant_id, hour, ` + strings.Join(sums, ", ") + ` FROM picked GROUP BY 1, 2 ORDER BY 2, 1
			ON CONFLICT (tenant_id, hour) DO UPDATE SET ` + strings.Join(sets, ", ") + `)
		DELETE FROM usage_counts u USING picked p WHERE u.tenant_id = p.tenant_id AND u.hour = p.hour AND u.shard = p.shard`
	}(),
	oldest: `SELECT min(hour) + $1::interval FROM usage_counts WHERE hour < now() - $1::interval`,
	age:    func(RetentionPolicy) time.Duration { return usage.SettleAfter },
}
