// Package delivery is the delivery worker behind `herald worker`: a Kafka consumer group over the two
// priority topics that claims each notification in PostgreSQL, sends it through the messenger within the
// bot's rate limits, and records the outcome. Retries are scheduled in PostgreSQL and re-published when
// due; a redrive loop re-publishes notifications that look lost. The state machine is in state.go.
package delivery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

// Sender sends one message; *messenger.Client is the production one.
type Sender interface {
	SendMessage(ctx context.Context, req messenger.SendMessageRequest) (int64, error)
}

// Options configure a Worker. Zero values take the defaults given in each comment.
type Options struct {
	Store       *store.Store // required
	Sender      Sender       // required
	Brokers     []string     // required
	TopicPrefix string       // "herald"
	GroupID     string       // "herald-workers"
	// Outbox re-publishes due retries, failed publishes and redriven notifications; when nil one is built
	// on a producer from Brokers and TopicPrefix, and closed by Run.
	Outbox *outbox.Outbox
	Logger *slog.Logger // slog.Default()

	RateLimit       float64       // the bot's global messages per second, shared by all workers; 30
	PerChatInterval time.Duration // minimum spacing of two sends to one chat; 1 s
	MaxAttempts     int           // attempts before a transient failure becomes failed; 8
	Concurrency     int           // deliveries in flight; 256 (normal priority may hold at most 3/4)
	HighWeight      int           // high-priority grants per normal one while both wait; 9
	Lease           time.Duration // how long a claim may stay in flight before it is redriven; 2 m
	Backoff         Backoff       // transient-failure schedule; DefaultBackoff
	SendTimeout     time.Duration // one sendMessage call; min(10 s, Lease/2), so a slow call never outlives its lease

	SchedulerInterval  time.Duration // how often due retries and failed publishes are re-published; 1 s
	RedriveInterval    time.Duration // how often stuck notifications are looked for; min(30 s, Lease/2)
	QueuedRedriveAfter time.Duration // a notification queued this long is presumed lost; 10 m
	RepublishBatch     int           // rows per scheduler or redrive transaction; 500

	GracePeriod    time.Duration // shutdown: how long in-flight deliveries may finish; 20 s
	CommitInterval time.Duration // how often finished offsets are committed; 500 ms
	// HandoverWait bounds how long a claim waits for a notification that another attempt holds under a
	// live lease before giving up on it: during a partition handover the worker giving the partition up
	// finishes what it had started while the new owner reads the same messages, and waiting for it keeps
	// one user's messages in order and paced. A holder that died leaves the lease to expire instead (the
	// redrive sends it). SendTimeout + 5 s.
	HandoverWait time.Duration

	LagInterval        time.Duration // how often the consumer lag gauge is refreshed; 15 s
	AssignmentInterval time.Duration // how often the partition share is re-read besides rebalances; 5 s
	// ShareSettle delays an increase of this worker's rate share, so that the workers losing those
	// partitions have lowered theirs first (decreases apply at once). 1 s.
	ShareSettle       time.Duration
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
	defInt(&o.HighWeight, 9)
	defInt(&o.RepublishBatch, 500)
	def(&o.Lease, 2*time.Minute)
	if o.Backoff.Base <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Backoff.Max < o.Backoff.Base {
		o.Backoff.Max = o.Backoff.Base
	}
	def(&o.SendTimeout, min(10*time.Second, o.Lease/2))
	def(&o.SchedulerInterval, time.Second)
	def(&o.RedriveInterval, min(30*time.Second, o.Lease/2))
	def(&o.QueuedRedriveAfter, 10*time.Minute)
	def(&o.GracePeriod, 20*time.Second)
	def(&o.CommitInterval, 500*time.Millisecond)
	def(&o.HandoverWait, o.SendTimeout+5*time.Second)
	def(&o.LagInterval, 15*time.Second)
	def(&o.AssignmentInterval, 5*time.Second)
	def(&o.ShareSettle, time.Second)
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

	limiter *Limiter
	chats   *chatLimiter
	share   *shareKeeper

	// slots bound the deliveries in flight; normal priority must also hold a normalSlot, so that a normal
	// backlog never takes the slots high-priority messages need.
	slots       chan struct{}
	normalSlots chan struct{}

	consumers []*consumer

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
		opts:        opts,
		log:         opts.Logger,
		topics:      queue.TopicsFor(opts.TopicPrefix),
		outbox:      opts.Outbox,
		clientID:    "herald-worker-" + hex.EncodeToString(b[:]),
		limiter:     NewLimiter(0, opts.HighWeight),
		chats:       newChatLimiter(opts.PerChatInterval),
		slots:       make(chan struct{}, opts.Concurrency),
		normalSlots: make(chan struct{}, max(1, opts.Concurrency-opts.Concurrency/4)),
	}
	if w.outbox == nil {
		p := queue.NewProducer(opts.Brokers, opts.TopicPrefix)
		w.outbox = outbox.New(opts.Store, p, outbox.Options{Logger: opts.Logger})
		w.owned = func() { w.outbox.Close(); p.Close() }
	}
	w.killCtx, w.kill = context.WithCancel(context.Background())
	w.share = newShareKeeper(w)
	return w, nil
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
	// Background loops (limiter, commits, share) run until the very end; the republishing loops stop with
	// ctx, since a worker on its way out has no business producing.
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()

	var bg sync.WaitGroup
	bg.Go(func() { w.limiter.Run(bgCtx) })
	for _, p := range []Priority{High, Normal} {
		w.consumers = append(w.consumers, w.newConsumer(p))
	}
	bg.Go(func() { w.share.run(bgCtx) })
	bg.Go(func() { w.pruneChats(bgCtx) })
	var loops sync.WaitGroup
	loops.Go(func() { w.every(fetchCtx, w.opts.SchedulerInterval, w.republishDue) })
	loops.Go(func() { w.every(fetchCtx, w.opts.RedriveInterval, w.redrive) })
	loops.Go(func() { w.every(fetchCtx, w.opts.LagInterval, w.updateLag) })

	var fetchers sync.WaitGroup
	for _, c := range w.consumers {
		bg.Go(func() { c.commitLoop(bgCtx) })
		fetchers.Go(func() { c.fetchLoop(fetchCtx, workCtx) })
	}
	w.log.Info("delivery worker started", "group", w.opts.GroupID, "client_id", w.clientID,
		"topics", []string{w.topics.High, w.topics.Normal}, "rate_limit", w.opts.RateLimit, "concurrency", w.opts.Concurrency)

	<-fetchCtx.Done()
	fetchers.Wait()
	loops.Wait()
	if !w.killed.Load() {
		w.log.Info("delivery worker stopping: draining in-flight deliveries", "grace_period", w.opts.GracePeriod)
	}
	drained := make(chan struct{})
	go func() {
		for _, c := range w.consumers {
			c.lanes.Wait()
		}
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
	var errs []error
	for _, c := range w.consumers {
		if !w.killed.Load() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := c.commit(cctx); err != nil {
				errs = append(errs, err)
			}
			cancel()
		}
		if err := c.reader.Close(); err != nil {
			errs = append(errs, fmt.Errorf("while closing the %s reader: %w", c.topic, err))
		}
	}
	w.log.Info("delivery worker stopped")
	return errors.Join(errs...)
}

