// Command bots measures delivery through tenants' own bots (issue 28, spec v1-extensions §11) on real
// components in one process (a private PostgreSQL, the Kafka-protocol broker, delivery workers with the
// bots' registry, the messenger simulator playing every bot), and prints, each part on a fresh database:
//
//  1. aggregate: -bots bots at -rate messages/s each, each with a backlog of -backlog notifications over
//     -chats chats, through -w workers: deliveries per second (between 10 % and 90 % of the backlog
//     delivered, and overall), and what the simulator counted per bot — sends over the bot's rate in a
//     sliding second, sends to a chat under the per-chat interval, 429s;
//  2. fresh: the same backlog, and -samples fresh notifications, one every 500 ms, each to its own chat of
//     an idle bot: publish → the platform has it (p50, max); then the same with one bot alone holding a
//     backlog of -big;
//  3. paid: -paid-bots bots at rateLimit -paid-rate with paidBroadcast, each draining -paid-backlog over
//     -paid-chats chats, through -paid-workers `herald worker` processes, the simulator answering after
//     each of -paid-latency (paid.go): deliveries per second against the sum of the bots' rates (more
//     than the workers carry: the ceiling), per worker CPU-second, sends over a bot's rate beside the
//     same run's control, per-chat gaps, duplicates, the workers' waits and PostgreSQL's statements per
//     delivery;
//  4. workers: part 1 with each count of -workers, so that the knee of one machine shows.
//
// Parts 1, 3 and 4 run beside the workers a control: a perfectly paced sender to one more bot, whose sends
// over the rate the simulator counts are the machine's jitter, the floor for the workers' (control).
//
// -parts chooses the parts (default all); -short shrinks every size for a quick check that it works. Run
// it with `make bench-bots`; the figures go to docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/pglocal"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

var (
	parts       = flag.String("parts", "aggregate,fresh,paid,workers", "the parts to run, comma-separated: aggregate, fresh, paid, workers, soak (not in the default: 3 minutes of its own)")
	short       = flag.Bool("short", false, "small sizes everywhere: a quick check that the benchmark works, not a measurement")
	nBots       = flag.Int("bots", 50, "bots with a backlog (parts 1, 2, 4)")
	botRate     = flag.Int("rate", 30, "each bot's rate, messages per second (its rateLimit and the simulator's)")
	backlog     = flag.Int("backlog", 3000, "each bot's backlog (parts 1, 2, 4)")
	chats       = flag.Int("chats", 300, "each bot's chats the backlog goes to")
	workers     = flag.Int("w", 1, "workers in parts 1 and 2")
	samples     = flag.Int("samples", 20, "fresh notifications in part 2, one every 500 ms")
	big         = flag.Int("big", 100000, "the one bot's backlog in the second half of part 2")
	paidRate    = flag.Int("paid-rate", 1000, "each paid bot's rateLimit in part 3")
	paidBacklog = flag.Int("paid-backlog", 15000, "each paid bot's backlog in part 3")
	workerList  = flag.String("workers", "1,2,3", "worker counts in part 4")
	profile     = flag.String("profile", "", "part 2a: write a CPU profile of this process (workers, kfake, the simulator) over the first 10 s after the workers start to this file")
	pgSettings  = flag.String("pg", "", "more PostgreSQL settings, comma-separated name=value (e.g. plan_cache_mode=force_custom_plan), to try a setting's effect")
	freshAfter  = flag.Duration("fresh-after", 0, "part 2: wait this long after the backlog starts going out before the first fresh notification (0: at once), to measure once the workers have read through the backlog")
)

