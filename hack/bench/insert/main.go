// Command insert is a focused timing of the send's insert — the statement that gates and stores a batch
// of sends (store.InsertTenantNotifications), without HTTP or Kafka — on a private, durable PostgreSQL
// (internal/testing/benchutil): notifications stored per second, the statement's p50/p99, and the WAL it writes per
// notification. It compares, alternating in rounds in the same cluster:
//
//   - "before": the statement as it was before the v1 extensions (no option columns, no lock);
//   - "herald": the statement as Herald runs it: the option columns, and the shared advisory locks of its
//     users' buckets taken in the same round trip, so that a send racing the erasure of its user
//     serialises with it (store.InsertTenantNotifications);
//   - "keyshare": the alternative design for that serialisation, kept here to show why it was not chosen:
//     the gate locks the user's verification row FOR KEY SHARE (a tuple lock, written to the WAL);
//
// first on an empty table, then again after -backlog scheduled notifications (due in 30 days) were
// stored, to show what such a backlog costs the sends. Run it with `make bench-insert`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// beforeSQL is the send's insert before the v1 extensions (internal/store/notifications.go at 4789db3).
const beforeSQL = `
	INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, published_at)
	SELECT r.tracking_id, 'tenant', r.tenant_id, r.user_id, r.priority, r.body, 'queued', now()
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[], $5::text[]) AS r(tracking_id, tenant_id, user_id, priority, body)
	WHERE EXISTS (
		SELECT 1 FROM phone_verifications v JOIN links l USING (tenant_id, user_id)
		WHERE v.tenant_id = r.tenant_id AND v.user_id = r.user_id AND v.status = 'verified')
	RETURNING tracking_id::text`

// keyshareSQL is beforeSQL with the gate as a join that locks the verification row.
const keyshareSQL = `
	INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, published_at)
	SELECT r.tracking_id, 'tenant', r.tenant_id, r.user_id, r.priority, r.body, 'queued', now()
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::smallint[], $5::text[]) AS r(tracking_id, tenant_id, user_id, priority, body)
	JOIN phone_verifications v ON v.tenant_id = r.tenant_id AND v.user_id = r.user_id AND v.status = 'verified'
	JOIN links l ON l.tenant_id = r.tenant_id AND l.user_id = r.user_id
	FOR KEY SHARE OF v
	RETURNING tracking_id::text`

var variants = []string{"before", "herald", "keyshare"}

type options struct {
	users, batch, callers, rounds, backlog int
	duration                               time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.users, "users", 5000, "verified users the sends go to")
	flag.IntVar(&o.batch, "batch", 128, "sends per statement (the outbox's batches hold up to 256)")
	flag.IntVar(&o.callers, "callers", 2, "concurrent statements (the outbox runs 2 batch loops)")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of each variant, alternating")
	flag.IntVar(&o.backlog, "backlog", 1_000_000, "scheduled notifications stored before the second half (0 skips it)")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "length of each measurement")
	flag.Parse()
	benchutil.Main("bench-insert", func(ctx context.Context, dbURL string) error { return run(ctx, dbURL, o) })
}

func run(ctx context.Context, dbURL string, o options) error {
	st, err := store.Open(ctx, dbURL, int32(o.callers+2))
	if err != nil {
		return err
	}
	defer st.Close()
	if err := fixture.CreateTenant(ctx, st, "bench", fixture.DeveloperName("Bench")); err != nil {
		return err
	}
	if err := fixture.VerifiedUsers(ctx, st, "bench", "user-", 0, o.users, 100000); err != nil {
		return err
	}
	fmt.Printf("%d callers, statements of %d sends, %v each, %d rounds\n", o.callers, o.batch, o.duration, o.rounds)
	compare(ctx, st, o, "empty table")
	if o.backlog > 0 {
		start := time.Now()
		if err := benchutil.ScheduledBacklog(ctx, st, "bench", "user-", o.users, o.backlog); err != nil {
			return err
		}
		fmt.Printf("\nstored a backlog of %d scheduled notifications in %v\n", o.backlog, time.Since(start).Round(time.Second))
		compare(ctx, st, o, fmt.Sprintf("with %d scheduled", o.backlog))
	}
	return nil
}

