// Command fairness measures Herald's fairness between tenants and its limits at the door, on real
// components in one process (a private PostgreSQL, the Kafka-protocol broker, the tenant API, a delivery
// worker, the messenger simulator), and prints:
//
//  1. a quiet tenant's 202 → delivered latency (p50, p99 over -samples sends to as many users, one every
//     500 ms) while a noisy tenant has -backlog notifications queued, at the bot's global rate of -rate per
//     second;
//  2. fifty messages to fifty chats behind a hundred to one chat of the same tenant: how long the fifty
//     take (at -rate2 per second, one message per second per chat);
//  3. three ingress replicas holding one tenant to -limit sends per second (burst = limit): sends accepted
//     over -duration while far more are offered, spread evenly and unevenly, against what the limit allows.
//
// Run it with `make bench-fairness`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

var (
	rate     = flag.Float64("rate", 30, "the bot's global rate for part 1 (messages per second)")
	backlog  = flag.Int("backlog", 3000, "the noisy tenant's backlog in part 1")
	samples  = flag.Int("samples", 20, "quiet sends in part 1")
	rate2    = flag.Float64("rate2", 100, "the bot's global rate for part 2")
	limit    = flag.Int("limit", 100, "the tenant's sends per second in part 3 (burst the same)")
	duration = flag.Duration("duration", 10*time.Second, "length of part 3")
)

func main() {
	flag.Parse()
	benchutil.Main("bench-fairness", run)
}

// pipeline is one set of components on a fresh database.
type pipeline struct {
	st     *store.Store
	api    string
	sim    *sim.Server
	simURL string
	stop   []func()
}