func main() {
	flag.Parse()
	if *short {
		*nBots, *backlog, *chats, *samples, *big, *paidRate, *paidBacklog, *paidChats, *workerList = 5, 300, 30, 5, 5000, 200, 3000, 200, "1,2"
	}
	ctx := context.Background()
	fmt.Println("machine:", benchutil.Machine())
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench-bots:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	settings := []string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}
	if *pgSettings != "" {
		settings = append(settings, strings.Split(*pgSettings, ",")...)
	}
	pg, err := benchutil.StartCluster(ctx, pglocal.Options{MaxConnections: 300, Settings: settings})
	if err != nil {
		return fmt.Errorf("starting PostgreSQL: %w", err)
	}
	defer pg.Stop()
	db := 0
	fresh := func() (string, error) { db++; return pg.Database(ctx, "bots_"+strconv.Itoa(db)) }
	pgPID, _ = pg.PID()
	pgLog = pg.LogFile()
	for _, part := range strings.Split(*parts, ",") {
		url, err := fresh()
		if err != nil {
			return err
		}
		switch strings.TrimSpace(part) {
		case "aggregate":
			fmt.Printf("\n== 1. %d bots at %d/s, a backlog of %d each over %d chats, %d worker(s) ==\n", *nBots, *botRate, *backlog, *chats, *workers)
			err = aggregate(ctx, url, *workers)
		case "fresh":
			err = freshParts(ctx, url, pg)
		case "paid":
			first := true
			err = paidParts(ctx, func() (string, error) {
				if first {
					first = false
					return url, nil
				}
				return fresh()
			})
		case "soak":
			fmt.Printf("\n== 5. soak: the shared bot at %d/s, %d users, POST /v1/send at %d/s for %v through herald ingress (herald webhook beside it), %d worker process(es) ==\n",
				*soakBotRate, *soakUsers, *soakRate, *soakDuration, *soakWorkers)
			err = soakRun(ctx, url)
		case "workers":
			fmt.Printf("\n== 4. workers under the backlog of %d bots × %d ==\n", *nBots, *backlog)
			for i, s := range strings.Split(*workerList, ",") {
				n, convErr := strconv.Atoi(strings.TrimSpace(s))
				if convErr != nil || n < 1 {
					return fmt.Errorf("-workers: %q is not a count", s)
				}
				if i > 0 {
					if url, err = fresh(); err != nil {
						return err
					}
				}
				fmt.Printf("-- %d worker(s):\n", n)
				if err = aggregate(ctx, url, n); err != nil {
					break
				}
			}
		default:
			return fmt.Errorf("-parts: unknown part %q", part)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", part, err)
		}
	}
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// pipeline is one set of components on a fresh database: the backend, the simulator, the key the bots'
// tokens are sealed with, and the workers.
type pipeline struct {
	b      *benchutil.Backend
	sim    *sim.Server
	simURL string
	key    *signing.Key
	// keyText is key as HERALD_BOT_TOKEN_KEY (the workers run as processes in part 3).
	keyText string
	stop    []func()
}

func newPipeline(ctx context.Context, url string) (*pipeline, error) {
	b, err := benchutil.StartBackend(ctx, url, 64, "bots"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10), quiet())
	if err != nil {
		return nil, err
	}
	p := &pipeline{b: b, stop: []func(){b.Close}}
	var stopSim func()
	if p.sim, p.simURL, stopSim, err = benchutil.ServeSimulator(sim.Options{Logger: quiet()}); err != nil {
		p.close()
		return nil, err
	}
	p.stop = append(p.stop, stopSim)
	p.keyText = signing.GenerateKey()
	if p.key, err = signing.ParseKey(p.keyText); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *pipeline) close() {
	for i := len(p.stop) - 1; i >= 0; i-- {
		p.stop[i]()
	}
}

// startWorkers starts n workers, each with its own registry of the bots, as n `herald worker` processes.
func (p *pipeline) startWorkers(ctx context.Context, n int) error {
	for range n {
		shared := messenger.New(p.simURL, p.sim.Token(), nil)
		reg := bot.NewRegistry(bot.RegistryOptions{Store: p.b.Store, Key: p.key, APIURL: p.simURL, Shared: shared, Logger: quiet(),
			HTTPClient: &http.Client{Transport: messenger.NewTransport()}})
		rctx, cancel := context.WithCancel(ctx)
		go func() { _ = reg.Run(rctx, time.Second) }()
		w, err := delivery.New(delivery.Options{Store: p.b.Store, Sender: shared, Bots: reg, Brokers: p.b.Broker.Addrs(),
			TopicPrefix: p.b.Prefix, GroupID: "bots", Outbox: p.b.Outbox, Logger: quiet(), RateLimit: float64(*botRate)})
		if err != nil {
			cancel()
			return err
		}
		stopWorker := benchutil.Run(ctx, w)
		p.stop = append(p.stop, func() { _ = stopWorker(); cancel() })
	}
	return nil
}

// ownBot is a tenant's bot: in the simulator, in the store, with its tenant and its users' chats.
type ownBot struct {
	id     notification.BotID
	h      *sim.BotHandle
	tenant string
	chats  []int64
}

