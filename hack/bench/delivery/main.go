// Command delivery benchmarks the delivery worker end to end (`make bench-delivery`): a private
// PostgreSQL, the embedded Kafka broker, the tenant API and the messenger simulator answering in 50 ms with
// the paid-broadcast limit of 1,000 messages per second, and one worker.
//
//   - throughput: a backlog of -backlog notifications to as many chats, sent through the API before the
//     worker starts; deliveries per second from the first delivery to the last.
//   - latency: -rate sends per second through the API for -duration; median and p95 from the 202 to the
//     delivered status in PostgreSQL.
//
// Each run uses fresh state; the figures of -runs runs are printed with their medians. The simulator's
// limit violations must be zero.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

var (
	runs      = flag.Int("runs", 3, "independent runs")
	backlog   = flag.Int("backlog", 15000, "notifications in the throughput backlog")
	rate      = flag.Int("rate", 100, "sends per second in the latency phase")
	duration  = flag.Duration("duration", 10*time.Second, "length of the latency phase")
	limit     = flag.Float64("limit", 1000, "the bot's global limit (simulator and worker)")
	latencyMS = flag.Int("latency", 50, "simulator answer latency in ms")
	verbose   = flag.Bool("v", false, "log the worker's warnings to stderr")
	cpuprof   = flag.String("cpuprofile", "", "write a CPU profile of the last run's throughput phase")
	replace   = flag.Bool("replace", false, "half the latency phase's sends replace (§13: replace_key) a backlog user's message: edits, reported apart")
)

type result struct {
	throughput float64
	p50, p95   time.Duration
	violations int64
}

func main() { os.Exit(benchmark()) }

