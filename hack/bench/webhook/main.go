// Command webhook benchmarks POST /messenger/webhook: the real update receiver (internal/updates) behind the
// real router on a real HTTP listener, against a private durable PostgreSQL and an in-process Kafka broker
// (kfake), all on this machine. The load is a mix of /start redemptions (each a fresh valid token: link +
// consume + branded reply), own-contact shares (each completing a pending verification: update + branded
// reply) and updates Herald ignores (edited messages, callbacks, group messages). It measures
//
//  1. an open-loop run at a fixed rate (default 2,000 updates/s): latency from the scheduled send time,
//     so a stall is not hidden by the load generator waiting for it;
//  2. a closed-loop run: the most updates per second the receiver sustains at a given concurrency;
//
// and checks afterwards that every redemption linked and every contact verified exactly once. Run it with
// `make bench-webhook`.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/updates"
)

const (
	secret  = "bench-webhook-secret"
	prefix  = "bench"
	tenants = 10
)

type options struct {
	rate        int
	duration    time.Duration
	concurrency int
	pool        int
	mix         [3]int // start, contact, ignored (weights)
	skipClosed  bool
	waits       bool
	cpuProfile  string
}

func main() {
	server.TuneGC() // the handler runs in this process: tune it as `herald webhook` does
	var o options
	flag.IntVar(&o.rate, "rate", 2000, "open-loop rate, updates per second")
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "length of each run")
	flag.IntVar(&o.concurrency, "concurrency", 32, "closed-loop concurrency")
	flag.IntVar(&o.pool, "pool", 32, "PostgreSQL pool size of the receiver")
	mix := flag.String("mix", "40,30,30", "weights of /start redemptions, contact shares and ignored updates")
	flag.BoolVar(&o.skipClosed, "open-only", false, "skip the closed-loop run")
	flag.BoolVar(&o.waits, "waits", false, "sample PostgreSQL wait events during the runs and print the most frequent")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the runs (this process: receiver and load generator)")
	flag.Parse()
	if _, err := fmt.Sscanf(*mix, "%d,%d,%d", &o.mix[0], &o.mix[1], &o.mix[2]); err != nil || o.mix[0]+o.mix[1]+o.mix[2] <= 0 {
		fmt.Fprintln(os.Stderr, "bench-webhook: -mix must be three weights like 40,30,30")
		os.Exit(2)
	}
	benchutil.Main("bench-webhook", func(ctx context.Context, dbURL string) error { return run(ctx, dbURL, o) })
}

// kinds of generated updates.
const (
	kStart = iota
	kContact
	kIgnored
)

var kindNames = [...]string{"start", "contact", "ignored"}

