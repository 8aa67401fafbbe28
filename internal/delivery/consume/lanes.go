package consume

// Lanes: one key's messages (one chat of one bot) go one at a time, in fetch order; different keys go in
// parallel.

import (
	"context"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/notification"
)

// Lane is what a lane carries from one message to the next, for its Handler.
type Lane struct {
	// Bot is the bot of the lane's key (notification.ParseChatKey; the shared bot for a key that names
	// none): its messages wait for that bot's pace.
	Bot notification.BotID
	// Chat is where the lane's last message went (0: not known yet): its next message waits for that
	// chat's interval before it asks for a turn, so that waiting holds no in-flight slot and no share of
	// the global rate.
	Chat int64
	// Handover is when another worker last acted on the chat, as far as this lane saw (the sender's
	// claim): the lane's next send keeps the per-chat interval from it.
	Handover time.Time
}

// laneKey is the lane of a message: its partition and its Kafka key (a message without a key has a lane
// of its own).
func laneKey(f *fetched) string {
	key := strconv.Itoa(f.msg.Partition) + "/" + string(f.msg.Key)
	if len(f.msg.Key) == 0 {
		key += "#" + strconv.FormatInt(f.msg.Offset, 10)
	}
	return key
}

// dispatchLocked queues f behind earlier messages of its key (laneKey(f)), starting a lane when the key
// has none. f holds a buffer slot. c.mu is held.
func (c *consumer) dispatchLocked(workCtx context.Context, key string, b *botWork, f *fetched) {
	b.active++
	q, running := c.queues[key]
	c.queues[key] = append(q, f)
	if running {
		return
	}
	b.lanes++
	c.lanes.Go(func() { c.lane(workCtx, key, Lane{Bot: f.bot, Chat: f.chat}) })
}

// lane delivers the messages of one key in order until its queue is empty. A message starts only while the
// generation it was fetched in is live (consumer.go, Generations); that ends at a rebalance and when the
// worker stops fetching (shutdown): from then on the message does not start — one waiting for its chat or
// its turn gives up — while a delivery already in flight finishes under workCtx (which ends after the
// grace period). A message that did not start stays uncommitted, and the partition's next owner reads it
// again.
func (c *consumer) lane(workCtx context.Context, key string, lane Lane) {
	for {
		c.mu.Lock()
		q := c.queues[key]
		if len(q) == 0 {
			delete(c.queues, key)
			b := c.bots[lane.Bot]
			b.lanes--
			c.forgetIdleLocked(lane.Bot, b)
			c.mu.Unlock()
			return
		}
		f := q[0]
		c.mu.Unlock()

		m := Message{Message: f.msg, Priority: c.prio, Envelope: f.env, EnvelopeErr: f.envErr, Bot: f.bot}
		if f.gen.Err() == nil && c.g.opts.Handler.Handle(f.gen, workCtx, m, &lane) {
			c.tracker.done(f.ticket)
		}
		tenantBacklog.WithLabelValues(f.tenant, c.prio.String()).Dec()

		c.mu.Lock()
		c.queues[key][0] = nil
		c.queues[key] = c.queues[key][1:]
		b := c.bots[lane.Bot]
		b.active--
		if hk := b.held[key]; hk != nil {
			c.readyLocked(key, b, hk) // room in the lane for the key's next message held
		}
		c.mu.Unlock()
		c.g.buffered.Release(c.prio)
		c.g.promote() // a slot is free: a held message may take it
	}
}

// keyOf is the bot and the chat a message's key names (notification.ChatKey); the shared bot and chat 0
// for any other key.
func keyOf(key []byte) (notification.BotID, int64) {
	bot, chat, ok := notification.ParseChatKey(string(key))
	if !ok {
		return notification.SharedBot, 0
	}
	return bot, chat
}
