package consume

// Holding. A worker reads far ahead (Options.Buffer messages in lanes, slots.go) so that tenants can be
// served in turn. Were those messages one bot's backlog — which drains at that bot's rate, or not at all
// while the platform throttles it — the buffer would stay full, the worker would stop fetching, and a
// fresh message of another bot, behind the backlog in its partition, would wait for the backlog to drain.
// So a bot may have at most its share of the buffer in lanes: the buffer divided among the bots with
// messages here, plus one share kept for a bot that has none yet (shareLocked). And a lane — one chat —
// has at most laneDepth messages in it: a chat sends one message per interval, one at a time, so a deeper
// lane sends no sooner and only takes share from the bot's other chats. A bot's messages past its share or
// past their lane's depth are held in a compact form — ids, offset and time, about a hundred bytes, no
// goroutine — per key, and enter the lanes as room frees: as the bot's lanes drain, the keys with room in
// the order they got it, the bots with messages held taking turns (promote). Fetching stops only when
// Options.Hold messages are held.
//
// Why per key: a fetch brings a partition's messages in a run, a chat's several of them, and the share
// filled in fetch order held all of some chats' messages while others had none in lanes: of a paid bot's
// 1,000 chats at a second each, 100–250 sent nothing in a given second of the drain, until the buffer
// (HERALD_WORKER_BUFFER) held its whole backlog (issue 43, docs/benchmarks.md).
//
// Order: all of a key's messages are of one bot; once a key has messages held, its newer ones are held
// behind them, and they enter its lane oldest first, so each key's messages still go in fetch order.
// Offsets: a held message is fetched and not finished, so the offsets committed stay below it. A held
// message belongs to its generation like any other: when the generation ends, the held are dropped.

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
)

// fetched is one message in a lane, between fetch and completion.
type fetched struct {
	msg    kafka.Message
	ticket ticket         // its mark in the offset tracker
	env    queue.Envelope // its value, decoded at fetch
	envErr error          // why the value is not an envelope
	tenant string         // the metric label of its tenant
	bot    notification.BotID
	chat   int64           // from its key; 0 for a key that is not a chat's
	gen    context.Context // the group generation it was fetched in (consumer.go)
}

// laneDepth is how many messages a lane takes while its key has more held: the one being delivered and
// the next, so that the lane goes on to it at once (keeping its chat's pace, Lane.Chat) while the one after
// is promoted.
const laneDepth = 2

// botWork is what a consumer holds of one bot's messages.
type botWork struct {
	active int                 // messages in lanes
	lanes  int                 // keys with messages in lanes: the bot's chats with work (rate.Lease's demand)
	held   map[string]*heldKey // messages held, per lane key (laneKey)
	heldN  int                 // messages held, all keys
	// ready are the keys with messages held and room in their lane (fewer than laneDepth), in the order
	// they got it: the next to promote.
	ready  []string
	ringed bool // in the consumer's ring of bots with messages held
}

// heldKey is one key's messages held, oldest first.
type heldKey struct {
	msgs  []heldMsg
	ready bool // in its bot's ready list
}

// heldMsg is a held message in its compact form: what a lane needs to deliver it (its trace headers
// aside: a held message's delivery starts a trace of its own).
type heldMsg struct {
	ticket    ticket
	offset    int64
	time      int64 // the message's timestamp, Unix nanoseconds
	chat      int64
	id        uuid.UUID
	tenant    string // interned: one string per tenant, however many of its messages are held
	gen       context.Context
	partition int32
	// full is the message itself when it has no compact form (a key that is not a chat's, an envelope
	// that does not parse): rare.
	full *fetched
}

// tenantLabel is the metric label of the held message's tenant (fetched.tenant).
func (h heldMsg) tenantLabel() string {
	if h.full != nil {
		return h.full.tenant
	}
	return tenantLabel(queue.Envelope{TenantID: h.tenant}, nil)
}

// holdLocked keeps f compactly behind its key's earlier messages. c.mu is held.
func (c *consumer) holdLocked(key string, b *botWork, f *fetched) {
	h := heldMsg{ticket: f.ticket, offset: f.msg.Offset, time: f.msg.Time.UnixNano(), chat: f.chat,
		tenant: c.intern(f.env.TenantID), gen: f.gen, partition: int32(f.msg.Partition)}
	id, err := uuid.Parse(f.env.TrackingID)
	if f.envErr != nil || f.chat == 0 || err != nil || id.String() != f.env.TrackingID {
		h.full = f
	} else {
		h.id = id
	}
	hk := b.held[key]
	if hk == nil {
		if b.held == nil {
			b.held = map[string]*heldKey{}
		}
		hk = &heldKey{}
		b.held[key] = hk
	}
	hk.msgs = append(hk.msgs, h)
	b.heldN++
	c.readyLocked(key, b, hk)
	if !b.ringed {
		b.ringed = true
		c.ring = append(c.ring, f.bot)
	}
	heldGauge.WithLabelValues(c.prio.String()).Inc()
}

