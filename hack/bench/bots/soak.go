package main

// Part 5, the soak (issue 43): the shared bot at -soak-bot-rate, one tenant with -soak-users users each in
// a chat of it, POST /v1/send at -soak-rate a second for -soak-duration through `herald ingress`, with
// `herald webhook` beside it and -soak-workers `herald worker` processes delivering: every component the
// process it is in production, PostgreSQL its own, the broker and the simulator in this one. It reads what
// a tenant and its users see — the answers' latency, the backlog (accepted, not yet sent) every second,
// each message's delay from its send's intended moment to the simulator's receipt — and where the CPU
// went.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

var (
	soakRate     = flag.Int("soak-rate", 800, "part 5: POST /v1/send a second, open loop")
	soakDuration = flag.Duration("soak-duration", 3*time.Minute, "part 5: how long the sends go on")
	soakUsers    = flag.Int("soak-users", 2000, "part 5: the tenant's users, each in a chat of the shared bot")
	soakWorkers  = flag.Int("soak-workers", 2, "part 5: worker processes")
	soakBotRate  = flag.Int("soak-bot-rate", 1000, "part 5: the shared bot's rate (the simulator's and the workers')")
	soakProfile  = flag.String("soak-profile", "", "part 5: a directory for every statement's pg_stat_statements figures and the server's log")
)

// soakChatBase is the first chat of the soak's users (chat soakChatBase+i is user-i's).
const soakChatBase = 5_000_000

