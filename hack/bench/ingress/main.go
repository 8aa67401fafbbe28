// Command ingress benchmarks POST /v1/send: a real `herald ingress` process against a private, durable
// PostgreSQL and the Kafka-protocol broker on this machine, measured from outside with a lean HTTP/1.1
// load generator (internal/testing/benchutil). In one run it measures, each phase -duration long:
//
//  1. the bare HTTP stack: a Go server in this process that decodes the same JSON and answers 202, closed
//     loop at -concurrency connections (what HTTP alone costs on this machine, in this run);
//  2. Herald's capacity: closed loop at -concurrency connections;
//  3. the floor: what a send must do without HTTP — the gate read, the idempotency claim for the sends
//     that carry a key, the insert and the produce (outbox.Send), called directly by -concurrency callers;
//  4. latency: an open loop at -rate sends per second over -conns connections;
//  5. overload: an open loop at -overload times the capacity measured in 2: the accepted rate, the p99
//     of the accepted sends, and every answer by status;
//
// and the ingress process's peak RSS. Before each of phases 2-6 the page cache is written back (-settle, on
// by default), so that no phase pays for the writes of the ones before it. A fraction (-idempotent) of the sends carries an Idempotency-Key, in
// the HTTP phases and the floor alike. With -profile FILE, a CPU profile of the ingress is taken during
// phase 2; with -open-profile FILE, during phase 4. Run it with `make bench-ingress`; see
// ../shared/benchmarking.md for why the phases are what they are.
//
// Added by the notification lifecycle (each off unless its flag is given; phases 1-5 are unchanged):
//
//  6. batches (-batch N): POST /v1/send/batch with N sends per request, closed loop at -batch-concurrency
//     connections: notifications accepted per second, beside phase 2's single-send rate of the same run;
//
// and -scheduled-backlog N, which stores N scheduled notifications (due in 30 days) before phase 1, to
// show what a backlog of them costs the sends.
//
// Added by rich messages (spec v1-extensions §10): -html-mix makes half the sends of phases 2, 4 and 5
// format html, with 1-2 KB of markup each (bold, italic, underline, links, code, a spoiler, a quote), the
// other half plain text as before: run it beside a run without it to see what parsing at the door costs the
// send path. Phases 1 and 3 stay plain (the bare server parses nothing; the floor starts after the door).
//
// Added by templates (spec v1-extensions §12): -template makes every send of phases 2, 4 and 5 name a
// template (html, about 1 KB, 10 outputs and a loop; saved before phase 1) with its data; -template-rendered
// is its control: the same messages, rendered by the bench with the same package, sent as format html.
// The difference between the two runs is what the template costs the send path. -zoned gives a share of
// the users a time_zone (in both runs), so that the ingress's zone cache holds users, as a tenant's would.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"syscall"
	"time"

	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/dev/kafkalocal"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

type options struct {
	herald      string
	rate        int
	duration    time.Duration
	concurrency int
	conns       int
	maxConns    int
	users       int
	idempotent  float64
	overload    float64
	profile     string
	openProfile string
	overProfile string
	heapProfile string
	gomemlimit  string

	batch            int
	batchConcurrency int
	batchProfile     string
	scheduledBacklog int
	settle           bool
	htmlMix          bool
	htmlAsText       bool
	template         bool
	templateRendered bool
	zoned            float64
}

