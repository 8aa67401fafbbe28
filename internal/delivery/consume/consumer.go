package consume

// The consumer: one kafka-go group reader per priority topic, fetching while a buffer slot is free (far
// ahead of what is being sent, so that tenants can be served in turn), handing each message to the lane of
// its key, and committing finished offsets (offsets.go).
//
// Generations. When the consumer group rebalances, the partitions this worker held may go to another
// worker, which starts reading them at the committed offset, behind what this worker fetched. If this
// worker went on sending what it had fetched, two workers would serve the same chats for as long as that
// backlog lasts: out of order and twice the per-chat rate. So the messages fetched in one generation belong
// to it: the moment it ends, every one of them that has not started is dropped (uncommitted; whoever holds
// its partition next reads it again, this worker included), waits for a chat or a turn give up, and no
// fetch happens until the next generation has begun. kafka-go reports neither moment through its API, but
// it logs both, through the Logger (generationLogger).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
)

// consumer reads one priority topic.
type consumer struct {
	g       *Group
	prio    rate.Priority
	topic   string
	reader  *kafka.Reader
	tracker *offsetTracker

	mu    sync.Mutex
	lanes sync.WaitGroup
	// gen is the current generation's context (see Generations): a message fetched under it starts only
	// while it is live. nil between the end of one generation and the start of the next: no fetching then.
	gen       context.Context
	endGen    context.CancelFunc
	parent    context.Context // startCtx, once fetchLoop runs: a generation also ends with it
	genChange chan struct{}   // closed and replaced when a generation begins
	// genBegan is when the current generation began; heldParts are the partitions messages came from in
	// it, prevParts those of the generation before. A chat on a partition this worker did not hold may
	// have been sent to by the previous holder until that generation ended, just before genBegan.
	genBegan             time.Time
	heldParts, prevParts map[int]bool
	// queues holds, per Kafka key, the messages waiting behind the one in delivery: one user's (or one
	// chat's) messages go one at a time, in fetch order, while other keys proceed in parallel.
	queues map[string][]*fetched
	// bots is what this consumer holds of each bot's messages, ring the bots with messages held in the
	// order they take turns and turn the next one's place in it, capacity the consumer's part of the
	// buffer (its priority's), and hold the slots of held messages and of the fetch under way (hold.go).
	// promoteWake says a buffer slot is free.
	bots        map[notification.BotID]*botWork
	ring        []notification.BotID
	turn        int
	capacity    int
	hold        chan struct{}
	promoteWake chan struct{}
	tenants     map[string]string // interned tenant ids of held messages
}

func (g *Group) newConsumer(p rate.Priority) *consumer {
	c := g.consumerOf(p)
	log := g.log.With("topic", c.topic)
	cfg := kafka.ReaderConfig{
		Brokers: g.opts.Brokers,
		GroupID: g.opts.GroupID,
		Topic:   c.topic,
		// The client id names this worker's members in the group, which is how it finds its partitions
		// (group.go).
		Dialer:   &kafka.Dialer{ClientID: g.opts.ClientID, Timeout: 10 * time.Second, DualStack: true},
		MinBytes: 1,
		// A fetch's bytes per partition. The partitions' fetches are read in turn, so a small fetch
		// interleaves them finely: a bot's first messages in fetch order, which fill its share of the
		// lanes (hold.go), then come from all of this worker's partitions and open lanes for chats of
		// each. With 10 MB a partition's whole backlog came in one fetch, and a bot with 1,000 chats and
		// 15 messages each had lanes for the chats of one or two partitions (about 150) while the rest
		// waited to be promoted, at the pace of those few chats (issue 43).
		MaxBytes:          256 << 10,
		MaxWait:           2 * time.Second,
		QueueCapacity:     max(100, g.opts.Concurrency),
		StartOffset:       kafka.FirstOffset,
		CommitInterval:    0, // synchronous: commitOffsets batches
		HeartbeatInterval: g.opts.HeartbeatInterval,
		SessionTimeout:    g.opts.SessionTimeout,
		JoinGroupBackoff:  time.Second,
		GroupBalancers:    groupBalancers,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		ErrorLogger:       kafka.LoggerFunc(func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) }),
	}
	cfg.Logger = generationLogger{c: c, log: log}
	c.reader = kafka.NewReader(cfg)
	return c
}