// newBot makes a bot at rate (paid: allowed paid broadcasts past the free rate, the simulator's rate for
// it being the free one), the bot of a new tenant with users linked to chats chatBase….
func (p *pipeline) newBot(ctx context.Context, tenant string, rate int, paid bool, users int, chatBase int64) (ownBot, error) {
	simRate := float64(rate)
	if paid {
		simRate = bot.FreeRate
	}
	info, err := p.sim.CreateBot(sim.BotConfig{RateLimit: &simRate, PaidBroadcast: &paid})
	if err != nil {
		return ownBot{}, err
	}
	id := notification.BotID(info.ID)
	st := p.b.Store
	if err := st.UpsertBot(ctx, store.Bot{ID: id, Username: info.Username, TokenSealed: bot.SealToken(p.key, id, info.Token),
		TokenDigest: bot.TokenDigest(info.Token), RateLimit: rate, PaidBroadcast: paid, State: botstate.Ready}); err != nil {
		return ownBot{}, err
	}
	if err := fixture.CreateTenant(ctx, st, tenant, fixture.Unlimited()); err != nil {
		return ownBot{}, err
	}
	if _, err := st.SetTenantBot(ctx, tenant, id); err != nil {
		return ownBot{}, err
	}
	if err := fixture.VerifiedUsers(ctx, st, tenant, "u", 0, users, chatBase); err != nil {
		return ownBot{}, err
	}
	if _, err := st.Pool().Exec(ctx, `UPDATE links SET bot_id = $2 WHERE tenant_id = $1`, tenant, int64(id)); err != nil {
		return ownBot{}, err
	}
	h, _ := p.sim.BotHandle(strconv.FormatInt(info.ID, 10))
	o := ownBot{id: id, h: h, tenant: tenant}
	for i := range users {
		chat := chatBase + int64(i)
		if _, err := h.StartUser(chat, ""); err != nil { // a bot writes only to users who started it
			return ownBot{}, err
		}
		o.chats = append(o.chats, chat)
	}
	return o, nil
}

