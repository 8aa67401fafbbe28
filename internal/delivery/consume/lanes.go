package consume

// Lanes: one key's messages (one tenant user, or one chat) go one at a time, in fetch order; different keys
// go in parallel.

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Lane is what a lane carries from one message to the next, for its Handler.
type Lane struct {
	// Chat is where the lane's last message went (0: not known yet): its next message waits for that
	// chat's interval before it asks for a turn, so that waiting holds no in-flight slot and no share of
	// the global rate.
	Chat int64
	// Handover is when another worker last acted on the chat, as far as this lane saw (the sender's
	// claim): the lane's next send keeps the per-chat interval from it.
	Handover time.Time
}

// lane delivers the messages of one key in order until its queue is empty. A message starts only while the
// generation it was fetched in is live (consumer.go, Generations); that ends at a rebalance and when the
// worker stops fetching (shutdown): from then on the message does not start — one waiting for its chat or
// its turn gives up — while a delivery already in flight finishes under workCtx (which ends after the
// grace period). A message that did not start stays uncommitted, and the partition's next owner reads it
// again.
func (c *consumer) lane(workCtx context.Context, key string) {
	lane := Lane{Chat: chatOfKey(key)}
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

		m := Message{Message: f.msg, Priority: c.prio, Envelope: f.env, EnvelopeErr: f.envErr}
		if f.gen.Err() == nil && c.g.opts.Handler.Handle(f.gen, workCtx, m, &lane) {
			c.tracker.done(f)
		}
		c.g.buffered.Release(c.prio)
		tenantBacklog.WithLabelValues(f.tenant, c.prio.String()).Dec()

		c.mu.Lock()
		c.queues[key] = c.queues[key][1:]
		c.mu.Unlock()
	}
}

// chatOfKey is the chat of a lane's key ("<partition>/chat/<id>", queue.NewOutgoing), 0 for other keys.
func chatOfKey(key string) int64 {
	_, rest, _ := strings.Cut(key, "/")
	id, ok := strings.CutPrefix(rest, "chat/")
	if !ok {
		return 0
	}
	chat, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0
	}
	return chat
}