func main() {
	var o options
	flag.StringVar(&o.herald, "herald", "bin/herald", "path to the herald binary")
	flag.IntVar(&o.rate, "rate", 6000, "open-loop request rate per second (phase 4)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of each phase")
	flag.IntVar(&o.concurrency, "concurrency", 128, "closed-loop connections and floor callers (phases 1-3)")
	flag.IntVar(&o.conns, "conns", 256, "open-loop connections (phases 4-5); more are opened, up to -max-conns, when all are busy")
	flag.IntVar(&o.maxConns, "max-conns", 2048, "most open-loop connections")
	flag.IntVar(&o.users, "users", 5000, "verified users to spread sends over")
	flag.Float64Var(&o.idempotent, "idempotent", 0.1, "fraction of sends carrying an Idempotency-Key")
	flag.Float64Var(&o.overload, "overload", 2, "phase 5 offers this many times the measured capacity (0 skips it)")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the ingress during phase 2 to this file")
	flag.StringVar(&o.openProfile, "open-profile", "", "write a CPU profile of the ingress during phase 4 (the open loop) to this file")
	flag.StringVar(&o.overProfile, "overload-profile", "", "write a CPU profile of the ingress during phase 5 (the overload) to this file")
	flag.StringVar(&o.heapProfile, "heap-profile", "", "write heap profiles of the ingress at the end of phases 2 and 5 to FILE.2 and FILE.5")
	flag.StringVar(&o.gomemlimit, "gomemlimit", "128MiB", "GOMEMLIMIT of the ingress: the smallest power of two over what the ingress asks for its 1,024 connections past capacity (96 MiB; the chart sets the container limit, 512Mi by default); below it the ingress warns at start, and the overload phase measures the collector more than the ingress")
	flag.IntVar(&o.batch, "batch", 0, "phase 6: sends per POST /v1/send/batch (0 skips the phase; the contract allows 1-100)")
	flag.IntVar(&o.batchConcurrency, "batch-concurrency", 16, "phase 6: closed-loop connections")
	flag.StringVar(&o.batchProfile, "batch-profile", "", "write a CPU profile of the ingress during phase 6 to this file")
	flag.BoolVar(&o.settle, "settle", true, "before each of phases 2-6, have the kernel write back what the earlier phases left dirty (sync), so that a phase does not pay for the writes of the ones before (-settle=false: the machine's own writeback, which lands the closed loop's and the floor's pages in phase 4)")
	flag.IntVar(&o.scheduledBacklog, "scheduled-backlog", 0, "store this many scheduled notifications (due in 30 days) before phase 1")
	flag.BoolVar(&o.htmlMix, "html-mix", false, "half the sends of phases 2, 4 and 5 are format html with 1-2 KB of markup, the other half plain text")
	flag.BoolVar(&o.htmlAsText, "html-as-text", false, "with -html-mix: the same 1-2 KB bodies sent as plain text (the control: what the parser and the entities cost, apart from the bodies' size)")
	flag.BoolVar(&o.template, "template", false, "every send of phases 2, 4 and 5 names a template (html, ~1 KB, 10 outputs and a loop) with data")
	flag.BoolVar(&o.templateRendered, "template-rendered", false, "the control of -template: the same messages rendered by the bench and sent as format html")
	flag.Float64Var(&o.zoned, "zoned", 0.1, "with -template or -template-rendered: this share of the users has a time_zone (PATCH /v1/users), which the template's date filter renders in")
	flag.Parse()
	benchutil.Main("bench-ingress", func(ctx context.Context, dbURL string) error { return run(ctx, dbURL, o) })
}

