// Command usage benchmarks GET /v1/usage (issue 39, v1 extensions §15): the latency of the longest window
// the contract allows, 400 days at hour granularity, for one tenant among -tenants tenants whose every hour
// of those 400 days has counts in every one of its -shards rows (usage_counts: the most rows the counting
// statement writes, a busy tenant's). The tenant API runs in this process on a real listener over a private,
// durable PostgreSQL (internal/testing/benchutil); the retention pass then folds the settled hours' shards
// (-fold, as a running Herald does every few minutes); one client asks again and again, so the figures are
// latencies, not capacity. The store's read alone (store.Usage) is measured beside the HTTP request, so that
// the JSON of the 9,600 periods shows apart from PostgreSQL's part. Each measurement runs -runs times; the
// report gives every run and the median.
//
// Run it with `make bench-usage`.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/usage"
)

type options struct {
	tenants, shards, days, runs, repeat int
	fold, explain                       bool
	cpuprofile                          string
}

func main() {
	var o options
	flag.IntVar(&o.tenants, "tenants", 100, "tenants with counts")
	flag.IntVar(&o.shards, "shards", 8, "rows per tenant and hour (the counting statement spreads a busy tenant's hour over 8)")
	flag.IntVar(&o.days, "days", 400, "days of hourly counts per tenant, ending now (and the window asked for)")
	flag.IntVar(&o.runs, "runs", 3, "runs of every measurement")
	flag.IntVar(&o.repeat, "repeat", 30, "requests per run")
	flag.BoolVar(&o.fold, "fold", true, "run the retention pass that folds settled hours' shards before measuring (-fold=false: every shard of every hour, as before the pass exists)")
	flag.BoolVar(&o.explain, "explain", true, "print PostgreSQL's plan of the read (EXPLAIN (ANALYZE, BUFFERS)) before measuring")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the GET requests (the server is in this process) to this file")
	flag.Parse()
	benchutil.Main("bench-usage", func(ctx context.Context, dbURL string) error { return run(ctx, dbURL, o) })
}

