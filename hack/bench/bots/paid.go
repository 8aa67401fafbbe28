package main

// Part 3, paid broadcast (issue 43): bots whose rate is far above what one lane at a time can carry, so
// that the benchmark reads the workers' ceiling rather than the bots' limits ("A ceiling needs more load
// than the limit", ../shared/benchmarking.md). The workers are `herald worker` processes, as in
// production; PostgreSQL is its own process; the broker and the simulator run in this one.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
)

var (
	heraldBin     = flag.String("herald", "bin/herald", "part 3: the herald binary the workers run as (make bench-bots builds it)")
	paidBots      = flag.Int("paid-bots", 4, "part 3: bots with paid broadcast, each its tenant's")
	paidChats     = flag.Int("paid-chats", 1000, "part 3: each paid bot's chats")
	paidWorkers   = flag.String("paid-workers", "2", "part 3: worker processes, a list: each count is a run of its own (1,2,3 shows the scale-out)")
	paidLatencies = flag.String("paid-latency", "0,50", "part 3: the simulator's answer latency in ms, a list: each a run of its own")
	paidProfile   = flag.String("paid-profile", "", "part 3: a directory for the first worker's CPU and allocation profiles (10 s from the 3rd second of the drain) and pg_stat_statements")
)

// paidParts runs part 3 for each latency and each worker count, each on a fresh database.
func paidParts(ctx context.Context, fresh func() (string, error)) error {
	for _, l := range strings.Split(*paidLatencies, ",") {
		latency, err := strconv.Atoi(strings.TrimSpace(l))
		if err != nil || latency < 0 {
			return fmt.Errorf("-paid-latency: %q is not a count of milliseconds", l)
		}
		for _, s := range strings.Split(*paidWorkers, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return fmt.Errorf("-paid-workers: %q is not a count", s)
			}
			url, err := fresh()
			if err != nil {
				return err
			}
			fmt.Printf("\n== 3. %d bots at rateLimit %d with paidBroadcast, %d chats and %d queued each, %d worker process(es), the platform answering in %d ms ==\n",
				*paidBots, *paidRate, *paidChats, *paidBacklog, n, latency)
			if err := paidRun(ctx, url, n, latency); err != nil {
				return err
			}
		}
	}
	return nil
}

func paidRun(ctx context.Context, url string, workers, latencyMS int) error {
	p, err := newPipeline(ctx, url)
	if err != nil {
		return err
	}
	defer p.close()
	if err := p.sim.SetFaults(sim.Faults{LatencyMS: latencyMS}); err != nil {
		return err
	}
	var bots []ownBot
	for i := range *paidBots {
		o, err := p.newBot(ctx, "paid"+strconv.Itoa(i), *paidRate, true, *paidChats, int64(1_000_000*(i+1)))
		if err != nil {
			return err
		}
		if err := p.queue(ctx, o, *paidBacklog, "paid"); err != nil {
			return err
		}
		bots = append(bots, o)
	}
	// The control's chats are three times as many, so that its per-chat interval never binds: it shows the
	// bot's rate only.
	ctl, err := p.newControl(workers, *paidRate, true, 3**paidChats)
	if err != nil {
		return err
	}
	// pg_stat_statements when the cluster loaded it (run): the statements of the drain alone.
	_, statErr := p.b.Store.Pool().Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	if statErr == nil {
		_, statErr = p.b.Store.Pool().Exec(ctx, `SELECT pg_stat_statements_reset()`)
	}
	load0 := loadAverage()
	procs, err := p.startProcessWorkers(ctx, url, workers)
	if err != nil {
		return err
	}
	defer procs.stop()
	start := time.Now()
	stopControl := ctl.run(ctx)
	sampler := procs.sample(250 * time.Millisecond)
	pg0, self0 := serverCPU(pgPID), selfCPU()
	if *paidProfile != "" {
		go procs.profile(ctx, *paidProfile, 3*time.Second, 10*time.Second)
	}
	total := int64(*paidBots * *paidBacklog)
	ideal := float64(*paidBots * *paidRate)
	// Generous: on a machine shared with other work the drain may take ten times its ideal and more.
	mid, overall, err := drain(bots, total, start, time.Duration(float64(total)/ideal*30+60)*time.Second)
	stopControl()
	means := sampler.stop()
	cpu := procs.cpu()
	pgCPU, benchCPU := serverCPU(pgPID)-pg0, selfCPU()-self0
	load1 := loadAverage()
	if err != nil {
		return err
	}
	time.Sleep(time.Second) // anything sent twice arrives
	fmt.Printf("   load average before / after: %s / %s\n", load0, load1)
	fmt.Printf("   delivered %d: %.0f/s between 10%% and 90%% (%.3f of %.0f/s), %.0f/s overall (start-up included)\n",
		total, mid, mid/ideal, ideal, overall)
	fmt.Printf("   workers' CPU %.1f s: %.0f deliveries per worker CPU-second\n", cpu, float64(total)/cpu)
	// Where the machine's CPU went (the ceiling on 2 cores is the sum per delivery): the workers, the
	// server with its backends, and this process — the simulator answering every send, the control sender
	// and the counting.
	perMS := func(sec float64) float64 { return sec * 1000 / float64(total) }
	fmt.Printf("   CPU per delivery: workers %.3f ms, PostgreSQL %.3f ms, simulator and control (this process) %.3f ms; %.3f ms in all, %.0f deliveries per CPU-second of the whole\n",
		perMS(cpu), perMS(pgCPU), perMS(benchCPU), perMS(cpu+pgCPU+benchCPU), float64(total)/(cpu+pgCPU+benchCPU))
	var paidSends, sends int64
	for _, o := range bots {
		s := o.h.Stats()
		paidSends += s.PaidSends
		sends += s.Sends
	}
	fmt.Printf("   %d sends, %d billed as paid broadcasts; duplicates (a notification's text twice in its chat): %d\n", sends, paidSends, duplicates(bots))
	fmt.Printf("   %s\n", chatGaps(bots))
	fmt.Printf("   %s\n", chatsSending(bots))
	violations(bots)
	ctl.report()
	fmt.Printf("   per worker, mean over the drain: %s\n", means)
	fmt.Printf("   per worker at the end: %s\n", procs.waits())
	if statErr != nil {
		fmt.Printf("   pg_stat_statements: not loaded (%v)\n", statErr)
		return nil
	}
	return statements(ctx, p, total, *paidProfile)
}

