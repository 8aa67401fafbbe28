// Command callbacks benchmarks status callbacks (`make bench-callbacks`), on a private PostgreSQL, the
// embedded Kafka broker, the messenger simulator and a local receiver:
//
//   - sender: -events notification.delivered events queued for -endpoints endpoints (5 per tenant), sent by
//     one `herald callbacks` sender with its default settings to a receiver that verifies every signature
//     and answers 204 after -latency; events per second from the first acknowledged to the last.
//   - delivery path: what recording the events costs the delivery worker. A backlog of -backlog
//     notifications, each to its own chat, is delivered by one worker with the bot's limit out of the way
//     (-limit) and the simulator answering at once, so the worker and PostgreSQL are the bottleneck; once for
//     a tenant without endpoints (off) and once for a tenant with -on-endpoints endpoints (5, the most a
//     tenant may have) subscribed to every event (on: each terminal status write records its event for 5
//     endpoints). After a warm-up backlog, -pairs pairs of phases, alternating which goes first, so that
//     both kinds see the same machine; each kind's rate is its deliveries over its phases' total time. A
//     last backlog is delivered while a sender sends the events it records to the receiver, on the same
//     machine (on + sender); every one of them must arrive, signed.
//
// Each run uses fresh state; the figures of -runs runs are printed with their medians.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

var (
	runs      = flag.Int("runs", 3, "independent runs")
	events    = flag.Int("events", 20000, "events in the sender phase")
	endpoints = flag.Int("endpoints", 20, "endpoints in the sender phase (5 per tenant)")
	latency   = flag.Duration("latency", 20*time.Millisecond, "the receiver's answer time")
	backlog   = flag.Int("backlog", 5000, "notifications per delivery phase")
	pairs     = flag.Int("pairs", 3, "off and on delivery phases per run, alternating, so that both see the same machine")
	onEPs     = flag.Int("on-endpoints", 5, "endpoints (1..5) of each tenant whose notifications record events")
	limit     = flag.Float64("limit", 100000, "the bot's global limit in the delivery phases (out of the way)")
	verbose   = flag.Bool("v", false, "log the components' warnings to stderr")
)

type result struct {
	eventsPerSec               float64
	off, on, onSender          float64 // deliveries per second
	duplicates, badSignatures  int64
	eventsRecorded, eventsWant int
}

func main() { os.Exit(benchmark()) }