// every runs f at once and then every interval until ctx ends.
func (w *Worker) every(ctx context.Context, interval time.Duration, f func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *Worker) pruneChats(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.chats.prune(time.Now().Add(-time.Minute))
		}
	}
}

// acquire takes an in-flight slot for priority p.
func (w *Worker) acquire(ctx context.Context, p Priority) error {
	if p == Normal {
		select {
		case w.normalSlots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case w.slots <- struct{}{}:
		inFlight.WithLabelValues(p.String()).Inc()
		return nil
	case <-ctx.Done():
		if p == Normal {
			<-w.normalSlots
		}
		return ctx.Err()
	}
}

func (w *Worker) release(p Priority) {
	<-w.slots
	if p == Normal {
		<-w.normalSlots
	}
	inFlight.WithLabelValues(p.String()).Dec()
}

// consumer reads one priority topic.
type consumer struct {
	w       *Worker
	prio    Priority
	topic   string
	reader  *kafka.Reader
	tracker *offsetTracker

	mu    sync.Mutex
	lanes sync.WaitGroup
	// queues holds, per Kafka key, the messages waiting behind the one in delivery: one user's (or one
	// chat's) messages go one at a time, in fetch order, while other keys proceed in parallel.
	queues map[string][]*fetched
}

func (w *Worker) newConsumer(p Priority) *consumer {
	topic := w.topics.Normal
	if p == High {
		topic = w.topics.High
	}
	log := w.log.With("topic", topic)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: w.opts.Brokers,
		GroupID: w.opts.GroupID,
		Topic:   topic,
		// The client id names this worker's members in the group, which is how it finds its share of the
		// partitions (share.go).
		Dialer:            &kafka.Dialer{ClientID: w.clientID, Timeout: 10 * time.Second, DualStack: true},
		MinBytes:          1,
		MaxBytes:          10 << 20,
		MaxWait:           2 * time.Second,
		QueueCapacity:     max(100, w.opts.Concurrency),
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    0, // synchronous: commitLoop batches
		HeartbeatInterval: w.opts.HeartbeatInterval,
		SessionTimeout:    w.opts.SessionTimeout,
		JoinGroupBackoff:  time.Second,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		Logger:            kafka.LoggerFunc(func(f string, a ...any) { log.Debug(fmt.Sprintf(f, a...)) }),
		ErrorLogger:       kafka.LoggerFunc(func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) }),
	})
	return &consumer{w: w, prio: p, topic: topic, reader: r, tracker: newOffsetTracker(), queues: map[string][]*fetched{}}
}