func run(ctx context.Context, dbURL string, o options) error {
	logger := slog.New(slog.DiscardHandler)
	b, err := benchutil.StartBackend(ctx, dbURL, 8, "bench", logger)
	if err != nil {
		return err
	}
	defer b.Close()
	st := b.Store
	api, err := benchutil.ServeAPI(st, b.Outbox, logger, ingress.Options{SendsPerSecond: 1e6, RequestsPerSecond: 1e6})
	if err != nil {
		return err
	}
	defer api.Close()

	// The tenants, and their counts: every hour of the days, every shard, written tenant by tenant within
	// each hour as the counting statements write them (an hour's rows of all tenants lie together).
	for i := range o.tenants {
		if err := fixture.CreateTenant(ctx, st, tenantID(i)); err != nil {
			return err
		}
	}
	key, err := fixture.CreateAPIKey(ctx, st, tenantID(o.tenants/2))
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Hour)
	from := now.Add(-time.Duration(o.days) * 24 * time.Hour)
	start := time.Now()
	const daysPerStatement = 20
	for d := 0; d < o.days; d += daysPerStatement {
		lo := from.Add(time.Duration(d) * 24 * time.Hour)
		hi := from.Add(time.Duration(min(d+daysPerStatement, o.days)) * 24 * time.Hour)
		if _, err := st.Pool().Exec(ctx, `
			INSERT INTO usage_counts (tenant_id, hour, shard, accepted, delivered, failed, blocked, expired, cancelled,
			                          unlinked, edited, paid_broadcast)
			SELECT 'tenant-' || t, h, s, 100 + t, 95, 1, 1, 1, 1, 1, 0, 0
			FROM generate_series($1::timestamptz, $2::timestamptz - interval '1 hour', interval '1 hour') h,
			     generate_series(0, $3 - 1) t, generate_series(0, $4 - 1) s
			ORDER BY h, t, s`, lo, hi, o.tenants, o.shards); err != nil {
			return fmt.Errorf("seeding usage: %w", err)
		}
	}
	// The retention pass moves the shards of every settled hour into its one row of usage_hours (purge
	// kind usage_shards): what a reader meets in the steady state is one row per tenant and past hour
	// there, and the shards of the last two hours in usage_counts.
	if o.fold {
		t0 := time.Now()
		var folded int64
		for {
			n, err := st.Purge(ctx, store.PurgeUsageShards, store.RetentionPolicy{}, 10_000)
			if err != nil {
				return fmt.Errorf("folding: %w", err)
			}
			if folded += n; n < 10_000 {
				break
			}
		}
		fmt.Printf("the retention pass folded %d shard rows in %v\n", folded, time.Since(t0).Round(time.Second))
	}
	// As autovacuum would after such a load: the visibility map makes the read an index-only scan.
	for _, table := range []string{"usage_counts", "usage_hours"} {
		if _, err := st.Pool().Exec(ctx, `VACUUM ANALYZE `+table); err != nil {
			return err
		}
		var rows int64
		var size string
		if err := st.Pool().QueryRow(ctx, `SELECT count(*), pg_size_pretty(pg_total_relation_size($1)) FROM `+table, table).Scan(&rows, &size); err != nil {
			return err
		}
		fmt.Printf("%s: %d rows, %s with its indexes\n", table, rows, size)
	}
	fmt.Printf("(%d tenants × %d days × 24 hours × %d shards stored and folded in %v)\n",
		o.tenants, o.days, o.shards, time.Since(start).Round(time.Second))

	q := url.Values{"from": {from.Format(time.RFC3339)}, "to": {now.Format(time.RFC3339)}, "granularity": {"hour"}}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	get := func() (time.Duration, int, error) {
		req, _ := http.NewRequest("GET", api.URL()+"/v1/usage?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+key)
		t0 := time.Now()
		res, err := c.Do(req)
		if err != nil {
			return 0, 0, err
		}
		// Read to the last byte, as a client waits for it, into a buffer of the answer's length (a
		// client that knows the length does not regrow its buffer ten times for 2 MB, as io.ReadAll does).
		var buf bytes.Buffer
		buf.Grow(int(max(res.ContentLength, 0)) + bytes.MinRead)
		_, err = buf.ReadFrom(res.Body)
		res.Body.Close()
		took := time.Since(t0)
		body := buf.Bytes()
		if err != nil {
			return 0, 0, fmt.Errorf("GET /v1/usage: reading the answer: %w", err)
		}
		if res.StatusCode != http.StatusOK {
			return 0, 0, fmt.Errorf("GET /v1/usage: %d %s", res.StatusCode, body)
		}
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return 0, 0, err
		}
		return took, len(page.Data), nil
	}
	window, err := usage.ParseWindow(q.Get("from"), q.Get("to"), q.Get("granularity"), now)
	if err != nil {
		return err
	}
	read := func() (time.Duration, int, error) {
		t0 := time.Now()
		p, err := st.Usage(ctx, tenantID(o.tenants/2), window)
		return time.Since(t0), len(p), err
	}

	if o.explain {
		plan, err := st.ExplainUsage(ctx, tenantID(o.tenants/2), window)
		if err != nil {
			return err
		}
		fmt.Printf("the read's plan:\n%s\n", plan)
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		for range o.repeat {
			if _, _, err := get(); err != nil {
				return err
			}
		}
		pprof.StopCPUProfile()
	}

	var httpP99, readP99 []time.Duration
	for r := range o.runs {
		for _, m := range []struct {
			name string
			f    func() (time.Duration, int, error)
			p99  *[]time.Duration
		}{{"GET /v1/usage", get, &httpP99}, {"store.Usage alone", read, &readP99}} {
			var l benchutil.Latencies
			periods := 0
			for range o.repeat {
				d, n, err := m.f()
				if err != nil {
					return err
				}
				l, periods = append(l, d), n
			}
			*m.p99 = append(*m.p99, l.Percentile(99))
			fmt.Printf("   run %d  %-18s %d periods, %d requests: %s\n", r+1, m.name, periods, len(l), l)
		}
	}
	med := func(ds []time.Duration) float64 { slices.Sort(ds); return float64(ds[len(ds)/2]) / 1e6 }
	fmt.Printf("\n== p99, median of %d runs: GET /v1/usage %.1f ms (target < 50 ms); store.Usage alone %.1f ms ==\n",
		o.runs, med(httpP99), med(readP99))
	return nil
}

func tenantID(i int) string { return fmt.Sprintf("tenant-%d", i) }