func soakRun(ctx context.Context, url string) error {
	p, err := newPipeline(ctx, url)
	if err != nil {
		return err
	}
	defer p.close()
	l := p.sim.Limits()
	l.GlobalRate, l.GlobalBurst = float64(*soakBotRate), max(3, *soakBotRate/20)
	if err := p.sim.SetLimits(l); err != nil {
		return err
	}
	st := p.b.Store
	if err := fixture.CreateTenant(ctx, st, "soak", fixture.Unlimited()); err != nil {
		return err
	}
	key, err := fixture.CreateAPIKey(ctx, st, "soak")
	if err != nil {
		return err
	}
	if err := fixture.VerifiedUsers(ctx, st, "soak", "user-", 0, *soakUsers, soakChatBase); err != nil {
		return err
	}
	shared := p.sim.DefaultBot()
	for i := range *soakUsers {
		if _, err := shared.StartUser(soakChatBase+int64(i), ""); err != nil {
			return err
		}
	}
	common := []string{"HERALD_DATABASE_URL=" + url, "HERALD_KAFKA_BROKERS=" + strings.Join(p.b.Broker.Addrs(), ","),
		"HERALD_KAFKA_TOPIC_PREFIX=" + p.b.Prefix, "HERALD_LOG_LEVEL=warn"}
	ingress, err := startComponent(ctx, "ingress", append(common, "HERALD_MESSENGER_BOT_USERNAME="+shared.Info().Username)...)
	if err != nil {
		return err
	}
	defer ingress.stop()
	webhook, err := startComponent(ctx, "webhook", append(common, "HERALD_WEBHOOK_SECRET=soak-webhook-secret-0123456789", "HERALD_PHONE_HASH_KEY=soak-phone-hash-key-0123456789",
		"HERALD_MESSENGER_API_URL="+p.simURL, "HERALD_MESSENGER_BOT_TOKEN="+p.sim.Token(), "HERALD_BOT_TOKEN_KEY="+p.keyText)...)
	if err != nil {
		return err
	}
	defer webhook.stop()
	procs, err := p.startProcessWorkers(ctx, url, *soakWorkers, "HERALD_MESSENGER_RATE_LIMIT="+strconv.Itoa(*soakBotRate))
	if err != nil {
		return err
	}
	defer procs.stop()

	// Warm-up: the ingress's connections and caches, the workers' partitions. Not counted.
	warm := benchutil.OpenLoop(ingress.addr, 16, 64, 100, 2*time.Second, func(i int) []byte {
		return benchutil.PostJSON(ingress.addr, "/v1/send", fmt.Appendf(nil, `{"user_id":"user-%d","message":"warm %d"}`, i%*soakUsers, i),
			"Authorization: Bearer "+key)
	})
	for shared.Stats().Delivered < warm.OK() {
		time.Sleep(100 * time.Millisecond)
	}
	delivered0 := shared.Stats().Delivered
	// pg_stat_statements when the cluster loaded it (run): the statements of the soak alone.
	_, statErr := st.Pool().Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	if statErr == nil {
		_, statErr = st.Pool().Exec(ctx, `SELECT pg_stat_statements_reset()`)
	}

	// The backlog, every second: what was accepted and is not yet sent (queued or delivering, and retrying).
	var samples []soakSample
	sampling, stopSampling := context.WithCancel(ctx)
	var sampled sync.WaitGroup
	start := time.Now()
	sampled.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sampling.Done():
				return
			case <-t.C:
			}
			var n int64
			if err := st.Pool().QueryRow(sampling, `SELECT (SELECT count(*) FROM notifications WHERE status IN ('queued', 'delivering'))
				+ (SELECT count(*) FROM notifications WHERE status = 'retrying')`).Scan(&n); err == nil {
				samples = append(samples, soakSample{time.Since(start), n})
			}
		}
	})

	cpu0 := map[string]float64{"ingress": cpuSeconds(ingress.cmd.Process.Pid), "webhook": cpuSeconds(webhook.cmd.Process.Pid),
		"postgres": serverCPU(pgPID), "bench": selfCPU()}
	load0 := loadAverage()
	// Each message's text names its send; the send's intended moment is the open loop's start plus its
	// place in the schedule (OpenLoop's clock: its first request is built when the loop starts).
	var loopStart atomic.Int64
	interval := time.Second / time.Duration(*soakRate)
	res := benchutil.OpenLoop(ingress.addr, 64, 2048, *soakRate, *soakDuration, func(i int) []byte {
		if i == 0 {
			loopStart.Store(time.Now().UnixNano())
		}
		return benchutil.PostJSON(ingress.addr, "/v1/send", fmt.Appendf(nil, `{"user_id":"user-%d","message":"soak %d"}`, i%*soakUsers, i),
			"Authorization: Bearer "+key)
	})
	sendsEnded := time.Since(start)
	accepted := res.OK()
	var drainErr error
	for deadline := time.Now().Add(5 * time.Minute); shared.Stats().Delivered-delivered0 < accepted; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			drainErr = fmt.Errorf("%d of %d delivered 5 minutes after the sends ended", shared.Stats().Delivered-delivered0, accepted)
			break
		}
	}
	drained := time.Since(start)
	stopSampling()
	sampled.Wait()
	cpu := map[string]float64{"ingress": cpuSeconds(ingress.cmd.Process.Pid) - cpu0["ingress"],
		"webhook": cpuSeconds(webhook.cmd.Process.Pid) - cpu0["webhook"], "workers": procs.cpu(),
		"postgres": serverCPU(pgPID) - cpu0["postgres"], "bench": selfCPU() - cpu0["bench"]}
	load1 := loadAverage()

	fmt.Printf("   load average before / after: %s / %s\n", load0, load1)
	fmt.Printf("   answers: %d of %d sends accepted (%s), %.0f/s; latency from the intended send p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		accepted, int(*soakDuration/interval), res.CodesString(), res.Rate(), ms(res.Latency.Percentile(50)), ms(res.Latency.Percentile(99)),
		ms(res.Latency.Percentile(100)))
	var peak soakSample
	at60 := int64(-1)
	for _, s := range samples {
		if s.backlog > peak.backlog {
			peak = s
		}
		if at60 < 0 && s.at >= time.Minute {
			at60 = s.backlog
		}
	}
	fmt.Printf("   backlog (accepted, not yet sent): peak %d at %.0f s, %d at 60 s, %d when the sends ended; drained %.1f s after them\n",
		peak.backlog, peak.at.Seconds(), at60, backlogAt(samples, sendsEnded), (drained - sendsEnded).Seconds())
	fmt.Printf("   backlog every 10 s: %s\n", backlogSeries(samples))
	delays, dups := soakDelays(shared, *soakUsers, time.Unix(0, loopStart.Load()), interval)
	fmt.Printf("   delivered %d; delay from the intended send to the platform's receipt: p50 %.1f ms, p99 %.1f ms, max %.1f ms; duplicates %d\n",
		len(delays), ms(delays.Percentile(50)), ms(delays.Percentile(99)), ms(delays.Percentile(100)), dups)
	s := shared.Stats()
	fmt.Printf("   simulator, the shared bot: %d sends over its rate in a sliding second, %d to a chat under the interval, %d answered 429\n",
		s.SlidingSecondViolations, s.ChatIntervalViolations, s.Answered429)
	total := 0.0
	var parts []string
	for _, k := range []string{"ingress", "webhook", "workers", "postgres", "bench"} {
		total += cpu[k]
		parts = append(parts, fmt.Sprintf("%s %.1f", k, cpu[k]))
	}
	fmt.Printf("   CPU-seconds over the run (%.0f s): %s (the simulator and the load); %.1f in all, %.2f cores\n",
		drained.Seconds(), strings.Join(parts, ", "), total, total/drained.Seconds())
	fmt.Printf("   per worker at the end: %s\n", procs.waits())
	if drainErr != nil {
		return drainErr
	}
	if statErr != nil {
		fmt.Printf("   pg_stat_statements: not loaded (%v)\n", statErr)
		return nil
	}
	if *soakProfile != "" {
		if err := os.MkdirAll(*soakProfile, 0o755); err != nil {
			return err
		}
	}
	return statements(ctx, p, accepted, *soakProfile)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// soakSample is the backlog at a moment of the soak (from its start).