func run(ctx context.Context, dbURL string, o options) error {
	// The receiver logs like production (JSON, info: one access line per request), to nowhere.
	logger := slog.New(slog.DiscardHandler)
	b, err := benchutil.StartBackend(ctx, dbURL, int32(o.pool), prefix, logger)
	if err != nil {
		return err
	}
	defer b.Close()
	st := b.Store
	rc := updates.New(st, b.Outbox, updates.Options{
		Secret: secret, PhoneHashKey: []byte("bench-phone-hash-key-0123456789"), Logger: logger,
	})
	defer rc.Close()
	r := server.NewRouter(logger)
	rc.Routes(r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	go func() { _ = server.ServeListener(srvCtx, ln, r, logger) }()
	url := "http://" + ln.Addr().String() + updates.Path

	// Enough fixtures for the open-loop run and a closed-loop run of up to 8,000 updates/s.
	perRun := func(rate int) int { return int(float64(rate) * o.duration.Seconds() * 1.1) }
	gen := &generator{mix: o.mix, rng: mrand.New(mrand.NewPCG(1, 2))}
	fmt.Printf("setup: pool %d, %d Kafka partitions, mix start/contact/ignored = %d/%d/%d\n",
		o.pool, queue.DefaultPartitions, o.mix[0], o.mix[1], o.mix[2])
	warm, err := gen.prepare(ctx, st, 2000)
	if err != nil {
		return err
	}
	open, err := gen.prepare(ctx, st, perRun(o.rate))
	if err != nil {
		return err
	}
	var closed []update
	if !o.skipClosed {
		if closed, err = gen.prepare(ctx, st, perRun(8000)); err != nil {
			return err
		}
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
	// Warm up connections, caches and the JIT-less but lazy bits (pool, producer metadata).
	if res := closedLoop(client, url, warm, o.concurrency, 10*time.Second); res.failed > 0 {
		return fmt.Errorf("warm-up: %d of %d updates failed (%s)", res.failed, res.sent, res.firstErr)
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.waits {
		stopWaits := sampleWaits(ctx, st)
		defer stopWaits()
	}
	res := openLoop(client, url, open, o.rate, o.duration)
	res.print(fmt.Sprintf("open loop at %d/s for %s", o.rate, o.duration))
	if !o.skipClosed {
		cres := closedLoop(client, url, closed, o.concurrency, o.duration)
		cres.print(fmt.Sprintf("closed loop, concurrency %d, for %s", o.concurrency, o.duration))
	}
	return gen.check(ctx, st)
}

// update is one prepared webhook body.
type update struct {
	kind int
	body []byte
}

// generator makes updates and the rows they need: a fresh token per /start, a linked user with a pending
// session per contact share.
type generator struct {
	mix      [3]int
	rng      *mrand.Rand
	nextID   int64
	nextUser int64
	starts   int
	contacts int
}

func (g *generator) pick() int {
	n := g.rng.IntN(g.mix[0] + g.mix[1] + g.mix[2])
	switch {
	case n < g.mix[0]:
		return kStart
	case n < g.mix[0]+g.mix[1]:
		return kContact
	}
	return kIgnored
}

func (g *generator) prepare(ctx context.Context, st *store.Store, n int) ([]update, error) {
	if g.nextID == 0 {
		g.nextID = 1_000_000
		for i := range tenants {
			if err := fixture.CreateTenant(ctx, st, "t"+strconv.Itoa(i), fixture.DeveloperName("Developer "+strconv.Itoa(i))); err != nil {
				return nil, err
			}
		}
	}
	out := make([]update, n)
	var users, tokens, links, sessions [][]any
	expires := time.Now().Add(time.Hour)
	for i := range out {
		g.nextID++
		g.nextUser++
		tenant := "t" + strconv.FormatInt(g.nextUser%tenants, 10)
		messengerID := 10_000_000 + g.nextUser
		kind := g.pick()
		var u map[string]any
		switch kind {
		case kStart:
			var b [32]byte
			_, _ = rand.Read(b[:])
			tok := base64.RawURLEncoding.EncodeToString(b[:])
			d := sha256.Sum256([]byte(tok))
			user := "s-" + strconv.FormatInt(g.nextUser, 10)
			users = append(users, []any{tenant, user})
			tokens = append(tokens, []any{d[:], tenant, user, "Label " + tenant, expires})
			u = message(g.nextID, messengerID, "private", map[string]any{"text": "/start " + tok})
			g.starts++
		case kContact:
			user := "c-" + strconv.FormatInt(g.nextUser, 10)
			users = append(users, []any{tenant, user})
			links = append(links, []any{tenant, user, messengerID, messengerID})
			sessions = append(sessions, []any{tenant, user, "pending", expires, "Label " + tenant})
			phone := fmt.Sprintf("1555%07d", g.nextUser%10_000_000)
			u = message(g.nextID, messengerID, "private", map[string]any{
				"contact": map[string]any{"phone_number": phone, "first_name": "Ann", "user_id": messengerID}})
			g.contacts++
		default:
			switch g.nextID % 3 {
			case 0:
				u = map[string]any{"update_id": g.nextID, "edited_message": message(0, messengerID, "private", map[string]any{"text": "edited"})["message"]}
			case 1:
				u = map[string]any{"update_id": g.nextID, "callback_query": map[string]any{"id": strconv.FormatInt(g.nextID, 10), "from": map[string]any{"id": messengerID}, "data": "x"}}
			default:
				u = message(g.nextID, messengerID, "group", map[string]any{"text": "/start hello"})
			}
		}
		body, err := json.Marshal(u)
		if err != nil {
			return nil, err
		}
		out[i] = update{kind: kind, body: body}
	}
	for _, c := range []struct {
		table string
		cols  []string
		rows  [][]any
	}{
		{"users", []string{"tenant_id", "user_id"}, users},
		{"link_tokens", []string{"digest", "tenant_id", "user_id", "label", "expires_at"}, tokens},
		{"links", []string{"tenant_id", "user_id", "messenger_user_id", "chat_id"}, links},
		{"phone_verifications", []string{"tenant_id", "user_id", "status", "session_expires_at", "label"}, sessions},
	} {
		if _, err := st.Pool().CopyFrom(ctx, pgx.Identifier{c.table}, c.cols, pgx.CopyFromRows(c.rows)); err != nil {
			return nil, fmt.Errorf("while seeding %s: %w", c.table, err)
		}
	}
	if _, err := st.Pool().Exec(ctx, `ANALYZE`); err != nil {
		return nil, err
	}
	return out, nil
}

func message(updateID, from int64, chatType string, fields map[string]any) map[string]any {
	chatID := from
	if chatType != "private" {
		chatID = -from
	}
	m := map[string]any{
		"message_id": 1, "date": time.Now().Unix(),
		"from": map[string]any{"id": from, "is_bot": false, "first_name": "Ann"},
		"chat": map[string]any{"id": chatID, "type": chatType},
	}
	for k, v := range fields {
		m[k] = v
	}
	return map[string]any{"update_id": updateID, "message": m}
}

// check verifies the effects: every update sent took effect exactly once.
func (g *generator) check(ctx context.Context, st *store.Store) error {
	var linked, verified, replies int
	err := st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM links WHERE user_id LIKE 's-%'),
		(SELECT count(*) FROM phone_verifications WHERE status = 'verified'),
		(SELECT count(*) FROM notifications WHERE kind = 'system')`).Scan(&linked, &verified, &replies)
	if err != nil {
		return err
	}
	fmt.Printf("check: %d links for %d redemptions answered 200 (%d failed), %d verified for %d contact shares answered 200 (%d failed), %d replies queued\n",
		linked, okStarts.Load(), failedStarts.Load(), verified, okContacts.Load(), failedContacts.Load(), replies)
	// An update that failed (503 after a timeout) may or may not have taken effect — the platform would
	// retry it and the retry would be a duplicate — so failed ones bound the count from above only.
	within := func(n int, ok, failed int64) bool { return int64(n) >= ok && int64(n) <= ok+failed }
	if !within(linked, okStarts.Load(), failedStarts.Load()) || !within(verified, okContacts.Load(), failedContacts.Load()) ||
		!within(replies, okStarts.Load()+okContacts.Load(), failedStarts.Load()+failedContacts.Load()) {
		return errors.New("the effects do not match the updates answered: something took effect twice or not at all")
	}
	return nil
}

var okStarts, okContacts, failedStarts, failedContacts atomic.Int64

type result struct {
	sent, failed int
	elapsed      time.Duration
	lat          [3]benchutil.Latencies
	all          benchutil.Latencies
	firstErr     string
}

func (r result) print(title string) {
	fmt.Printf("%s: %d updates in %.1fs = %.0f updates/s, %d failed\n", title, r.sent, r.elapsed.Seconds(),
		float64(r.sent)/r.elapsed.Seconds(), r.failed)
	fmt.Printf("  all:     %s\n", r.all)
	for k, l := range r.lat {
		if len(l) > 0 {
			fmt.Printf("  %-8s %s (%d)\n", kindNames[k]+":", l, len(l))
		}
	}
	if r.firstErr != "" {
		fmt.Printf("  first error: %s\n", r.firstErr)
	}
}

type collector struct {
	mu  sync.Mutex
	res result
}

func (c *collector) add(kind int, d time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.sent++
	if err != nil {
		switch kind {
		case kStart:
			failedStarts.Add(1)
		case kContact:
			failedContacts.Add(1)
		}
		c.res.failed++
		if c.res.firstErr == "" {
			c.res.firstErr = err.Error()
		}
		return
	}
	c.res.lat[kind] = append(c.res.lat[kind], d)
	c.res.all = append(c.res.all, d)
	switch kind {
	case kStart:
		okStarts.Add(1)
	case kContact:
		okContacts.Add(1)
	}
}

func post(client *http.Client, url string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(updates.PlatformSecretHeader, secret)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok":true`) {
		return fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// openLoop sends updates at rate per second for duration; each request's latency counts from the moment it
// was due, not from when the generator got round to it.
func openLoop(client *http.Client, url string, us []update, rate int, duration time.Duration) result {
	n := min(len(us), int(float64(rate)*duration.Seconds()))
	var c collector
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2048)
	interval := float64(time.Second) / float64(rate)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(math.Round(float64(i) * interval)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(u update) {
			defer wg.Done()
			err := post(client, url, u.body)
			c.add(u.kind, time.Since(due), err)
			<-sem
		}(us[i])
	}
	wg.Wait()
	c.res.elapsed = time.Since(start)
	return c.res
}

// closedLoop runs concurrency senders back to back for duration (or until the updates run out).
func closedLoop(client *http.Client, url string, us []update, concurrency int, duration time.Duration) result {
	var c collector
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(duration)
	for range concurrency {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				i := next.Add(1) - 1
				if i >= int64(len(us)) {
					return
				}
				t0 := time.Now()
				err := post(client, url, us[i].body)
				c.add(us[i].kind, time.Since(t0), err)
			}
		})
	}
	wg.Wait()
	c.res.elapsed = time.Since(start)
	return c.res
}

// sampleWaits polls pg_stat_activity every 20 ms and, when stopped, prints how often each wait event was
// seen among active backends: where transactions spend their time inside PostgreSQL.
func sampleWaits(ctx context.Context, st *store.Store) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	counts := map[string]int{}
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := st.Pool().Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), state FROM pg_stat_activity
				WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle'`)
			if err != nil {
				continue
			}
			samples++
			for rows.Next() {
				var ev, state string
				if rows.Scan(&ev, &state) == nil {
					counts[state+" "+ev]++
				}
			}
			rows.Close()
		}
	}()
	return func() {
		cancel()
		<-done
		type kv struct {
			k string
			v int
		}
		var all []kv
		for k, v := range counts {
			all = append(all, kv{k, v})
		}
		sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
		fmt.Printf("PostgreSQL wait events (active backends per sample, %d samples):\n", samples)
		for i, e := range all {
			if i == 12 {
				break
			}
			fmt.Printf("  %6.2f  %s\n", float64(e.v)/float64(max(samples, 1)), e.k)
		}
	}
}
