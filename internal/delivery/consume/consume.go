// Package consume is the worker's side of Kafka: it reads the two priority topics as a member of the
// workers' consumer group and hands each message to a Handler in lanes — one key's messages (one chat's)
// one at a time, in fetch order; different keys in parallel. Group is the entry point. Behind it: the
// readers and the group's generations (consumer.go), what the worker knows of the group (group.go), the
// lanes (lanes.go), the offsets that may be committed (offsets.go), the assignment that gives one worker
// both topics' partition n (balancer.go), the bound on what is fetched ahead (slots.go), and each bot's
// share of it, past which a bot's messages are held compactly (hold.go).
package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
)

// Handler delivers the notification of one message, in its lane's turn, and reports whether the message
// is settled (its offset may be committed). start ends when the message may no longer start (its
// generation ended, or the worker stops fetching); work when the delivery itself must stop. lane is what
// the lane carries from one of its messages to the next.
type Handler interface {
	Handle(start, work context.Context, m Message, lane *Lane) bool
}

// Message is one fetched message and what the consumer read of it.
type Message struct {
	kafka.Message
	Priority rate.Priority // its topic's
	// Envelope is the message's value, decoded once, at fetch (queue.ParseEnvelope); EnvelopeErr says why
	// it is not an envelope.
	Envelope    queue.Envelope
	EnvelopeErr error
	// Bot is the bot its key names (notification.ParseChatKey), the shared bot for a key that names none.
	Bot notification.BotID
}

// Options configure a Group. Every field is required.
type Options struct {
	Brokers []string
	GroupID string
	// ClientID names this worker's members in the group, which is how it finds its partitions (group.go).
	ClientID string
	Topics   queue.Topics
	// Buffer bounds the messages in lanes (slots.go); Hold bounds, per topic, the messages held past their
	// bot's share of it (hold.go): fetching stops when that many are held. Concurrency is the deliveries in
	// flight, which each reader's queue covers.
	Buffer, Hold, Concurrency int
	SessionTimeout            time.Duration // Kafka group session
	HeartbeatInterval         time.Duration // a rebalance waits for every member's next heartbeat
	AssignmentInterval        time.Duration // how often the partitions held are re-read besides rebalances
	CommitInterval            time.Duration // how often finished offsets are committed
	// Paces and PerChatInterval are the bots' per-chat pace, which a partition's new holder keeps from its
	// previous holder's sends (consumer.go, keepPreviousHoldersPace).
	Paces           *rate.Paces
	PerChatInterval time.Duration
	Handler         Handler
	Logger          *slog.Logger
}

// Group is this worker's part in the consumer group: a reader per priority topic, their lanes, and its
// view of the group. Build it with New; the worker's Run calls Join, then Watch and Fetch, and once
// fetching has stopped, WaitLanes and Leave.
type Group struct {
	opts Options
	log  *slog.Logger
	view *groupView
	// buffered bounds the messages in lanes (slots.go).
	buffered *Slots
	readers  []*consumer
}

// New builds a group member that has not joined yet.
func New(opts Options) *Group {
	g := &Group{opts: opts, log: opts.Logger, buffered: NewSlots(opts.Buffer, bufferedGauge)}
	g.view = newGroupView(g)
	return g
}

// Join starts a reader per priority topic: from then on the worker is a member of the group.
func (g *Group) Join() {
	for _, p := range []rate.Priority{rate.High, rate.Normal} {
		g.readers = append(g.readers, g.newConsumer(p))
	}
}

// Watch keeps the view of the group up to date and commits finished offsets every CommitInterval, until
// ctx ends.
func (g *Group) Watch(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { g.view.run(ctx) })
	for _, c := range g.readers {
		wg.Go(func() { c.commitLoop(ctx, g.opts.CommitInterval) })
	}
	wg.Wait()
}

// Fetch fetches and dispatches messages to their lanes until fetchCtx ends; deliveries run under workCtx
// (consumer.go, fetchLoop).
func (g *Group) Fetch(fetchCtx, workCtx context.Context) {
	var wg sync.WaitGroup
	for _, c := range g.readers {
		wg.Go(func() { c.fetchLoop(fetchCtx, workCtx) })
	}
	wg.Wait()
}

// WaitLanes returns once every lane has run out of messages: each one fetched was handled or dropped.
func (g *Group) WaitLanes() {
	for _, c := range g.readers {
		c.lanes.Wait()
	}
}

// Leave commits the finished offsets (unless commit is false: a dead worker commits nothing) and closes
// the readers, which leave the group.
func (g *Group) Leave(commit bool) error {
	var errs []error
	for _, c := range g.readers {
		if commit {
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
	return errors.Join(errs...)
}

// ActiveLanes is how many keys have messages fetched and not finished: chats with work.
func (g *Group) ActiveLanes() int {
	n := 0
	for _, c := range g.readers {
		n += c.activeLanes()
	}
	return n
}

// Lanes is how many keys of bot have messages in lanes: the bot's chats with work (rate.Lease's demand).
func (g *Group) Lanes(bot notification.BotID) int {
	n := 0
	for _, c := range g.readers {
		n += c.lanesOf(bot)
	}
	return n
}

// BacklogAges is, per bot with messages here, how long ago the oldest of them was published (by its
// Kafka timestamp): in lanes or held.
func (g *Group) BacklogAges() map[notification.BotID]time.Duration {
	oldest := map[notification.BotID]time.Time{}
	for _, c := range g.readers {
		c.backlogAges(oldest)
	}
	now := time.Now()
	out := make(map[notification.BotID]time.Duration, len(oldest))
	for bot, t := range oldest {
		out[bot] = max(0, now.Sub(t))
	}
	return out
}

// Held is how many fetched messages are held past their bots' shares of the buffer (hold.go).
func (g *Group) Held() int {
	n := 0
	for _, c := range g.readers {
		n += c.heldCount()
	}
	return n
}

// promote tells every reader that a buffer slot is free: a held message may take it (hold.go). The
// readers share the buffer, so a slot one frees may go to the other.
func (g *Group) promote() {
	for _, c := range g.readers {
		select {
		case c.promoteWake <- struct{}{}:
		default:
		}
	}
}
