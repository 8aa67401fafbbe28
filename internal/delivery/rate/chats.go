package rate

import (
	"context"
	"sync"
	"time"
)

// Chats spaces the bot's sends to one chat by interval, and holds a chat the platform throttled. Each
// Wait reserves a slot, so concurrent deliveries to one chat (one messenger user linked to two tenants)
// queue up rather than arrive together.
type Chats struct {
	interval time.Duration

	mu     sync.Mutex
	next   map[int64]time.Time // earliest next send per chat
	recent []throttled         // recent 429s, to tell a flood from one busy chat
}

type throttled struct {
	chat int64
	at   time.Time
}

// NewChats returns the per-chat pace of one bot: interval between two sends to one chat.
func NewChats(interval time.Duration) *Chats {
	return &Chats{interval: interval, next: map[int64]time.Time{}}
}

// Wait reserves the chat's next slot and sleeps until it.
func (c *Chats) Wait(ctx context.Context, chat int64) error {
	c.mu.Lock()
	now := time.Now()
	t := c.next[chat]
	if t.Before(now) {
		t = now
	}
	c.next[chat] = t.Add(c.interval)
	c.mu.Unlock()
	return sleepUntil(ctx, t)
}

// WaitFree sleeps until lead before the chat's next slot without reserving it: a lane waits for its
// chat's interval before it asks for a turn at the global rate, holding nothing meanwhile, and wakes
// early enough that its turn and its claim are done when the slot comes (Wait then reserves it).
func (c *Chats) WaitFree(ctx context.Context, chat int64, lead time.Duration) error {
	c.mu.Lock()
	t := c.next[chat]
	c.mu.Unlock()
	return sleepUntil(ctx, t.Add(-lead))
}

// NotBefore holds the chat until t (another worker may have sent to it until shortly before).
func (c *Chats) NotBefore(chat int64, t time.Time) {
	c.mu.Lock()
	if t.After(c.next[chat]) {
		c.next[chat] = t
	}
	c.mu.Unlock()
}

// Sent records the moment the request left: the global limiter may have held it past its slot, and the
// next send to the chat must keep its distance from the real one.
func (c *Chats) Sent(chat int64, at time.Time) {
	c.mu.Lock()
	if t := at.Add(c.interval); t.After(c.next[chat]) {
		c.next[chat] = t
	}
	c.mu.Unlock()
}

// floodChats is how many different chats answering 429 within a second make a flood of the whole bot.
// The platform does not say which limit a 429 is for. Two is not enough: a rebalance can briefly have two
// workers pacing the same chats, and each of two chats sent to twice is throttled on its own; a bot over
// its global limit has every send refused, so a third chat follows within the second.
const floodChats = 3

// Throttle holds the chat until now + wait and reports whether 429s on floodChats different chats within
// the last second make this a flood of the whole bot.
func (c *Chats) Throttle(chat int64, wait time.Duration) (flood bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t := now.Add(wait); t.After(c.next[chat]) {
		c.next[chat] = t
	}
	keep := c.recent[:0]
	chats := map[int64]bool{chat: true}
	for _, r := range c.recent {
		if now.Sub(r.at) < time.Second {
			keep = append(keep, r)
			chats[r.chat] = true
		}
	}
	c.recent = append(keep, throttled{chat: chat, at: now})
	return len(chats) >= floodChats
}

// Prune forgets chats whose slot is long past, so the map stays as small as the set of active chats.
func (c *Chats) Prune(before time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for chat, t := range c.next {
		if t.Before(before) {
			delete(c.next, chat)
		}
	}
}