func run(ctx context.Context, dbURL string, o options) error {
	broker, err := kafkalocal.Start("bench", 0, queue.DefaultPartitions)
	if err != nil {
		return err
	}
	defer broker.Close()
	st, err := store.Open(ctx, dbURL, 64)
	if err != nil {
		return err
	}
	defer st.Close()
	key, err := seed(ctx, st, o.users)
	if err != nil {
		return err
	}
	if o.template || o.templateRendered {
		if err := seedTemplate(ctx, st); err != nil {
			return err
		}
		zoned, err := seedZones(ctx, st, o.users, o.zoned)
		if err != nil {
			return err
		}
		fmt.Printf("ingress: %d of the %d users have a time_zone\n", zoned, o.users)
		fmt.Printf("ingress: every send %s (%d bytes of template source)\n",
			map[bool]string{true: "names the template with its data", false: "is the template's message rendered by the bench"}[o.template], len(benchTemplate))
	}
	if o.scheduledBacklog > 0 {
		if err := seedScheduled(ctx, st, o.scheduledBacklog, o.users); err != nil {
			return err
		}
	}

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(o.herald, "ingress")
	cmd.Env = append(os.Environ(),
		"HERALD_DATABASE_URL="+dbURL, "HERALD_KAFKA_BROKERS="+broker.Addrs()[0], "HERALD_KAFKA_TOPIC_PREFIX=bench",
		"HERALD_HTTP_ADDR="+addr, "HERALD_MESSENGER_BOT_USERNAME=bench_bot", "HERALD_LOG_LEVEL=warn",
		"GOMEMLIMIT="+o.gomemlimit, "HERALD_PPROF_ADDR="+pprofAddr, "HERALD_METRICS_ADDR="+metricsAddr)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		return err
	}
	mem := startSampler(metricsAddr, cmd.Process.Pid)
	defer mem.stop()
	fmt.Printf("ingress: GOMEMLIMIT=%s, %d verified users, %.0f%% of sends with an Idempotency-Key\n", o.gomemlimit, o.users, o.idempotent*100)
	if o.htmlMix {
		format := "html"
		if o.htmlAsText {
			format = "text (-html-as-text)"
		}
		fmt.Printf("ingress: half the sends are format %s, %d-%d bytes of markup\n", format, len(htmlMarkup(0)), len(htmlMarkup(htmlSizes-1)))
	}

	var keySeq atomic.Int64
	idemEvery := 0
	if o.idempotent > 0 {
		idemEvery = int(1 / o.idempotent)
	}
	send := func(i int) []byte {
		var body []byte
		if o.template || o.templateRendered {
			body = templatedSend(i, o.users, o.template)
		} else if o.htmlMix && i%2 == 1 {
			format := "html"
			if o.htmlAsText {
				format = "text"
			}
			body = fmt.Appendf(nil, `{"user_id":"user-%d","format":"%s","message":%s,"priority":%d}`, i%o.users, format, htmlBodies[i%htmlSizes], i%10)
		} else {
			body = fmt.Appendf(nil, `{"user_id":"user-%d","message":"Your order %d has shipped","priority":%d}`, i%o.users, i, i%10)
		}
		headers := []string{"Authorization: Bearer " + key}
		if idemEvery > 0 && i%idemEvery == 0 {
			headers = append(headers, "Idempotency-Key: k-"+strconv.FormatInt(keySeq.Add(1), 10))
		}
		return benchutil.PostJSON(addr, "/v1/send", body, headers...)
	}

	postmaster, err := benchutil.PostmasterPID(ctx, dbURL)
	if err != nil {
		fmt.Println("PostgreSQL's CPU is not measured:", err)
	}

	// Warm-up: connections, pools, caches.
	benchutil.ClosedLoop(addr, o.concurrency, 2*time.Second, send)

	// 1. The bare HTTP stack.
	bareSrv, err := benchutil.Serve(bareHandler())
	if err != nil {
		return err
	}
	bare := benchutil.ClosedLoop(bareSrv.Addr, o.concurrency, o.duration, func(i int) []byte {
		body := fmt.Appendf(nil, `{"user_id":"user-%d","message":"Your order %d has shipped","priority":%d}`, i%o.users, i, i%10)
		return benchutil.PostJSON(bareSrv.Addr, "/v1/send", body, "Authorization: Bearer "+key)
	})
	bareSrv.Close()
	report("1. bare Go HTTP server (decode JSON, 202), closed loop", o.concurrency, bare)

	settle(o)
	// 2. Herald's capacity.
	profiled := startCPUProfile(pprofAddr, o.profile, o.duration)
	cpu := cpuMeter(cmd.Process.Pid, postmaster)
	capacity := benchutil.ClosedLoop(addr, o.concurrency, o.duration, send)
	targetsRSS := report("2. Herald ingress, closed loop", o.concurrency, capacity)
	cpu(capacity)
	heapProfile(pprofAddr, o.heapProfile, "2")
	profiled()

	settle(o)
	// 3. The floor.
	floor := floorRun(st, broker, o)
	targetsRSS = max(targetsRSS, report("3. floor: outbox.Send directly (gate, idempotency claim, insert, produce)", o.concurrency, floor))
	fmt.Printf("   HTTP ÷ floor = %.2f; HTTP ÷ bare = %.2f\n", capacity.Rate()/floor.Rate(), capacity.Rate()/bare.Rate())

	settle(o)
	// 4. Latency at a fixed rate.
	profiled = startCPUProfile(pprofAddr, o.openProfile, o.duration)
	cpu = cpuMeter(cmd.Process.Pid, postmaster)
	open := benchutil.OpenLoop(addr, o.conns, o.maxConns, o.rate, o.duration, send)
	targetsRSS = max(targetsRSS, report(fmt.Sprintf("4. Herald ingress, open loop at %d/s", o.rate), o.conns, open))
	cpu(open)
	profiled()

	settle(o)
	// 5. Overload.
	if o.overload > 0 {
		offered := int(capacity.Rate() * o.overload)
		go func() { time.Sleep(o.duration * 3 / 4); heapProfile(pprofAddr, o.heapProfile, "5") }()
		profiled := startCPUProfile(pprofAddr, o.overProfile, o.duration)
		shedBefore := shedByRoute(metricsAddr)
		over := benchutil.OpenLoop(addr, o.conns, o.maxConns, offered, o.duration, send)
		report(fmt.Sprintf("5. overload: open loop offered %d/s (%.1f× capacity)", offered, o.overload), o.conns, over)
		fmt.Printf("   p99 of every answer: %.2f ms\n", float64(over.LatencyAll.Percentile(99))/1e6)
		fmt.Printf("   503s by where they were answered: %s\n", shedDiff(shedBefore, shedByRoute(metricsAddr)))
		profiled()
	}

	settle(o)
	// 6. Batches.
	if o.batch > 0 {
		profiled := startCPUProfile(pprofAddr, o.batchProfile, o.duration)
		batchPhase(ctx, st, addr, key, o, capacity.Rate())
		profiled()
	}

	// The targets are taken in one run of phases 2-4 (capacity and latency); phases 5 and 6 abuse the
	// ingress on purpose, where GOMEMLIMIT bounds its memory. Both peaks are printed.
	fmt.Printf("\ningress RSS peak during phases 2-4 (the targets' run): %.1f MB\n", targetsRSS/1e6)
	_, peak, err := benchutil.RSS(cmd.Process.Pid)
	if err == nil {
		fmt.Printf("ingress RSS peak over every phase (VmHWM): %.1f MB\n", float64(peak)/1e6)
	}
	return nil
}