// chatGaps describes the time between two sends to the same chat, where the platform saw them: with the
// per-chat interval of a second, a bot with N chats can send at most N a second, and only while each gap
// stays near the interval. Gaps much longer than the interval are lanes that had nothing to send (their
// next message not yet read) or waited for something else.
func chatGaps(bots []ownBot) string {
	var gaps []time.Duration
	for _, o := range bots {
		for _, chat := range o.chats {
			ms := o.h.Messages(chat)
			for i := 1; i < len(ms); i++ {
				gaps = append(gaps, ms[i].Time.Sub(ms[i-1].Time))
			}
		}
	}
	if len(gaps) == 0 {
		return "no chat got two sends"
	}
	slices.Sort(gaps)
	q := func(f float64) string { return gaps[int(f*float64(len(gaps)-1))].Round(time.Millisecond).String() }
	var sum time.Duration
	for _, g := range gaps {
		sum += g
	}
	return fmt.Sprintf("gaps between two sends to a chat: mean %s, p10 %s, p50 %s, p90 %s, p99 %s",
		(sum / time.Duration(len(gaps))).Round(time.Millisecond), q(0.10), q(0.50), q(0.90), q(0.99))
}

// chatsSending describes how many of a bot's chats got a message in each whole second of the middle of the
// drain (from the tenth to the ninetieth percentile of its sends): with the per-chat interval of a second,
// a bot delivers at most that many a second, so a count below its chats is chats that had nothing to send
// (their next message not yet fetched, or held) rather than a slow send.
func chatsSending(bots []ownBot) string {
	var counts []int
	for _, o := range bots {
		var times []time.Time
		for _, chat := range o.chats {
			for _, m := range o.h.Messages(chat) {
				times = append(times, m.Time)
			}
		}
		if len(times) < 10 {
			continue
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		from, to := times[len(times)/10], times[len(times)*9/10]
		for t := from; t.Add(time.Second).Before(to); t = t.Add(time.Second) {
			n := 0
			for _, chat := range o.chats {
				for _, m := range o.h.Messages(chat) {
					if !m.Time.Before(t) && m.Time.Before(t.Add(time.Second)) {
						n++
						break
					}
				}
			}
			counts = append(counts, n)
			if os.Getenv("BENCH_DEBUG") != "" {
				fmt.Printf("%d ", n)
			}
		}
		if os.Getenv("BENCH_DEBUG") != "" {
			fmt.Println()
		}
	}
	if len(counts) == 0 {
		return "chats sending per second: too few sends"
	}
	slices.Sort(counts)
	sum := 0
	for _, c := range counts {
		sum += c
	}
	return fmt.Sprintf("chats sent to in a second of the drain's middle, per bot of %d chats: mean %.0f, min %d, p50 %d, max %d (%d bot-seconds)",
		len(bots[0].chats), float64(sum)/float64(len(counts)), counts[0], counts[len(counts)/2], counts[len(counts)-1], len(counts))
}

// duplicates counts the messages of the bots whose text their chat had already: each notification's text
// is its own ("paid <n>"), so a repeat is a notification delivered twice.
func duplicates(bots []ownBot) int {
	n := 0
	for _, o := range bots {
		for _, chat := range o.chats {
			seen := map[string]bool{}
			for _, m := range o.h.Messages(chat) {
				if seen[m.Text] {
					n++
				}
				seen[m.Text] = true
			}
		}
	}
	return n
}

// statements prints PostgreSQL's statements of the drain, by calls, per delivery; with dir, all of them
// into dir/statements.txt.
func statements(ctx context.Context, p *pipeline, delivered int64, dir string) error {
	rows, err := p.b.Store.Pool().Query(ctx, `
		SELECT calls, total_exec_time, rows, regexp_replace(left(query, 4000), '\s+', ' ', 'g')
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY calls DESC`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var all strings.Builder
	var calls int64
	var ms float64
	top := 0
	for rows.Next() {
		var c, r int64
		var t float64
		var q string
		if err := rows.Scan(&c, &t, &r, &q); err != nil {
			return err
		}
		calls += c
		ms += t
		fmt.Fprintf(&all, "%d calls (%.2f per delivery), %.1f ms in all (%.3f ms each), %d rows: %s\n\n", c, float64(c)/float64(delivered), t, t/float64(max(c, 1)), r, q)
		if top < 6 {
			fmt.Printf("     %.2f per delivery, %.3f ms each: %.110s\n", float64(c)/float64(delivered), t/float64(max(c, 1)), q)
			top++
		}
	}
	fmt.Printf("   PostgreSQL: %.2f statements per delivery, %.3f ms of execution per delivery\n", float64(calls)/float64(delivered), ms/float64(delivered))
	if dir != "" {
		// The server's log too: with -pg session_preload_libraries=auto_explain,… it holds the plans.
		if log, err := os.ReadFile(pgLog); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "postgres.log"), log, 0o644)
		}
		return os.WriteFile(filepath.Join(dir, "statements.txt"), []byte(all.String()), 0o644)
	}
	return rows.Err()
}

