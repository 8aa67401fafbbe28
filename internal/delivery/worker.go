// Package delivery is the delivery worker behind `herald worker`: a Kafka consumer group over the two
// priority topics that claims each notification in PostgreSQL, sends it through the messenger with its
// bot's token (the shared bot's, or its tenant's own: internal/bot) within that bot's rate limits, and
// records the outcome. Its parts, one package each, are wired here (Worker):
//   - consume: the topics, the consumer group, the offsets, and the lanes that hand each key's messages
//     on one at a time; each bot's share of what is read ahead;
//   - send: the claim, the platform call and the decision on its answer (send.Decide), for one message;
//   - rate: who may send now — each bot's global rate, shared with the other workers by lease, and its
//     per-chat interval.
//
// The worker's own loops run beside them: retries are scheduled in PostgreSQL and re-published when due,
// and a redrive re-publishes notifications that look lost (republish.go); scheduled notifications are
// released when their send_at comes, and notifications past their expires_at expire (schedule.go).
package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/delivery/consume"
	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/delivery/send"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

// Options configure a Worker. Zero values take the defaults given in each comment.
type Options struct {
	Store       *store.Store  // required
	Sender      send.Platform // required: the shared bot's; *messenger.Client in production
	Brokers     []string      // required
	TopicPrefix string        // "herald"
	GroupID     string        // "herald-workers"
	// Outbox re-publishes due retries, failed publishes and redriven notifications; when nil one is built
	// on a producer from Brokers and TopicPrefix, and closed by Run.
	Outbox *outbox.Outbox
	Logger *slog.Logger // slog.Default()
	// Bots are the tenants' own bots: their tokens' clients and their settings. nil: this worker sends
	// through the shared bot only (a notification through a tenant's bot is retried, for a worker that
	// can: send.BotUnavailable). The caller keeps it refreshed (bot.Registry.Run).
	Bots *bot.Registry

	RateLimit       float64              // a bot's global messages per second (the shared bot's, and a tenant's bot's without a rateLimit of its own), shared by all workers; 30
	PerChatInterval time.Duration        // minimum spacing of two sends to one chat; 1 s
	MaxAttempts     int                  // attempts before a transient failure becomes failed; 8
	Concurrency     int                  // deliveries in flight (claim, call, status write); 256 (normal at most 3/4)
	Buffer          int                  // messages in lanes (fetched and not finished); 20,000 (normal at most 3/4)
	HighWeight      int                  // high-priority grants per normal one while both wait; 9
	Lease           time.Duration        // how long a claim may stay in flight before it is redriven; 2 m
	Backoff         notification.Backoff // transient-failure schedule; send.DefaultBackoff
	SendTimeout     time.Duration        // one sendMessage call; min(10 s, Lease/2), so a slow call never outlives its lease
	// Hold bounds, per topic, the messages fetched and held compactly past their bot's share of Buffer
	// (consume/hold.go); fetching stops when that many are held. 20 × Buffer.
	Hold int

	SchedulerInterval time.Duration // how often due retries and failed publishes are re-published; 1 s
	// ScheduleInterval is how often scheduled notifications whose send_at has come are released; 250 ms, so
	// that one is published within a second of its send_at.
	ScheduleInterval   time.Duration
	ExpireInterval     time.Duration // how often the expiry sweep runs; 1 s
	RedriveInterval    time.Duration // how often stuck notifications are looked for; min(30 s, Lease/2)
	QueuedRedriveAfter time.Duration // a notification queued this long is presumed lost; 10 m
	// LostPublishAfter: while the group has consumed everything published up to this long ago, a
	// notification queued twice as long is presumed lost at once (its producer died between the commit and
	// the publish), not after QueuedRedriveAfter; 10 s.
	LostPublishAfter time.Duration
	RepublishBatch   int // rows per scheduler or redrive transaction; 500

	GracePeriod    time.Duration // shutdown: how long in-flight deliveries may finish; 20 s
	CommitInterval time.Duration // how often finished offsets are committed; 500 ms
	// HandoverWait bounds how long a claim waits for a notification that another attempt holds under a
	// live lease before giving up on it: during a partition handover the worker giving the partition up
	// finishes what it had started while the new owner reads the same messages, and waiting for it keeps
	// one user's messages in order and paced. A holder that died leaves the lease to expire instead (the
	// redrive sends it). SendTimeout + 5 s.
	HandoverWait time.Duration
	// OrderWait bounds how long a tenant notification waits for a system or high-priority message
	// accepted before it to the same chat that is still pending (notification.AheadSQL): a message ahead
	// takes one chat interval and its own turn, seconds at most; one whose envelope was lost would hold
	// the chat until the redrive (minutes), so past this the notification is sent regardless. 30 s.
	OrderWait time.Duration

	LagInterval        time.Duration // how often the consumer lag gauge is refreshed; 15 s
	AssignmentInterval time.Duration // how often the partitions held are re-read besides rebalances; 5 s
	// RateLeaseInterval is how often the worker renews its lease on part of the global rate, saying what
	// it could use (rate.Lease); 250 ms. RateLeaseTTL is how long a lease holds: a worker that stops
	// renewing stops sending a second and a twelfth of it earlier, and the others may take its part after
	// all of it; 3 s, at least 2 s.
	RateLeaseInterval time.Duration
	RateLeaseTTL      time.Duration
	SessionTimeout    time.Duration // Kafka group session; 10 s (brokers refuse less than 6 s by default)
	HeartbeatInterval time.Duration // 1 s: a rebalance waits for every member's next heartbeat
}