// report prints a phase's figures and the ingress's memory peaks during it, and returns its RSS peak.
func report(title string, conns int, r benchutil.Result) float64 {
	if r.Conns > conns {
		conns = r.Conns
	}
	fmt.Printf("\n== %s, %d connections, %v ==\n", title, conns, r.Duration)
	fmt.Printf("   %.0f/s accepted; answers: %s\n   latency of accepted: %s\n", r.Rate(), r.CodesString(), r.Latency)
	return currentSampler.report()
}

// cpuMeter starts counting the CPU time of the ingress and of the PostgreSQL cluster (postmaster: its pid,
// 0 when unknown); the function it returns prints what the phase cost each per accepted send. On a shared
// machine this moves far less than the phase's rate, which other processes' load takes from: compare
// variants (-template and -template-rendered, a commit and the one before) by it.
func cpuMeter(ingress, postmaster int) func(benchutil.Result) {
	ib, err := benchutil.CPUTime(ingress)
	pb, perr := benchutil.TreeCPUTime(postmaster)
	return func(r benchutil.Result) {
		ia, err2 := benchutil.CPUTime(ingress)
		pa, perr2 := benchutil.TreeCPUTime(postmaster)
		if err != nil || err2 != nil || r.OK() == 0 {
			fmt.Printf("   CPU: not measured (%v)\n", errors.Join(err, err2))
			return
		}
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.OK()) }
		line := fmt.Sprintf("   CPU per accepted send: ingress %.0f µs (%.2f s, %.0f accepted per CPU-second)",
			per(ia-ib), (ia - ib).Seconds(), float64(r.OK())/(ia-ib).Seconds())
		if postmaster > 0 && perr == nil && perr2 == nil {
			line += fmt.Sprintf(", PostgreSQL %.0f µs (%.2f s)", per(pa-pb), (pa - pb).Seconds())
		}
		fmt.Println(line)
	}
}

