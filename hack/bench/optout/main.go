// Command optout measures issue 35's worst case after its fix, on a private durable PostgreSQL and an
// in-process Kafka broker, with the real webhook receiver and tenant API on real HTTP listeners:
//
//  1. a user with 300,000 waiting notifications (-backlog) sends /stop through the webhook beside ten other
//     users' /stop: the time until each is acknowledged (all must stay under one second), and the time
//     until the covered notifications have all ended (after the acknowledgement, in chunks);
//  2. tenant B's POST /v1/send/batch (100 sends) latency, alone and during a flood of tenant A's
//     POST /v1/users/{id}/opt-out (8 connections, each opt-out ending a user's backlog of 2,000);
//  3. the erasure (DELETE /v1/users/{id}) of another of A's users with as many waiting notifications, whose
//     gate bucket one of B's batch users shares: the time until the 204, the time the sweep's pass then
//     takes to cancel and empty them all (store.FinishEndings, as the delivery workers' sweep runs it), and
//     B's batch latency during that pass.
//
// Each run uses a fresh database; the report gives each run and the medians of -runs runs. Run it with
// `make bench-optout`.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/updates"
)

const (
	secret       = "bench-optout-secret"
	others       = 10
	floodUsers   = 100
	floodBacklog = 2000
	batchSize    = 100
)

type options struct {
	runs    int
	backlog int
	flood   time.Duration
}

type result struct {
	stop        time.Duration // the heavy user's /stop, until acknowledged
	othersMax   time.Duration // the slowest of the ten others beside it
	ended       time.Duration // from the /stop until every covered notification ended
	batchAlone  benchutil.Latencies
	batchFlood  benchutil.Latencies
	optOuts     int64 // opt-outs answered 204 during the flood
	optOutsSlow time.Duration
	erase       time.Duration // DELETE /v1/users/{id} of a user with the backlog, until the 204
	erasePass   time.Duration // the sweep's pass after it, until every notification is cancelled and emptied
	batchErase  benchutil.Latencies
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "runs, each on a fresh database")
	flag.IntVar(&o.backlog, "backlog", 300_000, "waiting notifications of the user who sends /stop")
	flag.DurationVar(&o.flood, "flood", 5*time.Second, "how long tenant A floods opt-outs")
	flag.Parse()
	fmt.Println("machine:", benchutil.Machine())
	ctx := context.Background()
	results, err := benchutil.Runs(ctx, o.runs, func(ctx context.Context, dbURL string, i int) (result, error) {
		return run(ctx, dbURL, o)
	}, func(i int, r result) {
		fmt.Printf("run %d: /stop acknowledged in %s, ten others ≤ %s, all %d ended after %s; B's batch p50/p99 alone %s/%s, during %d opt-outs (slowest %s) %s/%s\n",
			i+1, ms(r.stop), ms(r.othersMax), o.backlog, r.ended.Round(time.Millisecond),
			ms(r.batchAlone.Percentile(50)), ms(r.batchAlone.Percentile(99)), r.optOuts, ms(r.optOutsSlow),
			ms(r.batchFlood.Percentile(50)), ms(r.batchFlood.Percentile(99)))
		fmt.Printf("run %d: erasure of %d answered 204 in %s, its pass ended them in %s; B's batch (a user of the same gate bucket) p50/p99 during the pass %s/%s (%d batches)\n",
			i+1, o.backlog, ms(r.erase), r.erasePass.Round(time.Millisecond),
			ms(r.batchErase.Percentile(50)), ms(r.batchErase.Percentile(99)), len(r.batchErase))
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-optout:", err)
		os.Exit(1)
	}
	med := func(f func(r result) time.Duration) string {
		return ms(time.Duration(benchutil.Median(results, func(r result) float64 { return float64(f(r)) })))
	}
	fmt.Printf("median of %d: /stop %s, others ≤ %s, ended after %s; B's batch p50 alone %s, p50/p99 during the flood %s/%s\n",
		len(results), med(func(r result) time.Duration { return r.stop }), med(func(r result) time.Duration { return r.othersMax }),
		med(func(r result) time.Duration { return r.ended }),
		med(func(r result) time.Duration { return r.batchAlone.Percentile(50) }),
		med(func(r result) time.Duration { return r.batchFlood.Percentile(50) }),
		med(func(r result) time.Duration { return r.batchFlood.Percentile(99) }))
	fmt.Printf("median of %d: erasure answered in %s, its pass %s; B's batch p50/p99 during the pass %s/%s\n",
		len(results), med(func(r result) time.Duration { return r.erase }), med(func(r result) time.Duration { return r.erasePass }),
		med(func(r result) time.Duration { return r.batchErase.Percentile(50) }),
		med(func(r result) time.Duration { return r.batchErase.Percentile(99) }))
}