func (p *pipeline) close() {
	for i := len(p.stop) - 1; i >= 0; i-- {
		p.stop[i]()
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newPipeline(ctx context.Context, url string, globalRate float64) (*pipeline, error) {
	p := &pipeline{}
	b, err := benchutil.StartBackend(ctx, url, 64, "fair"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10), quiet())
	if err != nil {
		return nil, err
	}
	p.st = b.Store
	p.stop = append(p.stop, b.Close)
	api, err := benchutil.ServeAPI(b.Store, b.Outbox, quiet(), ingress.Options{})
	if err != nil {
		p.close()
		return nil, err
	}
	p.api = api.URL()
	p.stop = append(p.stop, api.Close)
	var stopSim func()
	if p.sim, p.simURL, stopSim, err = benchutil.ServeSimulator(sim.Options{GlobalRate: globalRate, Logger: quiet()}); err != nil {
		p.close()
		return nil, err
	}
	p.stop = append(p.stop, stopSim)
	w, err := delivery.New(delivery.Options{Store: b.Store, Sender: messenger.New(p.simURL, p.sim.Token(), nil), Brokers: b.Broker.Addrs(),
		TopicPrefix: b.Prefix, GroupID: "fair", Outbox: b.Outbox, Logger: quiet(), RateLimit: globalRate})
	if err != nil {
		p.close()
		return nil, err
	}
	stopWorker := benchutil.Run(ctx, w)
	p.stop = append(p.stop, func() { _ = stopWorker() })
	return p, nil
}

// tenant creates a tenant with limits high enough not to matter, users u0..u(n-1) linked to chats
// base+i and verified, and returns its key.
func (p *pipeline) tenant(ctx context.Context, id string, n int, base int64) (string, error) {
	if err := fixture.CreateTenant(ctx, p.st, id, fixture.Unlimited()); err != nil {
		return "", err
	}
	key, err := fixture.CreateAPIKey(ctx, p.st, id)
	if err != nil {
		return "", err
	}
	if err := fixture.VerifiedUsers(ctx, p.st, id, "u", 0, n, base); err != nil {
		return "", err
	}
	for i := range n {
		if _, err := p.sim.EnsureUser(sim.User{ID: base + int64(i)}); err != nil {
			return "", err
		}
	}
	return key, nil
}

// send posts one notification and returns its tracking id.
func send(api, key, user, msg string) (string, error) {
	req, _ := http.NewRequest("POST", api+"/v1/send", strings.NewReader(fmt.Sprintf(`{"user_id":%q,"message":%q}`, user, msg)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("send: %d %s", res.StatusCode, b)
	}
	i := strings.Index(string(b), `"tracking_id":"`)
	return string(b[i+15 : i+15+36]), nil
}

// deliveredAt waits until the notification is delivered and returns when (the row's updated_at).
func (p *pipeline) deliveredAt(ctx context.Context, id string, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		var status string
		var at time.Time
		if err := p.st.Pool().QueryRow(ctx, `SELECT status, updated_at FROM notifications WHERE tracking_id = $1`, id).Scan(&status, &at); err != nil {
			return at, err
		}
		if status == "delivered" {
			return at, nil
		}
		if time.Now().After(deadline) {
			return at, fmt.Errorf("%s still %s after %v", id, status, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func run(ctx context.Context, url string) error {
	if err := quietTenant(ctx, url); err != nil {
		return err
	}
	if err := busyChat(ctx, url); err != nil {
		return err
	}
	return replicas(ctx, url)
}

// 1. A quiet tenant under a noisy backlog.
func quietTenant(ctx context.Context, url string) error {
	p, err := newPipeline(ctx, url, *rate)
	if err != nil {
		return err
	}
	defer p.close()
	noisyKey, err := p.tenant(ctx, "noisy", 300, 500000)
	if err != nil {
		return err
	}
	// One quiet user per sample, so each sample measures the wait for a turn, not its chat's interval.
	quietKey, err := p.tenant(ctx, "quiet", *samples, 600000)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < *backlog; i += 16 {
				if _, err := send(p.api, noisyKey, "u"+strconv.Itoa(i%300), "noisy"); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		return fmt.Errorf("%d noisy sends failed", failed.Load())
	}
	var lat []time.Duration
	for i := range *samples {
		at := time.Now()
		id, err := send(p.api, quietKey, "u"+strconv.Itoa(i), "quiet")
		if err != nil {
			return err
		}
		done, err := p.deliveredAt(ctx, id, 60*time.Second)
		if err != nil {
			return err
		}
		lat = append(lat, done.Sub(at))
		time.Sleep(500 * time.Millisecond)
	}
	var waiting int
	_ = p.st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tenant_id = 'noisy' AND status <> 'delivered'`).Scan(&waiting)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("\n== 1. quiet tenant behind a noisy backlog of %d at %.0f/s ==\n", *backlog, *rate)
	fmt.Printf("   quiet 202 → delivered over %d sends: p50 %v, p99 %v, max %v (target: within 3 s); noisy still waiting at the end: %d\n",
		len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[(len(lat)*99)/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), waiting)
	fmt.Printf("   simulator: %d limit violations\n", p.sim.Stats().LimitViolations)
	return nil
}

// 2. One busy chat and fifty others.
func busyChat(ctx context.Context, url string) error {
	p, err := newPipeline(ctx, url, *rate2)
	if err != nil {
		return err
	}
	defer p.close()
	key, err := p.tenant(ctx, "acme", 51, 700000)
	if err != nil {
		return err
	}
	for range 100 {
		if _, err := send(p.api, key, "u0", "busy"); err != nil {
			return err
		}
	}
	start := time.Now()
	var ids []string
	for i := 1; i <= 50; i++ {
		id, err := send(p.api, key, "u"+strconv.Itoa(i), "other")
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	var last time.Time
	for _, id := range ids {
		at, err := p.deliveredAt(ctx, id, 120*time.Second)
		if err != nil {
			return err
		}
		if at.After(last) {
			last = at
		}
	}
	fmt.Printf("\n== 2. fifty chats behind a hundred messages to one chat, at %.0f/s and 1/s per chat ==\n", *rate2)
	fmt.Printf("   the fifty were delivered %v after they were sent (the one chat's hundred take ~100 s); busy chat received %d meanwhile; violations %d\n",
		last.Sub(start).Round(time.Millisecond), len(p.sim.Messages(700000)), p.sim.Stats().LimitViolations)
	return nil
}

// 3. Three replicas, one limit.
func replicas(ctx context.Context, url string) error {
	b, err := benchutil.StartBackend(ctx, url, 64, "repl", quiet())
	if err != nil {
		return err
	}
	defer b.Close()
	st := b.Store
	l := int32(*limit)
	if err := fixture.CreateTenant(ctx, st, "limited", fixture.DeveloperName("Limited"), fixture.Limits(store.TenantLimits{SendsPerSecond: &l, Burst: &l})); err != nil {
		return err
	}
	key, err := fixture.CreateAPIKey(ctx, st, "limited")
	if err != nil {
		return err
	}
	if err := fixture.VerifiedUsers(ctx, st, "limited", "u", 0, 1, 1); err != nil {
		return err
	}
	// Three replicas, each with its own producer and outbox, as each its own process.
	outboxes := []*outbox.Outbox{b.Outbox}
	for range 2 {
		p := queue.NewProducer(b.Broker.Addrs(), "repl")
		defer p.Close()
		ob := outbox.New(st, p, outbox.Options{Logger: quiet()})
		defer ob.Close()
		outboxes = append(outboxes, ob)
	}
	var apis []string
	for _, ob := range outboxes {
		api, err := benchutil.ServeAPI(st, ob, quiet(), ingress.Options{})
		if err != nil {
			return err
		}
		defer api.Close()
		apis = append(apis, api.URL())
	}
	fmt.Printf("\n== 3. three ingress replicas, one tenant limited to %d sends/s (burst %d), offered far more for %v ==\n", *limit, *limit, *duration)
	for _, spread := range []struct {
		name    string
		workers [3]int
	}{{"even", [3]int{4, 4, 4}}, {"uneven (8:3:1)", [3]int{8, 3, 1}}} {
		time.Sleep(time.Duration(float64(*limit)/float64(*limit)) * time.Second) // let the bucket refill
		var accepted atomic.Int64
		deadline := time.Now().Add(*duration)
		var wg sync.WaitGroup
		for r, n := range spread.workers {
			for range n {
				wg.Go(func() {
					for time.Now().Before(deadline) {
						if _, err := send(apis[r], key, "u0", "x"); err == nil {
							accepted.Add(1)
						} else {
							time.Sleep(2 * time.Millisecond)
						}
					}
				})
			}
		}
		wg.Wait()
		want := float64(*limit) + float64(*limit)*duration.Seconds()
		fmt.Printf("   %s: accepted %d, the limit allows %.0f: %.1f%%\n", spread.name, accepted.Load(), want, 100*float64(accepted.Load())/want)
	}
	return nil
}