// readyLocked puts the key in its bot's ready list if it has messages held and room in its lane and is not
// there yet. c.mu is held.
func (c *consumer) readyLocked(key string, b *botWork, hk *heldKey) {
	if !hk.ready && len(hk.msgs) > 0 && len(c.queues[key]) < laneDepth {
		hk.ready = true
		b.ready = append(b.ready, key)
	}
}

// expand is h as a lane takes it.
func (c *consumer) expand(h heldMsg, bot notification.BotID) *fetched {
	if h.full != nil {
		return h.full
	}
	env := queue.Envelope{V: queue.EnvelopeVersion, TrackingID: h.id.String(), TenantID: h.tenant}
	return &fetched{
		msg: kafka.Message{Topic: c.topic, Partition: int(h.partition), Offset: h.offset,
			Key: []byte(notification.ChatKey(bot, h.chat)), Time: time.Unix(0, h.time)},
		ticket: h.ticket, env: env, tenant: tenantLabel(env, nil), bot: bot, chat: h.chat, gen: h.gen,
	}
}

// intern returns one copy of a tenant id for all the held messages of that tenant.
func (c *consumer) intern(s string) string {
	if v, ok := c.tenants[s]; ok {
		return v
	}
	if len(c.tenants) >= 10000 {
		clear(c.tenants) // tenants are few; this bounds the map if they are not
	}
	c.tenants[s] = s
	return s
}

// botLocked returns the bot's work, made when it has none. c.mu is held.
func (c *consumer) botLocked(bot notification.BotID) *botWork {
	b := c.bots[bot]
	if b == nil {
		b = &botWork{}
		c.bots[bot] = b
	}
	return b
}

// forgetIdleLocked forgets the work of a bot with nothing here any more, so that it no longer counts
// among the bots sharing the buffer. c.mu is held.
func (c *consumer) forgetIdleLocked(bot notification.BotID, b *botWork) {
	if b.active == 0 && b.lanes == 0 && b.heldN == 0 && !b.ringed {
		delete(c.bots, bot)
	}
}

// shareLocked is how many messages one bot may have in lanes: the consumer's part of the buffer divided
// among the bots with messages here, plus one share kept for a bot that has none yet, so that its first
// message enters a lane at once even while the others' backlogs fill their shares. c.mu is held.
func (c *consumer) shareLocked() int {
	return max(1, c.capacity/(len(c.bots)+1))
}

// admit puts a fetched message in its lane when there is room (no message of its key held, fewer than
// laneDepth in the lane, its bot below its share in lanes, a free buffer slot), else holds it. It gives
// back the fetch's hold slot unless the message is held.
func (c *consumer) admit(workCtx context.Context, f *fetched) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.botLocked(f.bot)
	key := laneKey(f)
	share := c.shareLocked()
	if b.held[key] == nil && len(c.queues[key]) < laneDepth && b.active < share && c.g.buffered.TryAcquire(c.prio) {
		<-c.hold
		c.dispatchLocked(workCtx, key, b, f)
		return
	}
	c.holdLocked(key, b, f)
	if b.active < share {
		c.g.promote() // held behind its bot's earlier ones, which may go in as soon as a slot is free
	}
}

// promoteLoop moves held messages into lanes as buffer slots free up, until fetchCtx ends: then the held
// do not start (they are not committed; the partition's next owner reads them again).
func (c *consumer) promoteLoop(fetchCtx, workCtx context.Context) {
	for {
		select {
		case <-fetchCtx.Done():
			return
		case <-c.promoteWake:
		}
		c.promote(workCtx)
	}
}

