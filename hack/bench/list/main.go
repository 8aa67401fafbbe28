// Command list benchmarks GET /v1/notifications: the latency of a page for a tenant with -mine
// notifications, first alone, then with -others notifications of other tenants in the same table, to show
// that a page's time does not grow with other tenants' rows. The tenant API runs in this process on a
// real listener over a private, durable PostgreSQL (internal/testing/benchutil); one client asks for pages one
// after the other, so the figures are latencies, not capacity. Each measurement runs -runs times; the
// report gives every run and the median.
//
// Measured, each as the p50 / p99 / max of its pages:
//
//   - first page: the newest 50, asked again and again;
//   - walk: every page of 50 from the newest to the oldest, with the cursor (deep pages included);
//   - walk by 200: the same with limit=200;
//   - status filter: the first page of status=failed (5 % of the rows);
//   - created_before: the first page before the middle of the time range;
//   - user filter: the first page of one user_id (1 ‰ of the tenant's rows; see docs/benchmarks.md for
//     why this one costs more).
//
// Run it with `make bench-list`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

type options struct {
	mine, others, otherTenants, users int
	runs, repeat                      int
}

func main() {
	var o options
	flag.IntVar(&o.mine, "mine", 100_000, "notifications of the tenant that lists")
	flag.IntVar(&o.others, "others", 1_000_000, "notifications of the other tenants")
	flag.IntVar(&o.otherTenants, "other-tenants", 10, "how many other tenants share them")
	flag.IntVar(&o.users, "users", 1000, "users of the tenant that lists")
	flag.IntVar(&o.runs, "runs", 3, "runs of every measurement")
	flag.IntVar(&o.repeat, "repeat", 300, "requests of each repeated measurement (first page, filters)")
	flag.Parse()
	benchutil.Main("bench-list", func(ctx context.Context, dbURL string) error { return run(ctx, dbURL, o) })
}

