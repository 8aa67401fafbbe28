package delivery

// Lanes: one key's messages (one tenant user, or one chat) go one at a time, in fetch order; different keys
// go in parallel.

import (
	"context"
	"time"
)

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
