// Command digest measures digests (§14, issue 38) end to end (`make bench-digest`): a private PostgreSQL,
// the embedded Kafka broker, the tenant API, the messenger simulator (global limit 1,000/s, 1/s per chat)
// and one worker.
//
//   - digests: -users users each receive -items sends with one digest key and a 10 s window, sent through
//     POST /v1/send from 64 goroutines; the messages delivered must equal -users, each holding its -items
//     items (the simulator's chats are read). Reported: the time from the first send to the last
//     message delivered ("drain"), the sends accepted per second at the door, and the cost per item.
//   - plain: the same users each receive one plain send, for comparison: drain, and the cost per send.
//
// The cost is the CPU time of this process (the API, the worker, the broker and the simulator, all in
// process; PostgreSQL's is not counted) divided by the items (or sends), from the first send to the last
// delivery. Each run uses fresh state; the figures of -runs runs are printed with their medians.
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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

var (
	runs  = flag.Int("runs", 3, "independent runs")
	users = flag.Int("users", 10_000, "users, each receiving one digest")
	items = flag.Int("items", 10, "sends per user with the digest key")
	limit = flag.Float64("limit", 1000, "the bot's global limit (simulator and worker)")
)

const window = 10 // seconds: the digest's window

type phase struct {
	drain  time.Duration // first send to last delivery
	accept float64       // sends accepted per second at the door
	cpu    time.Duration // this process's CPU time over the phase
	sends  int
}

func (p phase) perItem() time.Duration { return p.cpu / time.Duration(p.sends) }

type result struct{ digest, plain phase }