// gateBucket is store.userGateBucket, repeated here (it is the store's own): the advisory-lock bucket of a
// tenant's user, one of 1,024 every tenant shares.
func gateBucket(tenant, user string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(user))
	return h.Sum32() % 1024
}

// sameBucketUser is a user id of tenant a, prefix+"0", whose gate bucket one of b's users g0…g99 shares.
func sameBucketUser() (prefix string) {
	var bs []uint32
	for j := range batchSize {
		bs = append(bs, gateBucket("b", fmt.Sprintf("g%d", j)))
	}
	for i := 0; ; i++ {
		if prefix = fmt.Sprintf("e%d-", i); slices.Contains(bs, gateBucket("a", prefix+"0")) {
			return prefix
		}
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func run(ctx context.Context, dbURL string, o options) (result, error) {
	var res result
	logger := slog.New(slog.DiscardHandler)
	b, err := benchutil.StartBackend(ctx, dbURL, 40, "optout", logger)
	if err != nil {
		return res, err
	}
	defer b.Close()
	st := b.Store
	rc := updates.New(st, b.Outbox, updates.Options{Secret: secret, PhoneHashKey: []byte("bench-phone-hash-key-0123456789"), Logger: logger})
	defer rc.Close()
	r := server.NewRouter(logger)
	rc.Routes(r)
	hook, err := benchutil.Serve(r)
	if err != nil {
		return res, err
	}
	defer hook.Close()
	api, err := benchutil.ServeAPI(st, b.Outbox, logger, ingress.Options{})
	if err != nil {
		return res, err
	}
	defer api.Close()

	// Tenant A: user u0 (messenger 1000) with the backlog, u1…u10 beside it; f0…f99 for the flood, each
	// with a backlog of its own. Tenant B: g0…g99, who receive B's batches.
	for _, t := range []string{"a", "b"} {
		if err := fixture.CreateTenant(ctx, st, t, fixture.Unlimited()); err != nil {
			return res, err
		}
	}
	if err := fixture.VerifiedUsers(ctx, st, "a", "u", 0, 1+others, 1000); err != nil {
		return res, err
	}
	if err := fixture.VerifiedUsers(ctx, st, "a", "f", 0, floodUsers, 20000); err != nil {
		return res, err
	}
	if err := fixture.VerifiedUsers(ctx, st, "b", "g", 0, batchSize, 50000); err != nil {
		return res, err
	}
	if err := benchutil.ScheduledBacklog(ctx, st, "a", "u", 1, o.backlog); err != nil {
		return res, err
	}
	if err := benchutil.ScheduledBacklog(ctx, st, "a", "f", floodUsers, floodUsers*floodBacklog); err != nil {
		return res, err
	}
	erased := sameBucketUser()
	if err := fixture.VerifiedUsers(ctx, st, "a", erased, 0, 1, 30000); err != nil {
		return res, err
	}
	if err := benchutil.ScheduledBacklog(ctx, st, "a", erased, 1, o.backlog); err != nil {
		return res, err
	}
	keyA, err := fixture.CreateAPIKey(ctx, st, "a")
	if err != nil {
		return res, err
	}
	keyB, err := fixture.CreateAPIKey(ctx, st, "b")
	if err != nil {
		return res, err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

	// 1. /stop of the heavy user beside ten others, all at once.
	var wg sync.WaitGroup
	took := make([]time.Duration, 1+others)
	codes := make([]int, 1+others)
	start := time.Now()
	for i := range 1 + others {
		wg.Go(func() {
			body, _ := json.Marshal(map[string]any{"update_id": 1 + i, "message": map[string]any{
				"message_id": 1, "date": time.Now().Unix(), "text": "/stop",
				"from": map[string]any{"id": 1000 + i, "is_bot": false, "first_name": "U"},
				"chat": map[string]any{"id": 1000 + i, "type": "private"}}})
			t0 := time.Now()
			codes[i] = post(client, hook.URL()+updates.Path, body, updates.SecretHeader, secret)
			took[i] = time.Since(t0)
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			return res, fmt.Errorf("update %d answered %d", i+1, c)
		}
	}
	res.stop = took[0]
	for _, d := range took[1:] {
		res.othersMax = max(res.othersMax, d)
	}
	for {
		var left int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM endings_due`).Scan(&left); err != nil {
			return res, err
		}
		if left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.ended = time.Since(start)
	var ended int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tenant_id = 'a' AND user_id = 'u0' AND status = 'blocked'`).Scan(&ended); err != nil {
		return res, err
	}
	if ended != o.backlog {
		return res, fmt.Errorf("%d of the %d notifications ended", ended, o.backlog)
	}

	// 2. B's batches alone, then during A's flood of opt-outs.
	batch := func(n int) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"notifications":[`)
		for j := range batchSize {
			if j > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"user_id":"g%d","message":"Order %d has shipped"}`, j, n*batchSize+j)
		}
		buf.WriteString(`]}`)
		return buf.Bytes()
	}
	batches := func(d time.Duration) (benchutil.Latencies, error) {
		var lat benchutil.Latencies
		for n, end := 0, time.Now().Add(d); time.Now().Before(end); n++ {
			t0 := time.Now()
			if c := post(client, api.URL()+"/v1/send/batch", batch(n), "Authorization", "Bearer "+keyB); c != http.StatusOK && c != http.StatusAccepted && c != http.StatusMultiStatus {
				return nil, fmt.Errorf("tenant B's batch answered %d", c)
			}
			lat = append(lat, time.Since(t0))
		}
		return lat, nil
	}
	if res.batchAlone, err = batches(2 * time.Second); err != nil {
		return res, err
	}
	var next, done atomic.Int64
	var slowest atomic.Int64
	floodCtx, stopFlood := context.WithCancel(ctx)
	for range 8 {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				i := next.Add(1) - 1
				// First the whole tenant for each user (ending its backlog), then categories.
				body := []byte(`{}`)
				if i >= floodUsers {
					body = fmt.Appendf(nil, `{"category":"c%d"}`, i/floodUsers)
				}
				t0 := time.Now()
				if post(client, fmt.Sprintf("%s/v1/users/f%d/opt-out", api.URL(), i%floodUsers), body, "Authorization", "Bearer "+keyA) == http.StatusNoContent {
					done.Add(1)
				}
				if d := int64(time.Since(t0)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		})
	}
	res.batchFlood, err = batches(o.flood)
	stopFlood()
	wg.Wait()
	res.optOuts, res.optOutsSlow = done.Load(), time.Duration(slowest.Load())
	sort.Slice(res.batchFlood, func(i, j int) bool { return res.batchFlood[i] < res.batchFlood[j] })
	if err != nil {
		return res, err
	}

	// 3. The erasure of a user with the backlog, then the sweep's pass, B's batches beside it.
	t0 := time.Now()
	if c := do(client, http.MethodDelete, api.URL()+"/v1/users/"+erased+"0", "Authorization", "Bearer "+keyA); c != http.StatusNoContent {
		return res, fmt.Errorf("the erasure answered %d", c)
	}
	res.erase = time.Since(t0)
	passDone := make(chan error, 1)
	t0 = time.Now()
	go func() {
		_, _, err := st.FinishEndings(ctx, store.UserRef{TenantID: "a", UserID: erased + "0"}, 0)
		res.erasePass = time.Since(t0)
		passDone <- err
	}()
	for n := 0; ; n++ {
		select {
		case err := <-passDone:
			if err != nil {
				return res, err
			}
			var left int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tenant_id = 'a' AND user_id = $1
				AND (status <> 'cancelled' OR body <> '')`, erased+"0").Scan(&left); err != nil {
				return res, err
			}
			if left != 0 {
				return res, fmt.Errorf("%d notifications of the erased user not cancelled and emptied", left)
			}
			sort.Slice(res.batchErase, func(i, j int) bool { return res.batchErase[i] < res.batchErase[j] })
			return res, nil
		default:
		}
		b0 := time.Now()
		if c := post(client, api.URL()+"/v1/send/batch", batch(1_000_000+n), "Authorization", "Bearer "+keyB); c != http.StatusOK && c != http.StatusAccepted && c != http.StatusMultiStatus {
			return res, fmt.Errorf("tenant B's batch answered %d", c)
		}
		res.batchErase = append(res.batchErase, time.Since(b0))
	}
}

// do sends a request without a body with one header and returns the status (0: no answer).
func do(c *http.Client, method, url, header, value string) int {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0
	}
	req.Header.Set(header, value)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// post sends body with one header and returns the status (0: no answer).
func post(c *http.Client, url string, body []byte, header, value string) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, value)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