// floorRun calls outbox.Send directly from -concurrency goroutines with the same mix of sends.
func floorRun(st *store.Store, broker *kafkalocal.Broker, o options) benchutil.Result {
	producer := queue.NewProducer(broker.Addrs(), "bench")
	defer producer.Close()
	ob := outbox.New(st, producer, outbox.Options{Logger: slog.New(slog.DiscardHandler)})
	defer ob.Close()
	idemEvery := 0
	if o.idempotent > 0 {
		idemEvery = int(1 / o.idempotent)
	}
	var seq, keySeq atomic.Int64
	var mu sync.Mutex
	res := benchutil.Result{Duration: o.duration, Codes: map[int]int64{}}
	deadline := time.Now().Add(o.duration)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			var lat benchutil.Latencies
			codes := map[int]int64{}
			for time.Now().Before(deadline) {
				i := int(seq.Add(1)) + 1_000_000
				item := outbox.Item{UserID: "user-" + strconv.Itoa(i%o.users), Priority: i % 10,
					Body: brand.Render("Bench", fmt.Sprintf("Your order %d has shipped", i))}
				var idem *outbox.Idempotency
				if idemEvery > 0 && i%idemEvery == 0 {
					idem = &outbox.Idempotency{Key: "floor-" + strconv.FormatInt(keySeq.Add(1), 10), RequestHash: [32]byte{1}}
				}
				t0 := time.Now()
				results, _, err := ob.Send(context.Background(), "bench", []outbox.Item{item}, idem)
				switch {
				case err != nil:
					codes[500]++
				case !results[0].Accepted():
					codes[409]++
				default:
					codes[202]++
					lat = append(lat, time.Since(t0))
				}
			}
			mu.Lock()
			for c, n := range codes {
				res.Codes[c] += n
			}
			res.Latency = append(res.Latency, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return res
}

// bareHandler is the HTTP stack alone: decode the same body strictly and answer a 202 like Herald's.
func bareHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			UserID   string `json:"user_id"`
			Message  string `json:"message"`
			Priority int    `json:"priority"`
		}
		body, _ := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"tracking_id":"0195d000-0000-7000-8000-000000000001","status":"queued"}` + "\n"))
	})
}

// heapProfile writes the ingress's heap profile to file.suffix (nothing when file is empty).
func heapProfile(pprofAddr, file, suffix string) {
	if file == "" {
		return
	}
	res, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/heap", pprofAddr))
	if err != nil {
		fmt.Println("   heap profile:", err)
		return
	}
	defer res.Body.Close()
	f, err := os.Create(file + "." + suffix)
	if err != nil {
		fmt.Println("   heap profile:", err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, res.Body)
}

// startCPUProfile starts a CPU profile of the ingress for the phase about to run (a second shorter than
// it) when file is set, and returns what to call at the phase's end: it waits for the profile and says
// where it went.
func startCPUProfile(pprofAddr, file string, phase time.Duration) (done func()) {
	if file == "" {
		return func() {}
	}
	errc := make(chan error, 1)
	go func() { errc <- cpuProfile(pprofAddr, file, phase-time.Second) }()
	return func() {
		if err := <-errc; err != nil {
			fmt.Println("   profile:", err)
		} else {
			fmt.Println("   CPU profile of the ingress written to", file)
		}
	}
}

func cpuProfile(pprofAddr, file string, d time.Duration) error {
	res, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, res.Body)
	return err
}

func seed(ctx context.Context, st *store.Store, users int) (string, error) {
	// The benchmark measures the hot path at capacity: the tenant's own limit must not be what stops it.
	if err := fixture.CreateTenant(ctx, st, "bench", fixture.DeveloperName("Bench"), fixture.Unlimited()); err != nil {
		return "", err
	}
	key, err := fixture.CreateAPIKey(ctx, st, "bench")
	if err != nil {
		return "", err
	}
	return key, fixture.VerifiedUsers(ctx, st, "bench", "user-", 0, users, 100000)
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

// batchPhase is phase 6: POST /v1/send/batch with o.batch sends each, closed loop. The rate counts the
// notifications the batches stored during the phase (read back from PostgreSQL, so a batch answered 200
// with items refused counts only what it accepted).
func batchPhase(ctx context.Context, st *store.Store, addr, key string, o options, singleRate float64) {
	var keySeq atomic.Int64
	idemEvery := 0
	if o.idempotent > 0 {
		idemEvery = int(1 / o.idempotent)
	}
	req := func(i int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"notifications":[`)
		for j := range o.batch {
			if j > 0 {
				b.WriteByte(',')
			}
			n := i*o.batch + j
			fmt.Fprintf(&b, `{"user_id":"user-%d","message":"Your order %d has shipped","priority":%d}`, n%o.users, n, n%10)
		}
		b.WriteString(`]}`)
		headers := []string{"Authorization: Bearer " + key}
		if idemEvery > 0 && i%idemEvery == 0 {
			headers = append(headers, "Idempotency-Key: b-"+strconv.FormatInt(keySeq.Add(1), 10))
		}
		return benchutil.PostJSON(addr, "/v1/send/batch", b.Bytes(), headers...)
	}
	var before int64
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications`).Scan(&before)
	res := benchutil.ClosedLoop(addr, o.batchConcurrency, o.duration, req)
	var after int64
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications`).Scan(&after)
	report(fmt.Sprintf("6. batches of %d (POST /v1/send/batch), closed loop", o.batch), o.batchConcurrency, res)
	rate := float64(after-before) / o.duration.Seconds()
	fmt.Printf("   %.0f notifications/s accepted through batches (%d stored); single sends in phase 2: %.0f/s; ratio %.2f\n",
		rate, after-before, singleRate, rate/singleRate)
}