// fetchLoop fetches while there is a free slot, so a full worker stops fetching rather than buffering.
func (c *consumer) fetchLoop(fetchCtx, workCtx context.Context) {
	for {
		if err := c.w.acquire(fetchCtx, c.prio); err != nil {
			return
		}
		m, err := c.reader.FetchMessage(fetchCtx)
		if err != nil {
			c.w.release(c.prio)
			if fetchCtx.Err() != nil {
				return
			}
			c.w.log.Warn("fetch failed", "topic", c.topic, "err", err)
			_ = sleepUntil(fetchCtx, time.Now().Add(time.Second))
			continue
		}
		c.w.share.sawPartition(c.topic, m.Partition)
		c.dispatch(workCtx, c.tracker.add(m))
	}
}

// dispatch queues f behind earlier messages of its key, starting a lane when the key has none.
func (c *consumer) dispatch(ctx context.Context, f *fetched) {
	key := strconv.Itoa(f.msg.Partition) + "/" + string(f.msg.Key)
	if len(f.msg.Key) == 0 {
		key += "#" + strconv.FormatInt(f.msg.Offset, 10)
	}
	c.mu.Lock()
	q, running := c.queues[key]
	c.queues[key] = append(q, f)
	c.mu.Unlock()
	if running {
		return
	}
	c.lanes.Go(func() { c.lane(ctx, key) })
}

// lane delivers the messages of one key in order until its queue is empty.
func (c *consumer) lane(ctx context.Context, key string) {
	// handover is when another worker last acted on this key's chat, as far as this lane saw (see
	// claim): the lane's next send keeps the per-chat interval from it.
	var handover time.Time
	for {
		c.mu.Lock()
		q := c.queues[key]
		if len(q) == 0 {
			delete(c.queues, key)
			c.mu.Unlock()
			return
		}
		f := q[0]
		c.mu.Unlock()

		// After abort (grace over, or killed) nothing new starts: the message stays uncommitted and the
		// partition's next owner reads it again.
		if ctx.Err() == nil && c.w.handle(ctx, c.prio, f.msg, &handover) {
			c.tracker.done(f)
		}
		c.w.release(c.prio)

		c.mu.Lock()
		c.queues[key] = c.queues[key][1:]
		c.mu.Unlock()
	}
}

// commitLoop commits finished offsets every CommitInterval.
func (c *consumer) commitLoop(ctx context.Context) {
	t := time.NewTicker(c.w.opts.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.commit(ctx); err != nil && ctx.Err() == nil {
				c.w.log.Warn("commit failed", "topic", c.topic, "err", err)
			}
		}
	}
}

