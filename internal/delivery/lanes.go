package delivery

// Lanes: one key's messages (one tenant user, or one chat) go one at a time, in fetch order; different keys
// go in parallel.

import (
	"context"
	"time"
)

// laneState is what a lane carries from one message to the next.
type laneState struct {
	// chat is where the lane's last message went (0: not known yet): its next message waits for that
	// chat's interval before it asks for a turn, so that waiting holds no in-flight slot and no share of
	// the global rate.
	chat int64
	// handover is when another worker last acted on the chat, as far as this lane saw (see claim): the
	// lane's next send keeps the per-chat interval from it.
	handover time.Time
}

// lane delivers the messages of one key in order until its queue is empty. startCtx ends when the worker
// stops fetching (shutdown): from then on no message starts — one waiting for its chat or its turn gives
// up — while a delivery already in flight finishes under workCtx (which ends after the grace period). A
// message that did not start stays uncommitted, and the partition's next owner reads it again.
func (c *consumer) lane(startCtx, workCtx context.Context, key string) {
	var ls laneState
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

		if startCtx.Err() == nil && c.w.handle(startCtx, workCtx, c.prio, f.msg, &ls) {
			c.tracker.done(f)
		}
		c.w.buffered.release(c.prio)
		tenantBacklog.WithLabelValues(f.tenant, c.prio.String()).Dec()

		c.mu.Lock()
		c.queues[key] = c.queues[key][1:]
		c.mu.Unlock()
	}
}