func (o *Options) defaults() error {
	if o.Store == nil || o.Sender == nil || len(o.Brokers) == 0 {
		return errors.New("delivery: Store, Sender and Brokers are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	if o.TopicPrefix == "" {
		o.TopicPrefix = "herald"
	}
	if o.GroupID == "" {
		o.GroupID = "herald-workers"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RateLimit <= 0 {
		o.RateLimit = 30
	}
	if o.PerChatInterval < 0 {
		o.PerChatInterval = 0
	} else if o.PerChatInterval == 0 {
		o.PerChatInterval = time.Second
	}
	defInt(&o.MaxAttempts, 8)
	defInt(&o.Concurrency, 256)
	defInt(&o.Buffer, 20000)
	defInt(&o.Hold, 20*o.Buffer)
	defInt(&o.HighWeight, 9)
	defInt(&o.RepublishBatch, 500)
	def(&o.Lease, 2*time.Minute)
	if o.Backoff.Base <= 0 {
		o.Backoff = send.DefaultBackoff
	}
	if o.Backoff.Max < o.Backoff.Base {
		o.Backoff.Max = o.Backoff.Base
	}
	def(&o.SendTimeout, min(10*time.Second, o.Lease/2))
	def(&o.SchedulerInterval, time.Second)
	def(&o.ScheduleInterval, 250*time.Millisecond)
	def(&o.ExpireInterval, time.Second)
	def(&o.RedriveInterval, min(30*time.Second, o.Lease/2))
	def(&o.QueuedRedriveAfter, 10*time.Minute)
	def(&o.LostPublishAfter, 10*time.Second)
	def(&o.GracePeriod, 20*time.Second)
	def(&o.CommitInterval, 500*time.Millisecond)
	def(&o.HandoverWait, o.SendTimeout+5*time.Second)
	def(&o.OrderWait, 30*time.Second)
	def(&o.LagInterval, 15*time.Second)
	def(&o.AssignmentInterval, 5*time.Second)
	def(&o.RateLeaseInterval, 250*time.Millisecond)
	def(&o.RateLeaseTTL, 3*time.Second)
	o.RateLeaseTTL = max(o.RateLeaseTTL, 2*time.Second)
	def(&o.SessionTimeout, 10*time.Second)
	def(&o.HeartbeatInterval, time.Second)
	return nil
}

// Worker delivers notifications. Build it with New and call Run once.
type Worker struct {
	opts     Options
	log      *slog.Logger
	topics   queue.Topics
	outbox   *outbox.Outbox
	owned    func() // closes the outbox and producer New built
	clientID string

	// The bots' paces (rate), this worker's part in the consumer group (consume), and the sender that
	// delivers what the group fetches (send).
	paces  *rate.Paces
	group  *consume.Group
	sender *send.Sender

	// agesSet are the bot labels whose backlog age was set last (metrics.go), under metricsMu.
	metricsMu sync.Mutex
	agesSet   map[string]float64

	// killed and killCtx are the test hook for a crash (export_test.go): stop at once, write nothing more.
	killed  atomic.Bool
	killCtx context.Context
	kill    context.CancelFunc
}

// New checks the options and builds a worker.
func New(opts Options) (*Worker, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	w := &Worker{
		opts:     opts,
		log:      opts.Logger,
		topics:   queue.TopicsFor(opts.TopicPrefix),
		outbox:   opts.Outbox,
		clientID: "herald-worker-" + hex.EncodeToString(b[:]),
	}
	if w.outbox == nil {
		p := queue.NewProducer(opts.Brokers, opts.TopicPrefix)
		w.outbox = outbox.New(opts.Store, p, outbox.Options{Logger: opts.Logger})
		w.owned = func() { w.outbox.Close(); p.Close() }
	}
	w.killCtx, w.kill = context.WithCancel(context.Background())
	// The paces are made before the group, which keeps a chat's pace across a rebalance through them; the
	// group's lanes, each bot's demand on its rate, are attached to the paces once it exists
	// (MeasureDemand, below).
	w.paces = rate.NewPaces(rate.PacesOptions{
		Store: opts.Store, Holder: w.clientID, Pool: w.pool, Settings: w.settings, HighWeight: opts.HighWeight,
		PerChatInterval: opts.PerChatInterval, Interval: opts.RateLeaseInterval, TTL: opts.RateLeaseTTL,
		Killed: w.killed.Load, Logger: w.log,
	})
	var bots func(ctx context.Context, b notification.BotID) (send.Platform, error)
	if opts.Bots != nil {
		bots = func(ctx context.Context, b notification.BotID) (send.Platform, error) {
			c, err := opts.Bots.Client(ctx, b)
			if err != nil {
				return nil, err
			}
			return c, nil
		}
	}
	w.sender = send.New(send.Options{
		Store: opts.Store, Platform: opts.Sender, Bots: bots, Paces: w.paces, BotLabel: w.botLabel, Logger: w.log,
		PerChatInterval: opts.PerChatInterval, MaxAttempts: opts.MaxAttempts, Concurrency: opts.Concurrency,
		Lease: opts.Lease, Backoff: opts.Backoff, SendTimeout: opts.SendTimeout, HandoverWait: opts.HandoverWait,
		OrderWait: opts.OrderWait, Killed: w.killed.Load,
	})
	w.group = consume.New(consume.Options{
		Brokers: opts.Brokers, GroupID: opts.GroupID, ClientID: w.clientID, Topics: w.topics,
		Buffer: opts.Buffer, Hold: opts.Hold, Concurrency: opts.Concurrency,
		SessionTimeout: opts.SessionTimeout, HeartbeatInterval: opts.HeartbeatInterval,
		AssignmentInterval: opts.AssignmentInterval, CommitInterval: opts.CommitInterval,
		Paces: w.paces, PerChatInterval: opts.PerChatInterval, Handler: w.sender, Logger: w.log,
	})
	w.paces.MeasureDemand(w.group)
	return w, nil
}

// pool names the rate_leases pool of a bot. The shared bot's is the consumer group's, as before tenants
// had bots of their own; a tenant's bot's is its id's, whichever group sends through it.
func (w *Worker) pool(b notification.BotID) string {
	if b == notification.SharedBot {
		return "bot:" + w.opts.GroupID
	}
	return "bot/" + strconv.FormatInt(int64(b), 10)
}

// settings are a bot's rate settings: a tenant's bot's own rateLimit (else RateLimit) and paid broadcast
// past the platform's free rate; the shared bot's RateLimit.
func (w *Worker) settings(b notification.BotID) rate.Settings {
	s := rate.Settings{Rate: w.opts.RateLimit}
	if b == notification.SharedBot || w.opts.Bots == nil {
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := w.opts.Bots.Get(ctx, b)
	if err != nil {
		return s // a bot the registry cannot read now: the default rate, without paid broadcast
	}
	if info.RateLimit > 0 {
		s.Rate = float64(info.RateLimit)
	}
	if info.PaidBroadcast {
		s.Free = bot.FreeRate
	}
	return s
}

// botLabel names a bot in the per-bot metrics: "shared", or a tenant's bot's username (its id while the
// registry does not have it), capped (metriclabel.Bots).
func (w *Worker) botLabel(b notification.BotID) string {
	if b == notification.SharedBot {
		return metriclabel.SharedBot
	}
	name := strconv.FormatInt(int64(b), 10)
	if w.opts.Bots != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if info, err := w.opts.Bots.Get(ctx, b); err == nil && info.Username != "" {
			name = info.Username
		}
	}
	return metriclabel.Bots.Of(name)
}

// Run consumes until ctx ends, then shuts down: it stops fetching, lets in-flight deliveries finish for
// up to GracePeriod, releases the rest back to PostgreSQL as due retries, commits, and leaves the group.
// Messages fetched but not started are not committed, so the next owner of the partition reads them.
func Run(ctx context.Context, opts Options) error {
	w, err := New(opts)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Run is the worker's main loop; see the package function Run.
func (w *Worker) Run(ctx context.Context) error {
	if w.owned != nil {
		defer w.owned()
	}
	fetchCtx, stopFetching := context.WithCancel(ctx)
	defer stopFetching()
	// Deliveries outlive ctx by the grace period; abort ends them.
	workCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	defer context.AfterFunc(w.killCtx, func() { stopFetching(); abort() })()
	// Background loops (limiter, commits, the rate lease, the group view) run until the very end; the republishing loops stop with
	// ctx, since a worker on its way out has no business producing.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()

	var bg sync.WaitGroup
	w.group.Join()
	bg.Go(func() { w.paces.Run(bgCtx) })
	bg.Go(func() { w.group.Watch(bgCtx) })
	bg.Go(func() { every(bgCtx, time.Minute, w.pruneChats) })
	bg.Go(func() { every(bgCtx, botMetricsInterval, w.updateBotMetrics) })
	var loops sync.WaitGroup
	loops.Go(func() { every(fetchCtx, w.opts.SchedulerInterval, w.republishDue) })
	loops.Go(func() { every(fetchCtx, w.opts.ScheduleInterval, w.releaseScheduled) })
	loops.Go(func() { every(fetchCtx, w.opts.ExpireInterval, w.expireDue) })
	loops.Go(func() { every(fetchCtx, w.opts.RedriveInterval, w.redrive) })
	loops.Go(func() { every(fetchCtx, w.opts.LagInterval, w.group.UpdateLag) })
	loops.Go(func() { every(fetchCtx, 10*time.Second, w.refreshWeights) })
	loops.Go(func() { every(fetchCtx, endingsInterval, w.finishEndings) })
	loops.Go(func() { every(fetchCtx, deletesInterval, w.deleteMessages) })

	w.log.Info("delivery worker started", "group", w.opts.GroupID, "client_id", w.clientID,
		"topics", []string{w.topics.High, w.topics.Normal}, "rate_limit", w.opts.RateLimit, "concurrency", w.opts.Concurrency, "buffer", w.opts.Buffer, "bots", w.opts.Bots != nil)
	w.group.Fetch(fetchCtx, workCtx) // until fetchCtx ends
	loops.Wait()
	if !w.killed.Load() {
		w.log.Info("delivery worker stopping: draining in-flight deliveries", "grace_period", w.opts.GracePeriod)
	}
	drained := make(chan struct{})
	go func() {
		w.group.WaitLanes()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(w.opts.GracePeriod):
		w.log.Warn("grace period over: releasing in-flight deliveries")
		abort()
		<-drained
	}
	stopBG()
	bg.Wait()
	err := w.group.Leave(!w.killed.Load())
	w.log.Info("delivery worker stopped")
	return err
}