// consumerOf is the consumer of priority p's topic, all but its reader (newConsumer's).
func (g *Group) consumerOf(p rate.Priority) *consumer {
	topic := g.opts.Topics.Normal
	capacity := max(1, g.opts.Buffer-g.opts.Buffer/4) // slots.go: normal holds at most three quarters
	if p == rate.High {
		topic, capacity = g.opts.Topics.High, g.opts.Buffer
	}
	return &consumer{g: g, prio: p, topic: topic, tracker: newOffsetTracker(), queues: map[string][]*fetched{},
		genChange: make(chan struct{}), bots: map[notification.BotID]*botWork{}, capacity: capacity,
		hold: make(chan struct{}, max(1, g.opts.Hold)+1), promoteWake: make(chan struct{}, 1), tenants: map[string]string{}}
}

// kafka-go's log lines at the end of a group generation (the heartbeat stops with every generation) and
// at the start of the next (after the reader restarted its partition readers at the committed offsets,
// with stale buffered messages discarded from then on). TestGenerationsEndAndBeginOnARebalance fails if
// an upgrade of kafka-go changes them.
const (
	logGenerationEnded = "stopped heartbeat for group"
	logGenerationBegan = "subscribed to topics and partitions"
)

// generationLogger is the reader's debug log, watching for the two lines.
type generationLogger struct {
	c   *consumer
	log interface{ Debug(string, ...any) }
}

func (g generationLogger) Printf(format string, args ...any) {
	switch {
	case strings.HasPrefix(format, logGenerationEnded):
		g.c.endGeneration()
	case strings.HasPrefix(format, logGenerationBegan):
		g.c.beginGeneration()
	}
	g.log.Debug(fmt.Sprintf(format, args...))
}

// endGeneration drops every fetched message that has not started (the held at once, those in lanes when
// their turn comes), stops fetching until the next generation, and forgets the offsets not yet committed
// (they would be another worker's to commit; the next generation reads them again).
func (c *consumer) endGeneration() {
	c.mu.Lock()
	if c.endGen != nil {
		c.endGen()
	}
	c.gen, c.endGen = nil, nil
	c.dropHeldLocked()
	c.mu.Unlock()
	c.tracker.reset()
	generations.WithLabelValues("ended").Inc()
}

// beginGeneration lets fetching resume under a new generation.
func (c *consumer) beginGeneration() {
	c.mu.Lock()
	if c.endGen != nil {
		c.endGen()
	}
	parent := c.parent
	if parent == nil {
		parent = context.Background() // before fetchLoop: it derives the first generation itself
	}
	c.gen, c.endGen = context.WithCancel(parent)
	c.prevParts, c.heldParts, c.genBegan = c.heldParts, map[int]bool{}, time.Now()
	close(c.genChange)
	c.genChange = make(chan struct{})
	c.mu.Unlock()
	if c.g.view != nil {
		c.g.view.poke()
	}
	generations.WithLabelValues("began").Inc()
}

// generation returns the live generation's context, waiting (until ctx ends) while there is none.
func (c *consumer) generation(ctx context.Context) (context.Context, error) {
	for {
		c.mu.Lock()
		gen, change := c.gen, c.genChange
		c.mu.Unlock()
		if gen != nil && gen.Err() == nil {
			return gen, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-change:
		}
	}
}

