package delivery

// The consumer: one kafka-go group reader per priority topic, fetching while a buffer slot is free (far
// ahead of what is being sent, so that tenants can be served in turn), handing each message to the lane of
// its key, and committing finished offsets (offsets.go).

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/labels"
	"github.com/heraldhq/herald/internal/queue"
)

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
		CommitInterval:    0, // synchronous: commitOffsets batches
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

// fetchLoop fetches while there is a free buffer slot, so a full worker stops fetching rather than holding
// more than Options.Buffer messages.
func (c *consumer) fetchLoop(fetchCtx, workCtx context.Context) {
	for {
		if err := c.w.buffered.acquire(fetchCtx, c.prio); err != nil {
			return
		}
		m, err := c.reader.FetchMessage(fetchCtx)
		if err != nil {
			c.w.buffered.release(c.prio)
			if fetchCtx.Err() != nil {
				return
			}
			c.w.log.Warn("fetch failed", "topic", c.topic, "err", err)
			_ = sleepUntil(fetchCtx, time.Now().Add(time.Second))
			continue
		}
		c.w.share.sawPartition(c.topic, m.Partition)
		f := c.tracker.add(m)
		f.tenant = tenantLabel(m.Value)
		tenantBacklog.WithLabelValues(f.tenant, c.prio.String()).Inc()
		c.dispatch(fetchCtx, workCtx, f)
	}
}

// dispatch queues f behind earlier messages of its key, starting a lane when the key has none.
func (c *consumer) dispatch(startCtx, workCtx context.Context, f *fetched) {
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
	c.lanes.Go(func() { c.lane(startCtx, workCtx, key) })
}

// commitOffsets commits finished offsets; it runs every CommitInterval.
func (c *consumer) commitOffsets(ctx context.Context) {
	if err := c.commit(ctx); err != nil && ctx.Err() == nil {
		c.w.log.Warn("commit failed", "topic", c.topic, "err", err)
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

// tenantLabel is the metric label of a message's tenant: its id (capped, see internal/labels), "system"
// for a system message of no tenant, or "" when the envelope does not parse (handle drops it).
func tenantLabel(value []byte) string {
	env, err := queue.ParseEnvelope(value)
	switch {
	case err != nil:
		return ""
	case env.TenantID == "":
		return "system"
	}
	return labels.Tenants.Of(env.TenantID)
}