// seedScheduled stores n scheduled notifications of the bench tenant, due in 30 days (spread over a day),
// as a backlog that the sends must not feel.
func seedScheduled(ctx context.Context, st *store.Store, n, users int) error {
	start := time.Now()
	if err := benchutil.ScheduledBacklog(ctx, st, "bench", "user-", users, n); err != nil {
		return err
	}
	fmt.Printf("scheduled backlog: %d notifications stored in %v\n", n, time.Since(start).Round(time.Second))
	return nil
}

// settle writes back the page cache's dirty pages when -settle is given. The kernel writes a file back 30 s
// after it first became dirty (vm.dirty_expire_centisecs), with every page dirtied since, and a commit's
// WAL flush waits behind that burst: without settling, the burst of the tables' files (first dirtied by the
// seeding and the warm-up) lands in phase 4 and carries all the closed loop and the floor wrote
// (docs/benchmarks.md).
func settle(o options) {
	if !o.settle {
		return
	}
	t0 := time.Now()
	syscall.Sync()
	fmt.Printf("\n(settle: the page cache written back in %v)\n", time.Since(t0).Round(time.Millisecond))
}

// htmlSizes is how many sizes of markup the -html-mix sends take turns with, from about 1 KB to about 2 KB.
const htmlSizes = 8

// htmlMarkup is an order notice in the platform's HTML subset: a fixed head, then n+9 item lines, so that
// htmlMarkup(0) is about 1 KB and htmlMarkup(htmlSizes-1) about 2 KB.
func htmlMarkup(n int) string {
	var b bytes.Buffer
	b.WriteString(`<b>Order #1042</b> has <i>shipped</i> &amp; arrives <u>Friday</u>.` + "\n")
	for i := range n + 9 {
		fmt.Fprintf(&b, `<b>%d.</b> <a href="https://shop.example/p/%d">Blue shirt, size M</a> × <code>%d</code> <s>€%d</s> <i>€%d</i>`+"\n", i+1, 1000+i, i+1, 40+i, 30+i)
	}
	b.WriteString(`<blockquote>Your code: <tg-spoiler>HX-7</tg-spoiler></blockquote>`)
	return b.String()
}

// htmlBodies are the htmlMarkup sizes as JSON strings, made once, with < > & as they are (not json.Marshal's
// \u003c), as most clients write them.
var htmlBodies = func() [htmlSizes][]byte {
	var out [htmlSizes][]byte
	for n := range out {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(htmlMarkup(n))
		out[n] = bytes.TrimSpace(b.Bytes())
	}
	return out
}()