// processes are the `herald worker` processes of a run.
type processes struct {
	cmds    []*exec.Cmd
	metrics []string // each one's /metrics address
	pprof   []string
	cpu0    []float64
}

// startProcessWorkers starts n `herald worker` processes on the database at url, the pipeline's broker and
// simulator, and waits until each is ready.
func (p *pipeline) startProcessWorkers(ctx context.Context, url string, n int, env ...string) (*processes, error) {
	ps := &processes{}
	for range n {
		addrs, err := freeAddrs(3)
		if err != nil {
			ps.stop()
			return nil, err
		}
		cmd := exec.CommandContext(ctx, *heraldBin, "worker")
		cmd.Env = append(os.Environ(),
			"HERALD_DATABASE_URL="+url, "HERALD_KAFKA_BROKERS="+strings.Join(p.b.Broker.Addrs(), ","), "HERALD_KAFKA_TOPIC_PREFIX="+p.b.Prefix,
			"HERALD_MESSENGER_API_URL="+p.simURL, "HERALD_MESSENGER_BOT_TOKEN="+p.sim.Token(), "HERALD_BOT_TOKEN_KEY="+p.keyText,
			"HERALD_WORKER_GROUP_ID=bots", "HERALD_LOG_LEVEL=warn", "HERALD_MESSENGER_RATE_LIMIT="+strconv.Itoa(*botRate),
			"HERALD_HTTP_ADDR="+addrs[0], "HERALD_METRICS_ADDR="+addrs[1], "HERALD_PPROF_ADDR="+addrs[2])
		cmd.Env = append(cmd.Env, env...) // the last of a name wins
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		if err := cmd.Start(); err != nil {
			ps.stop()
			return nil, fmt.Errorf("starting %s worker: %w", *heraldBin, err)
		}
		ps.cmds = append(ps.cmds, cmd)
		ps.metrics = append(ps.metrics, addrs[1])
		ps.pprof = append(ps.pprof, addrs[2])
	}
	for i, cmd := range ps.cmds {
		if err := waitReady("http://"+ps.metrics[i]+"/metrics", 30*time.Second); err != nil {
			ps.stop()
			return nil, err
		}
		ps.cpu0 = append(ps.cpu0, cpuSeconds(cmd.Process.Pid))
	}
	return ps, nil
}

// stop interrupts the workers (they drain and leave the group) and waits for them.
func (ps *processes) stop() {
	for _, cmd := range ps.cmds {
		_ = cmd.Process.Signal(os.Interrupt)
	}
	for _, cmd := range ps.cmds {
		_ = cmd.Wait()
	}
	ps.cmds = nil
}