func benchmark() int {
	flag.Parse()
	log.SetFlags(0)
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("machine: %s, %s/%s, %d CPUs, %s, load average at start %s\n", host, runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.Version(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("sender: %d events, %d endpoints, receiver answers in %v; delivery: %d pairs of phases of %d notifications, %d endpoints per tenant when on, limit %.0f/s, simulator answers at once\n",
		*events, *endpoints, *latency, *pairs, *backlog, *onEPs, *limit)
	results, err := benchutil.Runs(context.Background(), *runs, run, func(i int, r result) {
		fmt.Printf("run %d: sender %.0f events/s (duplicates %d, bad signatures %d); delivery off %.0f/s, on %.0f/s (%+.1f %%), on + sender %.0f/s (%+.1f %%); events recorded %d of %d\n",
			i+1, r.eventsPerSec, r.duplicates, r.badSignatures, r.off, r.on, pct(r.on, r.off), r.onSender, pct(r.onSender, r.off),
			r.eventsRecorded, r.eventsWant)
	})
	if err != nil {
		log.Print(err)
		return 1
	}
	med := func(f func(result) float64) float64 { return benchutil.Median(results, f) }
	costs := med(func(r result) float64 { return -pct(r.on, r.off) })
	fmt.Printf("median of %d runs: sender %.0f events/s; delivery off %.0f/s, on %.0f/s, on + sender %.0f/s; cost of recording the events %.1f %% (target ≤ 10 %%), with the sender on the same machine %.1f %%\n",
		len(results), med(func(r result) float64 { return r.eventsPerSec }), med(func(r result) float64 { return r.off }),
		med(func(r result) float64 { return r.on }), med(func(r result) float64 { return r.onSender }), costs,
		med(func(r result) float64 { return -pct(r.onSender, r.off) }))
	for _, r := range results {
		if r.badSignatures != 0 || r.eventsRecorded != r.eventsWant {
			fmt.Println("FAIL: a signature did not verify, or events were lost")
			return 1
		}
	}
	if costs > 10 {
		fmt.Println("FAIL")
		return 1
	}
	fmt.Println("PASS")
	return 0
}

func pct(x, base float64) float64 { return (x - base) / base * 100 }

// receiver plays the tenants' endpoints: it verifies every signature, waits, answers 204, and counts.
type receiver struct {
	secrets     map[string]signing.Secret // by URL path
	latency     time.Duration
	mu          sync.Mutex
	seen        map[string]bool
	first, last time.Time
	dups, bad   atomic.Int64
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := signing.Verify(r.Header, body, time.Now(), signing.DefaultTolerance, rc.secrets[r.URL.Path]); err != nil {
		rc.bad.Add(1)
	}
	time.Sleep(rc.latency)
	now := time.Now()
	rc.mu.Lock()
	id := r.Header.Get(signing.HeaderID) + r.URL.Path
	if rc.seen[id] {
		rc.dups.Add(1)
	}
	rc.seen[id] = true
	if rc.first.IsZero() {
		rc.first = now
	}
	rc.last = now
	rc.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.seen)
}

func run(ctx context.Context, url string, i int) (result, error) {
	var res result
	quiet := slog.New(slog.DiscardHandler)
	logger := quiet
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	b, err := benchutil.StartBackend(ctx, url, 64, "bench"+strconv.Itoa(i), quiet)
	if err != nil {
		return res, err
	}
	defer b.Close()
	st := b.Store
	key, _ := signing.ParseKey(signing.GenerateKey())
	policy := egress.Policy{AllowInsecure: true, AllowPrivate: true}

	api, err := benchutil.ServeAPI(b.Store, b.Outbox, quiet, ingress.Options{CallbackKey: key, CallbackPolicy: policy})
	if err != nil {
		return res, err
	}
	defer api.Close()
	apiURL := api.URL()
	s, simURL, stopSim, err := benchutil.ServeSimulator(sim.Options{GlobalRate: *limit, PerChatRate: 100, PerChatBurst: 100, Logger: quiet})
	if err != nil {
		return res, err
	}
	defer stopSim()
	rc := &receiver{secrets: map[string]signing.Secret{}, latency: *latency, seen: map[string]bool{}}
	rcServed, err := benchutil.Serve(rc)
	if err != nil {
		return res, err
	}
	defer rcServed.Close()
	rcURL := rcServed.URL()

	newTenant := func(id string) (string, error) {
		if err := fixture.CreateTenant(ctx, st, id, fixture.Unlimited()); err != nil {
			return "", err
		}
		return fixture.CreateAPIKey(ctx, st, id)
	}
	addEndpoint := func(tenant, path string) (string, error) {
		id, secret, err := fixture.CreateCallbackEndpoint(ctx, st, key, tenant, rcURL+path)
		rc.secrets[path] = secret
		return id, err
	}

	// Sender phase: the events are queued directly, each for a delivered notification of its endpoint's tenant.
	var eps []string
	for e := range *endpoints {
		tenant := "cb" + strconv.Itoa(e/store.MaxCallbackEndpoints)
		if e%store.MaxCallbackEndpoints == 0 {
			if _, err := newTenant(tenant); err != nil {
				return res, err
			}
		}
		id, err := addEndpoint(tenant, "/ep/"+strconv.Itoa(e))
		if err != nil {
			return res, err
		}
		eps = append(eps, id)
	}
	if _, err := st.Pool().Exec(ctx, `
		WITH n AS (
			INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, attempts, messenger_message_id)
			SELECT gen_random_uuid(), 'tenant', ep.tenant_id, 'u' || g, 5, 'hello', 'delivered', 1, g::text
			FROM generate_series(1, $1) g JOIN callback_endpoints ep ON ep.id = ($2::uuid[])[1 + g % cardinality($2::uuid[])]
			RETURNING tracking_id, tenant_id, user_id)
		INSERT INTO callback_events (event_id, endpoint_id, type, tracking_id)
		SELECT gen_random_uuid(), ep.id, 'notification.delivered', n.tracking_id
		FROM n JOIN callback_endpoints ep ON ep.tenant_id = n.tenant_id
		  AND ep.id = ($2::uuid[])[1 + substring(n.user_id from 2)::int % cardinality($2::uuid[])]`, *events, eps); err != nil {
		return res, err
	}
	sender, err := callback.New(callback.Options{Store: st, Key: key, Policy: policy, Logger: logger})
	if err != nil {
		return res, err
	}
	stopSender := benchutil.Run(ctx, sender)
	defer stopSender()
	if err := waitFor(5*time.Minute, func() bool { return rc.count() >= *events }); err != nil {
		return res, fmt.Errorf("sender phase: %d of %d events: %w", rc.count(), *events, err)
	}
	rc.mu.Lock()
	res.eventsPerSec = float64(*events-1) / rc.last.Sub(rc.first).Seconds()
	rc.mu.Unlock()
	_ = stopSender()

	// Delivery phases.
	users := 0
	delivered := map[string]int{}
	deliver := func(tenant, apiKey string, withSender bool) (time.Duration, error) {
		first := users + 1
		users += *backlog
		if err := fixture.VerifiedUsers(ctx, st, tenant, "u", first, *backlog, 100000); err != nil {
			return 0, err
		}
		for u := first; u <= users; u++ {
			if _, err := s.EnsureUser(sim.User{ID: int64(100000 + u)}); err != nil {
				return 0, err
			}
		}
		if err := sendBacklog(apiURL, apiKey, first, users); err != nil {
			return 0, err
		}
		if withSender {
			snd, err := callback.New(callback.Options{Store: st, Key: key, Policy: policy, Logger: logger})
			if err != nil {
				return 0, err
			}
			defer benchutil.Run(ctx, snd)()
		}
		w, err := delivery.New(delivery.Options{
			Store: st, Sender: messenger.New(simURL, s.Token(), nil), Brokers: b.Broker.Addrs(), TopicPrefix: b.Prefix,
			GroupID: "bench", Logger: logger, RateLimit: *limit, LagInterval: time.Second,
		})
		if err != nil {
			return 0, err
		}
		defer benchutil.Run(ctx, w)()
		delivered[tenant] += *backlog
		err = waitFor(5*time.Minute, func() bool {
			var n int
			_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tenant_id = $1 AND status = 'delivered'`, tenant).Scan(&n)
			return n >= delivered[tenant]
		})
		if err != nil {
			return 0, fmt.Errorf("delivery for %s: %w", tenant, err)
		}
		var t0, t1 time.Time
		for u := first; u <= users; u++ {
			for _, m := range s.Messages(int64(100000 + u)) {
				if t0.IsZero() || m.Time.Before(t0) {
					t0 = m.Time
				}
				if m.Time.After(t1) {
					t1 = m.Time
				}
			}
		}
		took := t1.Sub(t0)
		if withSender {
			// Every event the phase recorded reaches the receiver, signed, before the sender stops.
			want := *events + *backlog**onEPs
			if err := waitFor(5*time.Minute, func() bool { return rc.count() >= want }); err != nil {
				return 0, fmt.Errorf("the last phase's events: %d of %d: %w", rc.count()-*events, *backlog**onEPs, err)
			}
		}
		return took, nil
	}
	rate := func(phases int, took time.Duration) float64 { return float64(phases*(*backlog-1)) / took.Seconds() }
	offKey, err := newTenant("off")
	if err != nil {
		return res, err
	}
	onKey, err := newTenant("on")
	if err != nil {
		return res, err
	}
	bothKey, err := newTenant("both")
	if err != nil {
		return res, err
	}
	for e := range *onEPs {
		if _, err := addEndpoint("on", "/on/"+strconv.Itoa(e)); err != nil {
			return res, err
		}
		if _, err := addEndpoint("both", "/both/"+strconv.Itoa(e)); err != nil {
			return res, err
		}
	}
	// A warm-up backlog first, so that neither measured phase pays for a cold start (the consumer group's
	// first join, PostgreSQL's caches).
	warmKey, err := newTenant("warm")
	if err != nil {
		return res, err
	}
	if _, err := deliver("warm", warmKey, false); err != nil {
		return res, err
	}
	// Pairs of phases, alternating which goes first, so that both kinds see the same machine.
	var offTook, onTook time.Duration
	for p := range *pairs {
		order := []string{"off", "on"}
		if (p+i)%2 == 1 {
			order = []string{"on", "off"}
		}
		for _, tenant := range order {
			key := map[string]string{"off": offKey, "on": onKey}[tenant]
			took, err := deliver(tenant, key, false)
			if err != nil {
				return res, err
			}
			if tenant == "off" {
				offTook += took
			} else {
				onTook += took
			}
		}
	}
	res.off, res.on = rate(*pairs, offTook), rate(*pairs, onTook)
	// The on phase's events, recorded in the inbox (one row per event) and not sent, are counted and set
	// aside: the sender of the last phase sends only what that phase records, as it is recorded.
	var recorded int
	if err := st.Pool().QueryRow(ctx, `
		WITH gone AS (DELETE FROM callback_inbox WHERE tenant_id = 'on' RETURNING 1)
		SELECT count(*) FROM gone`).Scan(&recorded); err != nil {
		return res, err
	}
	recorded *= *onEPs // each goes to every endpoint of the tenant
	took, err := deliver("both", bothKey, true)
	if err != nil {
		return res, err
	}
	res.onSender = rate(1, took)
	res.eventsRecorded = recorded + rc.count() - *events
	res.eventsWant = (*pairs + 1) * *backlog * *onEPs
	res.duplicates, res.badSignatures = rc.dups.Load(), rc.bad.Load()
	return res, nil
}

// sendBacklog sends one notification to each user from first to last through the API, 64 at a time.
func sendBacklog(apiURL, key string, first, last int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for u := range next {
				body, _ := json.Marshal(map[string]any{"user_id": "u" + strconv.Itoa(u), "message": "benchmark message"})
				req, _ := http.NewRequest("POST", apiURL+"/v1/send", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("send: %d %s", resp.StatusCode, b)
					}
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		})
	}
	for u := first; u <= last; u++ {
		next <- u
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