type result struct {
	rate     float64 // notifications stored per second
	lat      benchutil.Latencies
	walPerNo float64 // WAL bytes per notification
}

// compare runs both variants o.rounds times, alternating, and prints each run and the medians.
func compare(ctx context.Context, st *store.Store, o options, title string) {
	fmt.Printf("\n== %s ==\n", title)
	rates := map[string][]float64{}
	p99s := map[string][]time.Duration{}
	wals := map[string][]float64{}
	for r := range o.rounds {
		for _, variant := range variants {
			res := measure(ctx, st, o, variant)
			rates[variant] = append(rates[variant], res.rate)
			p99s[variant] = append(p99s[variant], res.lat.Percentile(99))
			wals[variant] = append(wals[variant], res.walPerNo)
			fmt.Printf("   round %d %-8s %7.0f notifications/s, statement %s, %4.0f WAL bytes per notification\n",
				r+1, variant, res.rate, res.lat, res.walPerNo)
		}
	}
	for _, variant := range variants {
		fmt.Printf("   median   %-8s %7.0f notifications/s, statement p99 %.2f ms, %4.0f WAL bytes per notification\n",
			variant, median(rates[variant]), float64(medianD(p99s[variant]))/1e6, median(wals[variant]))
	}
}

func measure(ctx context.Context, st *store.Store, o options, variant string) result {
	var lsn0, lsn1 string
	_ = st.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0)
	var stored atomic.Int64
	var mu sync.Mutex
	var lat benchutil.Latencies
	var seq atomic.Int64
	deadline := time.Now().Add(o.duration)
	var wg sync.WaitGroup
	for range o.callers {
		wg.Go(func() {
			var mine benchutil.Latencies
			for time.Now().Before(deadline) {
				ns := make([]store.NewNotification, o.batch)
				for i := range ns {
					n := int(seq.Add(1))
					ns[i] = store.NewNotification{TrackingID: uuid.Must(uuid.NewV7()).String(), Kind: notification.KindTenant, TenantID: "bench",
						UserID: "user-" + strconv.Itoa(n%o.users), Priority: n % 10, Body: "A message from Bench\nYour order " + strconv.Itoa(n) + " has shipped"}
				}
				t0 := time.Now()
				k, err := insert(ctx, st, variant, ns)
				if err != nil {
					fmt.Fprintln(os.Stderr, "insert:", err)
					return
				}
				mine = append(mine, time.Since(t0))
				stored.Add(int64(k))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	var wal float64
	_ = st.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn1)
	_ = st.Pool().QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)`, lsn1, lsn0).Scan(&wal)
	return result{rate: float64(stored.Load()) / o.duration.Seconds(), lat: lat, walPerNo: wal / float64(max(1, stored.Load()))}
}

func insert(ctx context.Context, st *store.Store, variant string, ns []store.NewNotification) (int, error) {
	if variant == "herald" {
		got, err := st.InsertTenantNotifications(ctx, ns)
		return len(got), err
	}
	ids := make([]string, len(ns))
	tenants := make([]string, len(ns))
	users := make([]string, len(ns))
	prios := make([]int16, len(ns))
	bodies := make([]string, len(ns))
	for i, n := range ns {
		ids[i], tenants[i], users[i], prios[i], bodies[i] = n.TrackingID, n.TenantID, n.UserID, int16(n.Priority), n.Body
	}
	q := beforeSQL
	if variant == "keyshare" {
		q = keyshareSQL
	}
	tag, err := st.Pool().Exec(ctx, q, ids, tenants, users, prios, bodies)
	return int(tag.RowsAffected()), err
}

func median(v []float64) float64 { return benchutil.Median(v, func(x float64) float64 { return x }) }

func medianD(v []time.Duration) time.Duration {
	return time.Duration(benchutil.Median(v, func(d time.Duration) float64 { return float64(d) }))
}