// cpu is the CPU time the workers used since they were ready, in seconds.
func (ps *processes) cpu() float64 {
	var s float64
	for i, cmd := range ps.cmds {
		s += cpuSeconds(cmd.Process.Pid) - ps.cpu0[i]
	}
	return s
}

// pgPID is the PostgreSQL server's postmaster; pgLog its log.
var (
	pgPID int
	pgLog string
)

// serverCPU is the CPU time of the server whose postmaster is pid: its own, its ended backends' (reaped:
// the postmaster's children's times) and its running backends'.
func serverCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	sum := procTimes(pid, true)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(child); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			sum += procTimes(child, false)
		}
	}
	return sum
}

// selfCPU is this process's user and system time.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procStat is /proc/<pid>/stat's fields after the command's name: state, ppid, …
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
}

// procTimes is a process's user and system time in seconds, with its reaped children's when children.
func procTimes(pid int, children bool) float64 {
	f := procStat(pid)
	if len(f) < 15 {
		return 0
	}
	var sum float64
	n := 13
	if children {
		n = 15
	}
	for _, v := range f[11:n] {
		x, _ := strconv.ParseFloat(v, 64)
		sum += x
	}
	return sum / 100 // USER_HZ
}

// cpuSeconds is a process's user and system time from /proc.
func cpuSeconds(pid int) float64 { return procTimes(pid, false) }

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// gauges are the worker gauges sampled over the drain.
var gauges = []string{"herald_worker_in_flight", "herald_worker_buffered", "herald_worker_held"}

type sampler struct {
	stopc chan struct{}
	done  chan string
}

// sample reads each worker's gauges every interval until stop, which returns their means.
func (ps *processes) sample(interval time.Duration) *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan string, 1)}
	go func() {
		sums := make([]map[string]float64, len(ps.metrics))
		for i := range sums {
			sums[i] = map[string]float64{}
		}
		n := 0
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				var out []string
				for i := range sums {
					var parts []string
					for _, g := range gauges {
						parts = append(parts, fmt.Sprintf("%s %.0f", strings.TrimPrefix(g, "herald_worker_"), sums[i][g]/float64(max(n, 1))))
					}
					out = append(out, "["+strings.Join(parts, ", ")+"]")
				}
				s.done <- strings.Join(out, " ")
				return
			case <-t.C:
			}
			for i, addr := range ps.metrics {
				m := scrape(addr)
				for _, g := range gauges {
					sums[i][g] += m[g]
				}
			}
			n++
		}
	}()
	return s
}

func (s *sampler) stop() string { close(s.stopc); return <-s.done }

// waits are each worker's mean waits per delivery so far: for the chat's interval, for the bot's rate,
// and the platform's answer (the histograms' sums over their counts).
func (ps *processes) waits() string {
	var out []string
	for _, addr := range ps.metrics {
		m := scrape(addr)
		mean := func(name string) string {
			return fmt.Sprintf("%.1f ms", 1000*m[name+"_sum"]/max(m[name+"_count"], 1))
		}
		out = append(out, fmt.Sprintf("[chat wait %s, rate wait %s, platform %s; rate lease %.0f/s]",
			mean(`herald_worker_ratelimit_wait_seconds{limiter="chat"`), mean(`herald_worker_ratelimit_wait_seconds{limiter="global"`),
			mean(`herald_worker_platform_latency_seconds`), m["herald_worker_rate_limit"]))
	}
	return strings.Join(out, " ")
}

// scrape reads a worker's /metrics: each series summed by its name, and by its name with its first label
// (`name{label="value"` with _sum and _count moved before the brace).
func scrape(addr string) map[string]float64 {
	m := map[string]float64{}
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return m
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "herald_worker_") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		series := line[:sp]
		name, labels, _ := strings.Cut(series, "{")
		m[name] += v
		if first, _, ok := strings.Cut(labels, ","); ok || labels != "" {
			first = strings.TrimSuffix(first, "}")
			for _, suffix := range []string{"_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok {
					m[base+"{"+first+suffix] += v
				}
			}
		}
	}
	return m
}

// profile writes the first worker's CPU profile of d from after on, then its allocations, into dir.
func (ps *processes) profile(ctx context.Context, dir string, after, d time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(after):
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	get := func(path, file string) {
		res, err := http.Get("http://" + ps.pprof[0] + path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer res.Body.Close()
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, res.Body)
	}
	var wg sync.WaitGroup
	wg.Go(func() { get("/debug/pprof/profile?seconds="+strconv.Itoa(int(d.Seconds())), "worker-cpu.pprof") })
	wg.Go(func() { get("/debug/pprof/allocs?seconds="+strconv.Itoa(int(d.Seconds())), "worker-allocs.pprof") })
	wg.Wait()
}

func freeAddrs(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func waitReady(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if res, err := http.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("not ready at " + url)
}