func run(ctx context.Context, dbURL string, o options) error {
	logger := slog.New(slog.DiscardHandler)
	b, err := benchutil.StartBackend(ctx, dbURL, 8, "bench", logger)
	if err != nil {
		return err
	}
	defer b.Close()
	st := b.Store
	// The tenant limits are out of the way: this measures a page, not the limiter.
	api, err := benchutil.ServeAPI(st, b.Outbox, logger, ingress.Options{SendsPerSecond: 1e6, RequestsPerSecond: 1e6})
	if err != nil {
		return err
	}
	defer api.Close()
	base := api.URL()

	key, err := tenant(ctx, st, "caller")
	if err != nil {
		return err
	}
	// The caller's notifications: one every 2 s back from now, over the -users users, 5 % failed.
	if err := seed(ctx, st, []string{"caller"}, o.mine, o.users); err != nil {
		return err
	}
	c := &client{base: base, key: key, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	fmt.Printf("\n== %d notifications of the caller, none of other tenants ==\n", o.mine)
	alone := measure(c, o)

	var others []string
	for i := range o.otherTenants {
		id := fmt.Sprintf("other-%d", i)
		if _, err := tenant(ctx, st, id); err != nil {
			return err
		}
		others = append(others, id)
	}
	if err := seed(ctx, st, others, o.others, o.users); err != nil {
		return err
	}
	fmt.Printf("\n== the same %d, with %d notifications of %d other tenants ==\n", o.mine, o.others, o.otherTenants)
	crowded := measure(c, o)

	fmt.Printf("\n== p99 of a page, median of %d runs: alone → with the other tenants' rows ==\n", o.runs)
	for _, name := range order {
		fmt.Printf("   %-22s %7.2f ms → %7.2f ms\n", name, ms(alone[name]), ms(crowded[name]))
	}
	return nil
}

// order names the measurements in the order they run.
var order = []string{"first page", "walk (limit 50)", "walk (limit 200)", "status=failed", "created_before", "user_id"}

// measure runs every measurement o.runs times, prints each run, and returns the median p99 of each.
func measure(c *client, o options) map[string]time.Duration {
	mid := c.middle()
	measurements := []struct {
		name string
		run  func() benchutil.Latencies
	}{
		{"first page", func() benchutil.Latencies { return c.repeat("limit=50", o.repeat) }},
		{"walk (limit 50)", func() benchutil.Latencies { return c.walk("limit=50") }},
		{"walk (limit 200)", func() benchutil.Latencies { return c.walk("limit=200") }},
		{"status=failed", func() benchutil.Latencies { return c.repeat("status=failed", o.repeat) }},
		{"created_before", func() benchutil.Latencies { return c.repeat("created_before="+url.QueryEscape(mid), o.repeat) }},
		{"user_id", func() benchutil.Latencies { return c.repeat("user_id=user-7", max(1, o.repeat/3)) }},
	}
	p99s := map[string][]time.Duration{}
	for r := range o.runs {
		for _, m := range measurements {
			l := m.run()
			p99s[m.name] = append(p99s[m.name], l.Percentile(99))
			fmt.Printf("   run %d  %-18s %5d pages: %s\n", r+1, m.name, len(l), l)
		}
	}
	out := map[string]time.Duration{}
	for name, ds := range p99s {
		slices.Sort(ds)
		out[name] = ds[len(ds)/2]
	}
	return out
}

type client struct {
	base, key string
	http      *http.Client
}

type page struct {
	Data []struct {
		CreatedAt string `json:"created_at"`
	} `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// get asks for one page and returns it with its latency.
func (c *client) get(query string) (page, time.Duration) {
	req, _ := http.NewRequest("GET", c.base+"/v1/notifications?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	t0 := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		panic(err)
	}
	var p page
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	took := time.Since(t0)
	if res.StatusCode != http.StatusOK {
		panic(fmt.Sprintf("GET %s: %d %s", query, res.StatusCode, body))
	}
	if err := json.Unmarshal(body, &p); err != nil {
		panic(err)
	}
	return p, took
}

func (c *client) repeat(query string, n int) benchutil.Latencies {
	var l benchutil.Latencies
	for range n {
		_, d := c.get(query)
		l = append(l, d)
	}
	return l
}

// walk follows the cursor from the newest page to the oldest.
func (c *client) walk(query string) benchutil.Latencies {
	var l benchutil.Latencies
	q := query
	for {
		p, d := c.get(q)
		l = append(l, d)
		if p.NextCursor == nil {
			return l
		}
		q = query + "&cursor=" + url.QueryEscape(*p.NextCursor)
	}
}

// middle is the created_at of the caller's median notification (by a walk at the largest page size).
func (c *client) middle() string {
	var times []string
	q := "limit=200"
	for {
		p, _ := c.get(q)
		for _, n := range p.Data {
			times = append(times, n.CreatedAt)
		}
		if p.NextCursor == nil {
			return times[len(times)/2]
		}
		q = "limit=200&cursor=" + url.QueryEscape(*p.NextCursor)
	}
}

func tenant(ctx context.Context, st *store.Store, id string) (string, error) {
	if err := fixture.CreateTenant(ctx, st, id); err != nil {
		return "", err
	}
	return fixture.CreateAPIKey(ctx, st, id)
}

// seed stores n notifications spread over tenants in turn (so that their rows interleave in the table as
// concurrent tenants' do), one every 2 s of created_at back from now, over users users, 5 % failed and
// the rest delivered; then VACUUM ANALYZE, as autovacuum would after such a load.
func seed(ctx context.Context, st *store.Store, tenants []string, n, users int) error {
	start := time.Now()
	const chunk = 100_000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		_, err := st.Pool().Exec(ctx, `
			INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, attempts,
			                           messenger_message_id, created_at, updated_at, delivered_at)
			SELECT gen_random_uuid(), 'tenant', ($2::text[])[1 + g % cardinality($2::text[])], 'user-' || (g % $3), 5,
			       'A message from Bench' || chr(10) || 'notification ' || g,
			       CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'delivered' END, 1, g::text,
			       now() - make_interval(secs => 2 * ($4 - g)), now() - make_interval(secs => 2 * ($4 - g)), now()
			FROM generate_series($1::bigint, $1::bigint + $5 - 1) g`, done, tenants, users, n, k)
		if err != nil {
			return fmt.Errorf("seeding: %w", err)
		}
	}
	if _, err := st.Pool().Exec(ctx, `VACUUM ANALYZE notifications`); err != nil {
		return err
	}
	fmt.Printf("stored %d notifications of %d tenant(s) in %v\n", n, len(tenants), time.Since(start).Round(time.Second))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