func (c *consumer) commit(ctx context.Context) error {
	msgs := c.tracker.committable()
	if len(msgs) == 0 {
		return nil
	}
	if err := c.reader.CommitMessages(ctx, msgs...); err != nil {
		c.tracker.restore(msgs)
		return fmt.Errorf("while committing offsets of %s: %w", c.topic, err)
	}
	return nil
}

// handle delivers the notification of one Kafka message. It reports whether the message is settled
// (its offset may be committed): false only when the worker was killed or aborted before settling it.
// handover carries, from one message of a lane to the next, the moment another worker last acted on the
// lane's chat (zero when none is known).
func (w *Worker) handle(ctx context.Context, p Priority, m kafka.Message, handover *time.Time) bool {
	env, err := queue.ParseEnvelope(m.Value)
	if err == nil {
		_, err = uuid.Parse(env.TrackingID)
	}
	if err != nil {
		skipped.WithLabelValues("bad_envelope").Inc()
		w.log.Error("dropping a malformed envelope", "topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "err", err)
		return true
	}
	d, settledAt, err := w.claim(ctx, env.TrackingID)
	if !settledAt.IsZero() {
		*handover = settledAt
	}
	var nc *store.NotClaimable
	switch {
	case errors.As(err, &nc) && nc.Leased:
		// Still held by another attempt after HandoverWait: its holder is stuck or dead. Its lease will run
		// out and the redrive sends it again; the lane moves on.
		skipped.WithLabelValues("leased").Inc()
		w.log.Warn("skipping a notification another attempt still holds", "tracking_id", env.TrackingID)
		return true
	case errors.Is(err, store.ErrNotClaimable):
		// Terminal, or a retry not yet due (the scheduler re-publishes it).
		skipped.WithLabelValues("not_claimable").Inc()
		w.log.Debug("skipping", "tracking_id", env.TrackingID, "reason", err)
		return true
	case errors.Is(err, store.ErrNotFound):
		// Every producer commits the row before it publishes, so this envelope's publish was given up (the
		// request was answered 502 and its row deleted) yet reached the broker after all. Drop it at once.
		skipped.WithLabelValues("not_found").Inc()
		w.log.Info("dropping an envelope without a notification (a publish that was given up)", "tracking_id", env.TrackingID)
		return true
	case err != nil:
		return false // ctx ended while PostgreSQL was unavailable
	}
	if !handover.IsZero() {
		w.chats.Sent(d.ChatID, *handover)
		*handover = time.Time{}
	}
	return w.deliver(ctx, p, d)
}

// claim claims the notification. It waits, indefinitely (until ctx ends), while PostgreSQL is unavailable,
// and up to HandoverWait while another attempt holds the notification: then settledAt is when that
// attempt ended (by the database's clock, translated to ours), the last moment another worker may have
// sent to the chat.
func (w *Worker) claim(ctx context.Context, trackingID string) (d store.Delivery, settledAt time.Time, err error) {
	handoverDeadline := time.Now().Add(w.opts.HandoverWait)
	waitedForLease := false
	wait := 10 * time.Millisecond
	for {
		d, err = w.opts.Store.ClaimDelivery(ctx, trackingID, w.opts.Lease)
		var nc *store.NotClaimable
		switch {
		case err == nil:
			if waitedForLease {
				settledAt = time.Now()
			}
			return d, settledAt, nil
		case errors.As(err, &nc) && nc.Leased:
			if time.Now().After(handoverDeadline) {
				return d, time.Time{}, err
			}
			waitedForLease = true
			wait = 50 * time.Millisecond
		case errors.As(err, &nc):
			if waitedForLease {
				settledAt = time.Now().Add(-nc.Age)
			}
			return d, settledAt, err
		case errors.Is(err, store.ErrNotFound):
			return d, time.Time{}, err
		default:
			if ctx.Err() != nil {
				return d, time.Time{}, ctx.Err()
			}
			w.log.Warn("claim failed; retrying", "tracking_id", trackingID, "err", err)
			wait = max(wait, 500*time.Millisecond)
		}
		if err := sleepUntil(ctx, time.Now().Add(wait)); err != nil {
			return d, time.Time{}, err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// deliver sends a claimed notification and records the outcome.
func (w *Worker) deliver(ctx context.Context, p Priority, d store.Delivery) bool {
	if d.Kind == store.KindTenant && d.ChatID == 0 {
		return w.finish(d, NoLink())
	}
	start := time.Now()
	if err := w.chats.Wait(ctx, d.ChatID); err != nil {
		return w.finish(d, Release(false))
	}
	limiterWait.WithLabelValues("chat", p.String()).Observe(time.Since(start).Seconds())
	start = time.Now()
	if err := w.limiter.Wait(ctx, p); err != nil {
		return w.finish(d, Release(false))
	}
	// The last moment before the request leaves: see Limiter.Admit.
	if err := w.limiter.Admit(ctx); err != nil {
		return w.finish(d, Release(false))
	}
	limiterWait.WithLabelValues("global", p.String()).Observe(time.Since(start).Seconds())

	sent := time.Now()
	w.chats.Sent(d.ChatID, sent)
	sendCtx, cancel := context.WithTimeout(ctx, w.opts.SendTimeout)
	msgID, err := w.opts.Sender.SendMessage(sendCtx, messenger.SendMessageRequest{ChatID: d.ChatID, Text: d.Body, ReplyMarkup: d.ReplyMarkup})
	cancel()
	elapsed := time.Since(sent)
	if err != nil && ctx.Err() != nil {
		// Shutdown interrupted the call: the platform may or may not have the message.
		return w.finish(d, Release(true))
	}
	class := messenger.Classify(err).String()
	platformLatency.WithLabelValues(class).Observe(elapsed.Seconds())
	dec := Decide(msgID, err, d.Attempts, w.opts.MaxAttempts, w.opts.Backoff)
	if dec.Throttle == ThrottleChat {
		if w.chats.Throttle(d.ChatID, dec.Wait) {
			throttles.WithLabelValues("bot").Inc()
			w.limiter.Pause(time.Now().Add(dec.Wait))
			w.log.Warn("the platform throttles the whole bot", "retry_after", dec.Wait)
		} else {
			throttles.WithLabelValues("chat").Inc()
		}
	}
	return w.finish(d, dec)
}

// finish writes the decision. A write that keeps failing is given up after a few tries: the lease then
// runs out and the redrive loop sends the notification again (the one way a delivered message can be sent
// twice, besides a timeout the platform actually served).
func (w *Worker) finish(d store.Delivery, dec Decision) bool {
	if w.killed.Load() {
		return false // a dead worker writes nothing
	}
	r := dec.Result
	log := w.log.With("tracking_id", d.TrackingID, "attempt", d.Attempts, "status", r.Status)
	var err error
	for try := range 4 {
		if try > 0 {
			time.Sleep(time.Duration(try) * 250 * time.Millisecond)
		}
		var ok bool
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err = w.opts.Store.FinishDelivery(ctx, d, r)
		if err == nil && !ok && try > 0 {
			// An earlier try may have committed and lost only its answer (the connection broke): then the
			// row already shows this result, and nobody took the claim over.
			var recorded bool
			if recorded, err = w.opts.Store.DeliveryRecorded(ctx, d, r); recorded {
				ok = true
			}
		}
		cancel()
		if err == nil {
			if !ok {
				skipped.WithLabelValues("stale_result").Inc()
				log.Warn("status not recorded: the claim was taken over after its lease ran out")
			} else {
				outcomes.WithLabelValues(string(r.Status), strconv.Itoa(r.ErrorCode)).Inc()
				if r.Status == store.StatusDelivered {
					log.Debug("delivered", "messenger_message_id", r.MessengerMessageID)
				} else {
					log.Info("delivery attempt ended", "error_code", r.ErrorCode, "error", r.ErrorMessage, "retry_in", r.RetryIn)
				}
			}
			return true
		}
	}
	log.Error("could not record the delivery; the lease will expire and redrive it", "err", err)
	return true
}