// fetchLoop fetches while fewer than Options.Hold messages are held, so a full worker stops fetching
// rather than holding more. Each message goes to its lane, or is held when its bot has its share of the
// buffer in lanes (hold.go).
func (c *consumer) fetchLoop(fetchCtx, workCtx context.Context) {
	var promoting sync.WaitGroup
	defer promoting.Wait()
	promoting.Go(func() { c.promoteLoop(fetchCtx, workCtx) })
	// The first generation starts here: the reader may have logged its start already, or will (which
	// begins a fresh generation before anything is fetched in this one: harmless).
	c.mu.Lock()
	c.parent = fetchCtx
	if c.endGen != nil {
		c.endGen() // begun before this loop ran, under no parent: nothing was fetched in it
	}
	c.gen, c.endGen = context.WithCancel(fetchCtx)
	c.prevParts, c.heldParts, c.genBegan = nil, map[int]bool{}, time.Now()
	c.mu.Unlock()
	for {
		gen, err := c.generation(fetchCtx)
		if err != nil {
			return
		}
		select {
		case c.hold <- struct{}{}:
		case <-gen.Done():
			if fetchCtx.Err() != nil {
				return
			}
			continue // the generation ended while the hold was full
		}
		m, err := c.reader.FetchMessage(gen)
		if err == nil && gen.Err() != nil {
			// Fetched as the generation ended: the message belongs to the old one.
			err = gen.Err()
		}
		if err != nil {
			<-c.hold
			if fetchCtx.Err() != nil {
				return
			}
			if gen.Err() != nil {
				continue // the next generation reads it again if this worker still holds its partition
			}
			c.g.log.Warn("fetch failed", "topic", c.topic, "err", err)
			select {
			case <-fetchCtx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		c.g.view.sawPartition(c.topic, m.Partition)
		c.keepPreviousHoldersPace(m)
		c.take(workCtx, gen, m)
	}
}

// take decodes a message fetched in generation gen (its envelope, once) and admits it: into its lane, or
// held (hold.go). The fetch's hold slot is taken.
func (c *consumer) take(workCtx, gen context.Context, m kafka.Message) {
	f := &fetched{msg: m, ticket: c.tracker.add(m), gen: gen}
	f.env, f.envErr = queue.ParseEnvelope(m.Value)
	f.tenant = tenantLabel(f.env, f.envErr)
	f.bot, f.chat = keyOf(m.Key)
	tenantBacklog.WithLabelValues(f.tenant, c.prio.String()).Inc()
	c.admit(workCtx, f)
}

// keepPreviousHoldersPace holds a chat whose message comes from a partition this worker did not hold in
// the previous generation until the per-chat interval after this generation began: the partition's
// previous holder may have sent to the chat until its generation ended, which was before this one began.
// (An attempt still in flight there is waited for by the claim; this covers the sends that had finished.)
// It costs at most one interval, once, for the first message to each chat after a rebalance.
func (c *consumer) keepPreviousHoldersPace(m kafka.Message) {
	c.mu.Lock()
	c.heldParts[m.Partition] = true
	fresh := !c.prevParts[m.Partition]
	until := c.genBegan.Add(c.g.opts.PerChatInterval)
	c.mu.Unlock()
	if !fresh || !time.Now().Before(until) {
		return
	}
	if bot, chat := keyOf(m.Key); chat != 0 {
		c.g.opts.Paces.NotBefore(bot, chat, until)
	}
}

// activeLanes is how many keys have messages fetched and not finished: chats with work (rate.Lease).
func (c *consumer) activeLanes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queues)
}

// commitLoop commits finished offsets at once and then every interval until ctx ends.
func (c *consumer) commitLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.commitOffsets(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// commitOffsets commits finished offsets, logging a failure (the next round tries again).
func (c *consumer) commitOffsets(ctx context.Context) {
	if err := c.commit(ctx); err != nil && ctx.Err() == nil {
		c.g.log.Warn("commit failed", "topic", c.topic, "err", err)
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

// tenantLabel is the metric label of a message's tenant: its id (capped, see internal/metriclabel), "system"
// for a system message of no tenant, or "" when the envelope does not parse (err; the sender drops it).
func tenantLabel(env queue.Envelope, err error) string {
	switch {
	case err != nil:
		return ""
	case env.TenantID == "":
		return "system"
	}
	return metriclabel.Tenants.Of(env.TenantID)
}