// promote moves held messages into lanes while buffer slots are free. A bot with nothing in lanes goes
// first: it cannot send at all until it has a message there (the share kept for a bot that has none yet,
// shareLocked, is not enough when the bots that came first took larger shares while few bots were known,
// and the buffer is full). Then the bots below their share take turns, one message each, from where the
// last call stopped: a slot frees one at a time, and were each call to start from the ring's beginning,
// its first bots would take every slot until they reached their shares, and the last bot to come would
// wait for all of them (seconds, behind the bursts of 50 bots: docs/benchmarks.md, Bots). A bot whose
// keys held all have full lanes passes its turn.
func (c *consumer) promote(workCtx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pruneRingLocked()
	for _, bot := range c.ring {
		if b := c.bots[bot]; b.active == 0 && b.heldN > 0 {
			if _, full := c.promoteOneLocked(workCtx, bot, b); full {
				return
			}
		}
	}
	for idle := 0; idle < len(c.ring); {
		c.turn %= len(c.ring)
		bot := c.ring[c.turn]
		b := c.bots[bot]
		if b.heldN == 0 || b.active >= c.shareLocked() {
			c.turn++
			idle++
			continue
		}
		moved, full := c.promoteOneLocked(workCtx, bot, b)
		if full {
			return // the bot keeps its turn for the next free slot
		}
		c.turn++
		if moved {
			idle = 0
		} else {
			idle++
		}
	}
}

// promoteOneLocked moves the oldest held message of the bot's next ready key into its lane. It reports
// whether it moved one, and full when it did not for want of a buffer slot (else: none of the bot's keys
// held has room in its lane). c.mu is held.
func (c *consumer) promoteOneLocked(workCtx context.Context, bot notification.BotID, b *botWork) (moved, full bool) {
	for len(b.ready) > 0 {
		key := b.ready[0]
		hk := b.held[key]
		if hk == nil || len(c.queues[key]) >= laneDepth {
			// Not ready after all (defensive: a key leaves the list when promoted, and its lane fills only
			// by promotion while it has messages held); the lane's next pop puts it back.
			b.ready = b.ready[1:]
			if hk != nil {
				hk.ready = false
			}
			continue
		}
		if !c.g.buffered.TryAcquire(c.prio) {
			return false, true
		}
		b.ready[0] = ""
		b.ready = b.ready[1:]
		hk.ready = false
		h := hk.msgs[0]
		hk.msgs[0] = heldMsg{}
		hk.msgs = hk.msgs[1:]
		b.heldN--
		if len(hk.msgs) == 0 {
			delete(b.held, key)
		}
		<-c.hold
		heldGauge.WithLabelValues(c.prio.String()).Dec()
		c.dispatchLocked(workCtx, key, b, c.expand(h, bot))
		c.readyLocked(key, b, hk) // its lane may take one more: behind the keys that were ready before it
		return true, false
	}
	return false, false
}

// pruneRingLocked takes the bots with nothing held any more out of the ring, keeping the turn on the bot
// that was next. c.mu is held.
func (c *consumer) pruneRingLocked() {
	kept := c.ring[:0]
	for i, bot := range c.ring {
		b := c.bots[bot]
		if b.heldN > 0 {
			kept = append(kept, bot)
			continue
		}
		if i < c.turn {
			c.turn--
		}
		b.ringed = false
		c.forgetIdleLocked(bot, b)
	}
	clear(c.ring[len(kept):])
	c.ring = kept
}

// dropHeldLocked drops every held message: their generation ended (consumer.go, endGeneration). c.mu is
// held.
func (c *consumer) dropHeldLocked() {
	for bot, b := range c.bots {
		for _, hk := range b.held {
			for _, h := range hk.msgs {
				<-c.hold
				heldGauge.WithLabelValues(c.prio.String()).Dec()
				tenantBacklog.WithLabelValues(h.tenantLabel(), c.prio.String()).Dec()
			}
		}
		b.held, b.heldN, b.ready, b.ringed = nil, 0, nil, false
		c.forgetIdleLocked(bot, b)
	}
	c.ring, c.turn = c.ring[:0], 0
}

// backlogAges adds, per bot, the timestamp of the oldest message this consumer holds (in lanes or held)
// to oldest when it is older.
func (c *consumer) backlogAges(oldest map[notification.BotID]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	older := func(bot notification.BotID, t time.Time) {
		if o, ok := oldest[bot]; !ok || t.Before(o) {
			oldest[bot] = t
		}
	}
	for _, q := range c.queues {
		for _, f := range q {
			older(f.bot, f.msg.Time)
		}
	}
	for bot, b := range c.bots {
		for _, hk := range b.held {
			if len(hk.msgs) > 0 {
				older(bot, time.Unix(0, hk.msgs[0].time)) // a key's oldest held is its first
			}
		}
	}
}

// lanesOf is how many keys of bot have messages in lanes.
func (c *consumer) lanesOf(bot notification.BotID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.bots[bot]; b != nil {
		return b.lanes
	}
	return 0
}

// heldCount is how many messages this consumer holds.
func (c *consumer) heldCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.bots {
		n += b.heldN
	}
	return n
}