// queue stores n queued notifications of the bot's tenant, to its users in turn (user first+i%users),
// and publishes them as the outbox does (keyed by bot and chat).
func (p *pipeline) queue(ctx context.Context, o ownBot, n int, text string) error {
	users := len(o.chats)
	rows, err := p.b.Store.Pool().Query(ctx, `
		INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, chat_id, bot_id, published_at)
		SELECT gen_random_uuid(), $1, $2, 'u' || (g % $3), 5, $4 || ' ' || g, $5, $6 + g % $3, $7, now()
		FROM generate_series(0, $8 - 1) g
		RETURNING tracking_id::text, user_id, chat_id`,
		notification.KindTenant, o.tenant, users, text, notification.Queued, o.chats[0], int64(o.id), n)
	if err != nil {
		return fmt.Errorf("storing the backlog: %w", err)
	}
	var out []queue.Outgoing
	for rows.Next() {
		var id, user string
		var chat int64
		if err := rows.Scan(&id, &user, &chat); err != nil {
			rows.Close()
			return err
		}
		out = append(out, queue.NewOutgoingVia(o.id, id, o.tenant, user, chat, 5))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for batch := range slices.Chunk(out, 1000) {
		if err := p.b.Producer.Publish(ctx, batch...); err != nil {
			return fmt.Errorf("publishing the backlog: %w", err)
		}
	}
	return nil
}

// backlogged makes the -bots bots with their backlogs.
func (p *pipeline) backlogged(ctx context.Context) ([]ownBot, error) {
	var bots []ownBot
	for i := range *nBots {
		o, err := p.newBot(ctx, "t"+strconv.Itoa(i), *botRate, false, *chats, int64(1_000_000*(i+1)))
		if err != nil {
			return nil, err
		}
		if err := p.queue(ctx, o, *backlog, "backlog"); err != nil {
			return nil, err
		}
		bots = append(bots, o)
	}
	return bots, nil
}

// drain waits until the bots were sent total messages, and returns the rate between 10 % and 90 % of them
// and the overall one (from start).
func drain(bots []ownBot, total int64, start time.Time, within time.Duration) (mid, overall float64, err error) {
	var t10, t90 time.Time
	deadline := start.Add(within)
	for {
		var n int64
		for _, o := range bots {
			n += o.h.Stats().Delivered
		}
		now := time.Now()
		if t10.IsZero() && n*10 >= total {
			t10 = now
		}
		if t90.IsZero() && n*10 >= total*9 {
			t90 = now
		}
		if n >= total {
			mid = 0.8 * float64(total) / t90.Sub(t10).Seconds()
			return mid, float64(total) / now.Sub(start).Seconds(), nil
		}
		if now.After(deadline) {
			return 0, 0, fmt.Errorf("%d of %d delivered after %v", n, total, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// violations prints what the simulator counted per bot.
func violations(bots []ownBot) {
	var sliding, chat, limit, globalLimit, answered429, worstSliding, worstChat int64
	for _, o := range bots {
		s := o.h.Stats()
		sliding += s.SlidingSecondViolations
		chat += s.ChatIntervalViolations
		limit += s.LimitViolations
		globalLimit += s.GlobalLimitViolations
		answered429 += s.Answered429
		worstSliding = max(worstSliding, s.SlidingSecondViolations)
		worstChat = max(worstChat, s.ChatIntervalViolations)
	}
	var sends int64
	for _, o := range bots {
		sends += o.h.Stats().Sends
	}
	fmt.Printf("   simulator, over %d bots: %d sends over a bot's rate in a sliding second (%.2f per 1,000 sends; worst bot %d), %d to a chat under the interval (worst bot %d), %d over a limit (%d the bot's), %d answered 429\n",
		len(bots), sliding, 1000*float64(sliding)/float64(max(1, sends)), worstSliding, chat, worstChat, limit, globalLimit, answered429)
}

// 1 and 4: the aggregate rate of the bots' backlogs through n workers.
func aggregate(ctx context.Context, url string, n int) error {
	p, err := newPipeline(ctx, url)
	if err != nil {
		return err
	}
	defer p.close()
	bots, err := p.backlogged(ctx)
	if err != nil {
		return err
	}
	ctl, err := p.newControl(n, *botRate, false, *chats)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := p.startWorkers(ctx, n); err != nil {
		return err
	}
	stopControl := ctl.run(ctx)
	total := int64(*nBots * *backlog)
	ideal := float64(*nBots * *botRate)
	mid, overall, err := drain(bots, total, start, time.Duration(float64(total)/ideal*3+60)*time.Second)
	stopControl()
	if err != nil {
		return err
	}
	fmt.Printf("   delivered %d: %.0f/s between 10%% and 90%% (%.1f%% of %.0f/s), %.0f/s overall (start-up included)\n",
		total, mid, 100*mid/ideal, ideal, overall)
	violations(bots)
	ctl.report()
	return nil
}

// control is the same run's perfectly paced sender (docs/benchmarks.md; ../shared/benchmarking.md, "Judging
// a rate limiter on a busy machine"): one more bot of the simulator at -rate, sent to by n senders, as many
// as the workers, each at -rate/n with its calls started exactly on schedule (call k of sender i at start +
// (i + k·n)/rate s, in a goroutine of its own, whatever the earlier calls are doing), to its chats in turn.
// Together they leave exactly -rate a second, evenly spaced; what the simulator counts over the bot's rate
// in a sliding second is the machine's scheduling and network jitter, which a limiter cannot be asked to beat.
type control struct {
	senders int
	rate    int
	paid    bool
	h       *sim.BotHandle
	client  *messenger.Client
	chats   []int64
}

// rate is the bot's (paid: a bot allowed paid broadcasts past the free rate, every send carrying
// allow_paid_broadcast), chats its chats.
func (p *pipeline) newControl(senders, rate int, paid bool, chats int) (*control, error) {
	r := float64(rate)
	if paid {
		r = bot.FreeRate
	}
	info, err := p.sim.CreateBot(sim.BotConfig{RateLimit: &r, PaidBroadcast: &paid})
	if err != nil {
		return nil, err
	}
	h, _ := p.sim.BotHandle(strconv.FormatInt(info.ID, 10))
	c := &control{senders: senders, rate: rate, paid: paid, h: h,
		client: messenger.New(p.simURL, info.Token, &http.Client{Transport: messenger.NewTransport()})}
	for i := range chats {
		chat := int64(800_000_000 + i)
		if _, err := h.StartUser(chat, ""); err != nil {
			return nil, err
		}
		c.chats = append(c.chats, chat)
	}
	return c, nil
}

// run starts the senders; the function it returns stops them and waits for their calls.
func (c *control) run(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now().Add(100 * time.Millisecond)
	interval := time.Duration(float64(time.Second) / float64(c.rate))
	for i := range c.senders {
		wg.Go(func() {
			for k := 0; ; k++ {
				seq := i + k*c.senders
				at := start.Add(time.Duration(seq) * interval)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(at)):
				}
				wg.Go(func() {
					_, _ = c.client.SendMessage(ctx, messenger.SendMessageRequest{ChatID: c.chats[seq%len(c.chats)], Text: "control",
						AllowPaidBroadcast: c.paid})
				})
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// report prints what the simulator counted of the control's sends (its calls, 429s included, as for the
// workers' bots).
func (c *control) report() {
	s := c.h.Stats()
	fmt.Printf("   control, a perfectly paced sender in %d part(s) to one more bot at %d/s: %d sends, %d over the bot's rate in a sliding second (%.2f per 1,000), %d answered 429\n",
		c.senders, c.rate, s.Sends, s.SlidingSecondViolations, 1000*float64(s.SlidingSecondViolations)/float64(max(1, s.Sends)), s.Answered429)
}

// 2: fresh notifications on an idle bot behind the 50 bots' backlogs, then behind one bot's large one.
func freshParts(ctx context.Context, url string, pg *benchutil.Cluster) error {
	fmt.Printf("\n== 2a. a fresh notification on an idle bot while %d bots hold a backlog of %d each, %d worker(s) ==\n", *nBots, *backlog, *workers)
	p, err := newPipeline(ctx, url)
	if err != nil {
		return err
	}
	bots, err := p.backlogged(ctx)
	if err == nil {
		err = freshSamples(ctx, p, bots)
	}
	p.close()
	if err != nil {
		return err
	}

	fmt.Printf("\n== 2b. a fresh notification on an idle bot while one bot holds a backlog of %d, %d worker(s) ==\n", *big, *workers)
	url2, err := pg.Database(ctx, "bots_big")
	if err != nil {
		return err
	}
	p, err = newPipeline(ctx, url2)
	if err != nil {
		return err
	}
	defer p.close()
	o, err := p.newBot(ctx, "big", *botRate, false, *chats, 1_000_000)
	if err != nil {
		return err
	}
	if err := p.queue(ctx, o, *big, "backlog"); err != nil {
		return err
	}
	return freshSamples(ctx, p, []ownBot{o})
}

// freshSamples starts the workers, waits until the backlogged bots are being sent to, then sends the
// fresh notifications on an idle bot and prints how long each took to reach the platform.
func freshSamples(ctx context.Context, p *pipeline, busy []ownBot) error {
	idle, err := p.newBot(ctx, "idle", *botRate, false, *samples, 900_000_000)
	if err != nil {
		return err
	}
	if *profile != "" && len(busy) > 1 {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		time.AfterFunc(10*time.Second, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if err := p.startWorkers(ctx, *workers); err != nil {
		return err
	}
	sent := func() int64 {
		var n int64
		for _, o := range busy {
			n += o.h.Stats().Delivered
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for sent() < int64(*botRate*len(busy)) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the backlog is not being delivered: %d sent after 60 s", sent())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(*freshAfter)
	var lat benchutil.Latencies
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed error
	for i := range *samples {
		one := ownBot{id: idle.id, h: idle.h, tenant: idle.tenant, chats: idle.chats[i : i+1]}
		start := time.Now()
		if err := p.queueOne(ctx, one, i); err != nil {
			return err
		}
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := idle.h.WaitMessages(wctx, idle.chats[i], 1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = fmt.Errorf("fresh notification %d: %w", i, err)
				return
			}
			lat = append(lat, time.Since(start))
		})
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	var waiting int
	_ = p.b.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM notifications WHERE tenant_id <> 'idle' AND status = 'queued'`).Scan(&waiting)
	fmt.Printf("   publish → platform over %d fresh notifications: %v (target: within 1 s); the backlog still queued at the end: %d\n",
		len(lat), lat, waiting)
	violations(append(busy, idle))
	return nil
}

// queueOne stores and publishes one notification to user i of the bot's tenant (its chat o.chats[0]).
func (p *pipeline) queueOne(ctx context.Context, o ownBot, i int) error {
	var id string
	if err := p.b.Store.Pool().QueryRow(ctx, `
		INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, chat_id, bot_id, published_at)
		VALUES (gen_random_uuid(), $1, $2, $3, 5, 'fresh', $4, $5, $6, now()) RETURNING tracking_id::text`,
		notification.KindTenant, o.tenant, "u"+strconv.Itoa(i), notification.Queued, o.chats[0], int64(o.id)).Scan(&id); err != nil {
		return err
	}
	return p.b.Producer.Publish(ctx, queue.NewOutgoingVia(o.id, id, o.tenant, "u"+strconv.Itoa(i), o.chats[0], 5))
}