type soakSample struct {
	at      time.Duration
	backlog int64
}

// backlogAt is the last sample at or before t.
func backlogAt(samples []soakSample, t time.Duration) int64 {
	var n int64
	for _, s := range samples {
		if s.at > t {
			break
		}
		n = s.backlog
	}
	return n
}

// backlogSeries is the backlog every 10 s.
func backlogSeries(samples []soakSample) string {
	var out []string
	for t := 10 * time.Second; len(samples) > 0 && t <= samples[len(samples)-1].at; t += 10 * time.Second {
		out = append(out, strconv.FormatInt(backlogAt(samples, t), 10))
	}
	return strings.Join(out, " ")
}

// soakDelays reads every chat's messages: for each "soak <i>" (after the brand) its delay from the intended moment of send
// i, and how many arrived twice.
func soakDelays(h *sim.BotHandle, users int, start time.Time, interval time.Duration) (benchutil.Latencies, int) {
	var delays benchutil.Latencies
	dups := 0
	seen := map[int]bool{}
	for u := range users {
		for _, m := range h.Messages(soakChatBase + int64(u)) {
			// The shared bot brands each message with the tenant's name: the send's text ends it.
			_, n, ok := strings.Cut(m.Text, "soak ")
			if !ok {
				continue
			}
			i, err := strconv.Atoi(n)
			if err != nil {
				continue
			}
			if seen[i] {
				dups++
				continue
			}
			seen[i] = true
			delays = append(delays, m.Time.Sub(start.Add(time.Duration(i)*interval)))
		}
	}
	slices.Sort(delays)
	return delays, dups
}

// component is a Herald process of the soak other than the workers: its HTTP address and its command.
type component struct {
	cmd  *exec.Cmd
	addr string
}

// startComponent runs `herald <name>` with env and waits until it is ready.
func startComponent(ctx context.Context, name string, env ...string) (*component, error) {
	addrs, err := freeAddrs(3)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, *heraldBin, name)
	cmd.Env = append(append(os.Environ(), env...),
		"HERALD_HTTP_ADDR="+addrs[0], "HERALD_METRICS_ADDR="+addrs[1], "HERALD_PPROF_ADDR="+addrs[2])
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %s: %w", *heraldBin, name, err)
	}
	c := &component{cmd: cmd, addr: addrs[0]}
	if err := waitReady("http://"+addrs[0]+"/readyz", 30*time.Second); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// stop interrupts the process and waits for it.
func (c *component) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	_ = c.cmd.Wait()
}