func main() {
	flag.Parse()
	log.SetFlags(0)
	fmt.Println("machine:", benchutil.Machine())
	fmt.Printf("%d users × %d items with one digest key (window %d s), then %d plain sends; global limit %.0f/s, 1/s per chat\n",
		*users, *items, window, *users, *limit)
	results, err := benchutil.Runs(context.Background(), *runs, run, func(i int, r result) {
		fmt.Printf("run %d: digests drained in %s (%.0f sends/s at the door), %s CPU per item; plain drained in %s (%.0f sends/s), %s CPU per send\n",
			i+1, r.digest.drain.Round(time.Millisecond), r.digest.accept, r.digest.perItem().Round(time.Microsecond),
			r.plain.drain.Round(time.Millisecond), r.plain.accept, r.plain.perItem().Round(time.Microsecond))
	})
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
	med := func(f func(result) float64) float64 { return benchutil.Median(results, f) }
	d := func(f func(result) time.Duration) time.Duration {
		return time.Duration(med(func(r result) float64 { return float64(f(r)) }))
	}
	fmt.Printf("median of %d: digests drained in %s, %.0f sends/s at the door, %s CPU per item (%s per message); plain drained in %s, %.0f sends/s, %s CPU per send\n",
		len(results), d(func(r result) time.Duration { return r.digest.drain }).Round(time.Millisecond),
		med(func(r result) float64 { return r.digest.accept }), d(func(r result) time.Duration { return r.digest.perItem() }).Round(time.Microsecond),
		d(func(r result) time.Duration { return r.digest.perItem() * time.Duration(*items) }).Round(time.Microsecond),
		d(func(r result) time.Duration { return r.plain.drain }).Round(time.Millisecond),
		med(func(r result) float64 { return r.plain.accept }), d(func(r result) time.Duration { return r.plain.perItem() }).Round(time.Microsecond))
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(ctx context.Context, url string, i int) (result, error) {
	var res result
	quiet := slog.New(slog.DiscardHandler)
	b, err := benchutil.StartBackend(ctx, url, 64, "digest"+strconv.Itoa(i), quiet)
	if err != nil {
		return res, err
	}
	defer b.Close()
	st := b.Store
	api, err := benchutil.ServeAPI(st, b.Outbox, quiet, ingress.Options{})
	if err != nil {
		return res, err
	}
	defer api.Close()
	s, simURL, stopSim, err := benchutil.ServeSimulator(sim.Options{GlobalRate: *limit, Logger: quiet})
	if err != nil {
		return res, err
	}
	defer stopSim()
	if err := fixture.CreateTenant(ctx, st, "bench", fixture.DeveloperName("Bench Developer"), fixture.Unlimited()); err != nil {
		return res, err
	}
	key, err := fixture.CreateAPIKey(ctx, st, "bench", fixture.KeyLabel("Bench"))
	if err != nil {
		return res, err
	}
	if err := fixture.VerifiedUsers(ctx, st, "bench", "u", 1, *users, 100000); err != nil {
		return res, err
	}
	for u := 1; u <= *users; u++ {
		if _, err := s.EnsureUser(sim.User{ID: int64(100000 + u)}); err != nil {
			return res, err
		}
	}
	w, err := delivery.New(delivery.Options{
		Store: st, Sender: messenger.New(simURL, s.Token(), nil), Brokers: b.Broker.Addrs(), TopicPrefix: b.Prefix,
		GroupID: "bench", Logger: quiet, RateLimit: *limit, LagInterval: time.Second,
	})
	if err != nil {
		return res, err
	}
	defer benchutil.Run(ctx, w)()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	// send posts one send; a 503 (the API shed it: nothing stored) is sent again, as a client does.
	send := func(fields map[string]any) error {
		body, _ := json.Marshal(fields)
		for try := 0; ; try++ {
			req, _ := http.NewRequest(http.MethodPost, api.URL()+"/v1/send", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusAccepted:
				return nil
			case resp.StatusCode == http.StatusServiceUnavailable && try < 10:
				time.Sleep(time.Duration(try+1) * 100 * time.Millisecond)
			default:
				return fmt.Errorf("send: %d %s", resp.StatusCode, b)
			}
		}
	}
	// sendAll sends n requests from 64 goroutines and returns when all are accepted.
	sendAll := func(n int, fields func(j int) map[string]any) error {
		var wg sync.WaitGroup
		errc := make(chan error, 1)
		next := make(chan int)
		for range 64 {
			wg.Go(func() {
				for j := range next {
					if err := send(fields(j)); err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				}
			})
		}
		for j := range n {
			next <- j
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
	// drained waits until want notifications are delivered in all.
	drained := func(want int) error {
		for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			var n int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE status = 'delivered'`).Scan(&n); err != nil {
				return err
			}
			if n >= want {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d delivered after 10 minutes", n, want)
			}
		}
	}

	// Digests: each user's items are consecutive sends (user u's item k is the send (u-1)×items+k-1), so
	// that they arrive inside one window whatever the door's rate.
	total := *users * *items
	start, cpu0 := time.Now(), cpuTime()
	if err := sendAll(total, func(j int) map[string]any {
		u, k := j / *items + 1, j%*items+1
		return map[string]any{"user_id": "u" + strconv.Itoa(u), "message": fmt.Sprintf("item %d of u%d", k, u),
			"digest": map[string]any{"key": "daily", "window": window}}
	}); err != nil {
		return res, err
	}
	res.digest.accept = float64(total) / time.Since(start).Seconds()
	if err := drained(total); err != nil {
		return res, err
	}
	res.digest.drain, res.digest.cpu, res.digest.sends = time.Since(start), cpuTime()-cpu0, total
	messages := 0
	for u := 1; u <= *users; u++ {
		ms := s.Messages(int64(100000 + u))
		messages += len(ms)
		if len(ms) != 1 {
			return res, fmt.Errorf("user u%d received %d messages, want one digest", u, len(ms))
		}
		for k := 1; k <= *items; k++ {
			if !strings.Contains(ms[0].Text, fmt.Sprintf("item %d of u%d\n", k, u)) && !strings.HasSuffix(ms[0].Text, fmt.Sprintf("item %d of u%d", k, u)) {
				return res, fmt.Errorf("user u%d's digest lacks item %d: %q", u, k, ms[0].Text)
			}
		}
	}
	if messages != *users {
		return res, fmt.Errorf("%d messages delivered, want %d", messages, *users)
	}

	// Plain sends: one per user, as many messages.
	start, cpu0 = time.Now(), cpuTime()
	if err := sendAll(*users, func(j int) map[string]any {
		return map[string]any{"user_id": "u" + strconv.Itoa(j+1), "message": "a plain message"}
	}); err != nil {
		return res, err
	}
	res.plain.accept = float64(*users) / time.Since(start).Seconds()
	if err := drained(total + *users); err != nil {
		return res, err
	}
	res.plain.drain, res.plain.cpu, res.plain.sends = time.Since(start), cpuTime()-cpu0, *users
	return res, nil
}
