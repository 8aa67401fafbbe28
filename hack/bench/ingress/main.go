// Command ingress benchmarks POST /v1/send: a real `herald ingress` process against a private PostgreSQL
// and an in-process Kafka broker (kfake) on this machine. It measures
//
//  1. an open-loop run at a fixed rate (default 3,000/s): accepted sends, p50/p99 latency;
//  2. a closed-loop run: the most sends per second the ingress sustains;
//  3. the floor the architecture allows: the same gated insert and produce issued directly, without HTTP;
//
// and the ingress process's RSS. Run it with `make bench-ingress`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/benchutil"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/kafkatest"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

func main() {
	herald := flag.String("herald", "bin/herald", "path to the herald binary")
	rate := flag.Int("rate", 3000, "open-loop request rate per second")
	duration := flag.Duration("duration", 15*time.Second, "length of each run")
	concurrency := flag.Int("concurrency", 64, "closed-loop and floor concurrency")
	users := flag.Int("users", 5000, "verified users to spread sends over")
	flag.Parse()
	if err := run(*herald, *rate, *duration, *concurrency, *users); err != nil {
		fmt.Fprintln(os.Stderr, "bench-ingress:", err)
		os.Exit(1)
	}
}

func run(herald string, rate int, duration time.Duration, concurrency, users int) error {
	ctx := context.Background()
	fmt.Println("machine:", benchutil.Machine())
	dbURL, stopPG, err := benchutil.Postgres(ctx)
	if err != nil {
		return err
	}
	defer stopPG()
	broker, err := kafkatest.Start("bench", 0, queue.DefaultPartitions)
	if err != nil {
		return err
	}
	defer broker.Close()

	st, err := store.Open(ctx, dbURL, 64)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := seed(ctx, st, users)
	if err != nil {
		return err
	}

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(herald, "ingress")
	cmd.Env = append(os.Environ(),
		"HERALD_DATABASE_URL="+dbURL, "HERALD_KAFKA_BROKERS="+broker.Addrs()[0], "HERALD_KAFKA_TOPIC_PREFIX=bench",
		"HERALD_HTTP_ADDR="+addr, "HERALD_MESSENGER_BOT_USERNAME=bench_bot", "HERALD_LOG_LEVEL=warn", "GOMEMLIMIT=64MiB")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	base := "http://" + addr
	if err := waitReady(base + "/readyz"); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024}, Timeout: 10 * time.Second}
	send := func(i int) (int, error) {
		body := fmt.Sprintf(`{"user_id":"user-%d","message":"Your order %d has shipped","priority":%d}`, i%users, i, i%10)
		req, _ := http.NewRequest("POST", base+"/v1/send", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, nil
	}

	// Warm up connections, caches and the JIT-free but cold pools.
	closedLoop(send, concurrency, 2*time.Second)

	fmt.Printf("\n== open loop: %d sends/s for %v ==\n", rate, duration)
	accepted, failed, lat := openLoop(send, rate, duration)
	fmt.Printf("accepted %d (%.0f/s), failed %d, latency %s\n", accepted, float64(accepted)/duration.Seconds(), failed, lat)

	fmt.Printf("\n== closed loop: %d concurrent senders for %v ==\n", concurrency, duration)
	cAccepted, cFailed, cLat := closedLoop(send, concurrency, duration)
	httpRate := float64(cAccepted) / duration.Seconds()
	fmt.Printf("accepted %d (%.0f/s), failed %d, latency %s\n", cAccepted, httpRate, cFailed, cLat)

	cur, peak, err := benchutil.RSS(cmd.Process.Pid)
	if err == nil {
		fmt.Printf("\ningress RSS: %.1f MB now, %.1f MB peak\n", float64(cur)/1e6, float64(peak)/1e6)
	}

	fmt.Printf("\n== floor: the same batched, gated insert + produce without HTTP, %d concurrent, %v ==\n", concurrency, duration)
	producer := queue.NewProducer(broker.Addrs(), "bench")
	defer producer.Close()
	ob := outbox.New(st, producer, outbox.Options{Logger: slog.New(slog.DiscardHandler)})
	defer ob.Close()
	direct := func(i int) (int, error) {
		userID := "user-" + strconv.Itoa(i%users)
		item := outbox.Item{UserID: userID, Priority: i % 10, Body: brand.Render("Bench", fmt.Sprintf("Your order %d has shipped", i))}
		res, _, err := ob.Send(ctx, "bench", []outbox.Item{item}, nil)
		if err != nil {
			return 0, err
		}
		if !res[0].Accepted() {
			return 0, fmt.Errorf("%s: %s", res[0].Code, res[0].Message)
		}
		return http.StatusAccepted, nil
	}
	fAccepted, fFailed, fLat := closedLoop(direct, concurrency, duration)
	floorRate := float64(fAccepted) / duration.Seconds()
	fmt.Printf("enqueued %d (%.0f/s), failed %d, latency %s\n", fAccepted, floorRate, fFailed, fLat)
	fmt.Printf("\nHTTP / floor throughput ratio: %.2f\n", httpRate/floorRate)
	return nil
}

func seed(ctx context.Context, st *store.Store, users int) (string, error) {
	if err := st.CreateTenant(ctx, "bench", "Bench"); err != nil {
		return "", err
	}
	k := apikey.New()
	if _, err := st.InsertAPIKey(ctx, "bench", k.Digest, k.Prefix, nil, nil); err != nil {
		return "", err
	}
	_, err := st.Pool().Exec(ctx, `
		WITH u AS (SELECT 'user-' || g AS user_id, g FROM generate_series(0, $1 - 1) g),
		     i1 AS (INSERT INTO users (tenant_id, user_id) SELECT 'bench', user_id FROM u),
		     i2 AS (INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id) SELECT 'bench', user_id, 100000 + g, 100000 + g FROM u)
		INSERT INTO phone_verifications (tenant_id, user_id, status, phone_last4, verified_at) SELECT 'bench', user_id, 'verified', '1234', now() FROM u`, users)
	return k.Secret, err
}

// openLoop issues requests at a fixed rate regardless of how fast answers come (no coordinated omission:
// latency is measured from the intended start).
func openLoop(send func(int) (int, error), rate int, d time.Duration) (accepted, failed int64, lat benchutil.Latencies) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	total := int(d / interval)
	for i := 0; i < total; i++ {
		intended := start.Add(time.Duration(i) * interval)
		if w := time.Until(intended); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code, err := send(i)
			el := time.Since(intended)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && code == http.StatusAccepted {
				accepted++
				lat = append(lat, el)
			} else {
				failed++
			}
		}(i)
	}
	wg.Wait()
	return
}

func closedLoop(send func(int) (int, error), concurrency int, d time.Duration) (accepted, failed int64, lat benchutil.Latencies) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var seq atomic.Int64
	deadline := time.Now().Add(d)
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local benchutil.Latencies
			var ok, bad int64
			for time.Now().Before(deadline) {
				i := int(seq.Add(1))
				t0 := time.Now()
				code, err := send(i)
				if err == nil && code == http.StatusAccepted {
					ok++
					local = append(local, time.Since(t0))
				} else {
					bad++
				}
			}
			mu.Lock()
			accepted += ok
			failed += bad
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func waitReady(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("ingress not ready at %s", url)
}