// benchmark runs the benchmark and returns the exit status.
func benchmark() int {
	flag.Parse()
	log.SetFlags(0)
	host, _ := os.Hostname()
	fmt.Printf("machine: %s, %s/%s, %d CPUs, %s\n", host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Printf("simulator: %d ms latency, global limit %.0f/s, 1/s per chat; backlog %d; latency phase %d/s for %v\n",
		*latencyMS, *limit, *backlog, *rate, *duration)
	results, err := benchutil.Runs(context.Background(), *runs, run, func(i int, r result) {
		fmt.Printf("run %d: throughput %.0f deliveries/s, latency p50 %v p95 %v, limit violations %d\n",
			i+1, r.throughput, r.p50.Round(100*time.Microsecond), r.p95.Round(100*time.Microsecond), r.violations)
	})
	if err != nil {
		log.Print(err)
		return 1
	}
	med := func(f func(result) float64) float64 { return benchutil.Median(results, f) }
	var violations int64
	for _, r := range results {
		violations += r.violations
	}
	tp := med(func(r result) float64 { return r.throughput })
	p50 := time.Duration(med(func(r result) float64 { return float64(r.p50) }))
	fmt.Printf("median of %d runs: throughput %.0f deliveries/s (target ≥ 950), latency p50 %v (target < 100 ms), p95 %v, violations %d (target 0)\n",
		len(results), tp, p50.Round(100*time.Microsecond),
		time.Duration(med(func(r result) float64 { return float64(r.p95) })).Round(100*time.Microsecond), violations)
	if tp < 950 || p50 >= 100*time.Millisecond || violations != 0 {
		fmt.Println("FAIL")
		return 1
	}
	fmt.Println("PASS")
	return 0
}

func run(ctx context.Context, url string, i int) (result, error) {
	var res result
	quiet := slog.New(slog.DiscardHandler)
	b, err := benchutil.StartBackend(ctx, url, 64, "bench"+strconv.Itoa(i), quiet)
	if err != nil {
		return res, err
	}
	defer b.Close()
	st := b.Store
	api, err := benchutil.ServeAPI(b.Store, b.Outbox, quiet, ingress.Options{})
	if err != nil {
		return res, err
	}
	defer api.Close()
	apiURL := api.URL()
	s, simURL, stopSim, err := benchutil.ServeSimulator(sim.Options{GlobalRate: *limit, Logger: quiet})
	if err != nil {
		return res, err
	}
	defer stopSim()
	if err := s.SetFaults(sim.Faults{LatencyMS: *latencyMS}); err != nil {
		return res, err
	}

	// Tenant, key, and one linked, verified user per chat.
	users := *backlog + *rate*int(duration.Seconds()) + 10
	// The benchmark measures delivery, not the tenant's limits at the door.
	if err := fixture.CreateTenant(ctx, st, "bench", fixture.DeveloperName("Bench Developer"), fixture.Unlimited()); err != nil {
		return res, err
	}
	key, err := fixture.CreateAPIKey(ctx, st, "bench", fixture.KeyLabel("Bench"))
	if err != nil {
		return res, err
	}
	if err := fixture.VerifiedUsers(ctx, st, "bench", "u", 1, users, 100000); err != nil {
		return res, err
	}
	for u := 1; u <= users; u++ {
		if _, err := s.EnsureUser(sim.User{ID: int64(100000 + u)}); err != nil {
			return res, err
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	send := func(user int, prio int) (string, time.Time, error) {
		fields := map[string]any{"user_id": "u" + strconv.Itoa(user), "message": "benchmark message", "priority": prio}
		if *replace {
			// Every send carries the key: a backlog user's later send edits its message (-replace).
			fields["replace_key"] = "status"
			fields["message"] = "benchmark message " + strconv.FormatInt(time.Now().UnixNano(), 36)
		}
		body, _ := json.Marshal(fields)
		req, _ := http.NewRequest("POST", apiURL+"/v1/send", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return "", time.Time{}, err
		}
		at := time.Now()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusAccepted {
			return "", at, fmt.Errorf("send: %d %s", resp.StatusCode, b)
		}
		var out struct {
			TrackingID string `json:"tracking_id"`
		}
		err = json.Unmarshal(b, &out)
		return out.TrackingID, at, err
	}

	// Throughput: the backlog goes in before the worker starts.
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for u := range next {
				if _, _, err := send(u, 5); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		})
	}
	for u := 1; u <= *backlog; u++ {
		next <- u
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return res, err
	default:
	}

	if *cpuprof != "" && i == *runs-1 {
		stop, err := startProfile(*cpuprof)
		if err != nil {
			return res, err
		}
		defer stop()
	}
	// What the deliveries cost: PostgreSQL's whole cluster, and this process (the worker, and beside it the
	// simulator, the broker and the polling below): per delivery, a figure a busy machine moves less than
	// the rate (../shared/benchmarking.md).
	postmaster, err := benchutil.PostmasterPID(ctx, url)
	if err != nil {
		return res, err
	}
	pg0, _ := benchutil.TreeCPUTime(postmaster)
	own0, _ := benchutil.CPUTime(os.Getpid())
	w, err := delivery.New(delivery.Options{
		Store: st, Sender: messenger.New(simURL, s.Token(), nil), Brokers: b.Broker.Addrs(), TopicPrefix: b.Prefix,
		GroupID: "bench", Logger: workerLogger(quiet), RateLimit: *limit, LagInterval: time.Second,
	})
	if err != nil {
		return res, err
	}
	defer benchutil.Run(ctx, w)()

	var first, last time.Time
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE status = 'delivered'`).Scan(&n); err != nil {
			return res, err
		}
		if n >= *backlog {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d delivered after 5 minutes", n, *backlog)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The simulator's clock: first to last message received.
	for u := 1; u <= *backlog; u++ {
		for _, m := range s.Messages(int64(100000 + u)) {
			if first.IsZero() || m.Time.Before(first) {
				first = m.Time
			}
			if m.Time.After(last) {
				last = m.Time
			}
		}
	}
	res.throughput = float64(*backlog-1) / last.Sub(first).Seconds()
	pg1, _ := benchutil.TreeCPUTime(postmaster)
	own1, _ := benchutil.CPUTime(os.Getpid())
	fmt.Printf("  CPU per delivery: PostgreSQL %.0f µs, this process (worker, simulator, broker) %.0f µs\n",
		float64((pg1-pg0).Microseconds())/float64(*backlog), float64((own1-own0).Microseconds())/float64(*backlog))
	st0 := s.Stats()
	fmt.Printf("  throughput phase: %.0f deliveries/s, limit violations so far %d (global %d, per chat %d)\n", res.throughput,
		st0.LimitViolations, st0.GlobalLimitViolations, st0.ChatLimitViolations)

	// Latency: a steady rate of sends, each to a fresh chat.
	type sent struct {
		id string
		at time.Time
	}
	total := *rate * int(duration.Seconds())
	out := make([]sent, total)
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	var lwg sync.WaitGroup
	for j := range total {
		<-tick.C
		lwg.Go(func() {
			user := *backlog + 1 + j
			if *replace && j%2 == 0 {
				user = j/2%*backlog + 1 // a backlog user: its message, delivered in the throughput phase, is edited
			}
			id, at, err := send(user, 5)
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
			out[j] = sent{id, at}
		})
	}
	tick.Stop()
	lwg.Wait()
	select {
	case err := <-errc:
		return res, err
	default:
	}
	ids := make([]string, total)
	for j, s := range out {
		ids[j] = s.id
	}
	var lat []time.Duration
	deadline = time.Now().Add(time.Minute)
	for {
		rows, err := st.Pool().Query(ctx, `SELECT tracking_id::text, updated_at FROM notifications WHERE tracking_id = ANY($1::uuid[]) AND status = 'delivered'`, ids)
		if err != nil {
			return res, err
		}
		at := map[string]time.Time{}
		for rows.Next() {
			var id string
			var t time.Time
			_ = rows.Scan(&id, &t)
			at[id] = t
		}
		rows.Close()
		if len(at) == total {
			for _, s := range out {
				lat = append(lat, at[s.id].Sub(s.at))
			}
			break
		}
		if time.Now().After(deadline) {
			var summary []string
			rows, _ := st.Pool().Query(ctx, `(SELECT status || ':' || count(*) FROM notifications WHERE tracking_id = ANY($1::uuid[]) GROUP BY status) UNION ALL (SELECT user_id FROM notifications WHERE tracking_id = ANY($1::uuid[]) AND status = 'queued' LIMIT 5)`, ids)
			for rows.Next() {
				var s string
				_ = rows.Scan(&s)
				summary = append(summary, s)
			}
			rows.Close()
			return res, fmt.Errorf("latency phase: %d of %d delivered after a minute: %v", len(at), total, summary)
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	if *replace {
		// The two halves apart: the sends that edit (even j) and the plain ones (odd j).
		var edited, plain []time.Duration
		for j, s := range out {
			if j%2 == 0 {
				edited = append(edited, deliveredAfter(ctx, st, s.id, s.at))
			} else {
				plain = append(plain, deliveredAfter(ctx, st, s.id, s.at))
			}
		}
		var edits int
		_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tracking_id = ANY($1::uuid[]) AND delivered_as = 'edited'`, ids).Scan(&edits)
		for _, h := range [][]time.Duration{edited, plain} {
			sort.Slice(h, func(a, b int) bool { return h[a] < h[b] })
		}
		fmt.Printf("  replace: %d of %d delivered as edits; 202→delivered p50 %v p95 %v (replacing) vs p50 %v p95 %v (plain)\n",
			edits, len(edited), edited[len(edited)/2].Round(100*time.Microsecond), edited[len(edited)*95/100].Round(100*time.Microsecond),
			plain[len(plain)/2].Round(100*time.Microsecond), plain[len(plain)*95/100].Round(100*time.Microsecond))
	}
	res.p50, res.p95 = lat[len(lat)/2], lat[len(lat)*95/100]
	stEnd := s.Stats()
	res.violations = stEnd.LimitViolations
	fmt.Printf("  latency phase: limit violations in it %d (global %d, per chat %d); edits %d\n", stEnd.LimitViolations-st0.LimitViolations,
		stEnd.GlobalLimitViolations-st0.GlobalLimitViolations, stEnd.ChatLimitViolations-st0.ChatLimitViolations, stEnd.Edits)
	return res, nil
}

func workerLogger(quiet *slog.Logger) *slog.Logger {
	if *verbose {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return quiet
}

// deliveredAfter is how long after at the notification id was recorded delivered.
func deliveredAfter(ctx context.Context, st *store.Store, id string, at time.Time) time.Duration {
	var t time.Time
	_ = st.Pool().QueryRow(ctx, `SELECT updated_at FROM notifications WHERE tracking_id = $1`, id).Scan(&t)
	return t.Sub(at)
}
