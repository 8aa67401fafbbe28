package consume

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
)

// gateHandler reports each message as its delivery starts and holds it there until the test lets it
// finish.
type gateHandler struct {
	started chan Message
	finish  chan struct{}
}

func (h *gateHandler) Handle(start, work context.Context, m Message, lane *Lane) bool {
	h.started <- m
	select {
	case <-h.finish:
	case <-work.Done():
	}
	return true
}

// holdingConsumer is a normal-priority consumer as newConsumer makes it, without its Kafka reader: the test
// hands it messages as its fetch loop would.
func holdingConsumer(t *testing.T, buffer int) (*consumer, *gateHandler, context.Context) {
	t.Helper()
	h := &gateHandler{started: make(chan Message, 4*buffer), finish: make(chan struct{})}
	g := New(Options{Topics: queue.TopicsFor("t"), Buffer: buffer, Hold: 100 * buffer, Handler: h, Logger: slog.New(slog.DiscardHandler)})
	c := g.consumerOf(rate.Normal)
	g.readers = []*consumer{c}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		c.lanes.Wait()
	})
	return c, h, ctx
}

// fetch hands the consumer n messages of bot, each to a chat of its own (a lane of its own), as the fetch
// loop does: a hold slot taken, then take.
func fetch(ctx context.Context, c *consumer, bot notification.BotID, n int, offset *int64) {
	for range n {
		*offset++
		chat := int64(bot)*1000 + *offset
		env := queue.Envelope{V: queue.EnvelopeVersion, TrackingID: uuid.NewString(), TenantID: "acme"}
		m := kafka.Message{Topic: c.topic, Partition: 0, Offset: *offset, Key: []byte(notification.ChatKey(bot, chat)),
			Value: env.Marshal(), Time: time.Now()}
		c.hold <- struct{}{}
		c.take(ctx, ctx, m)
	}
}

// startedBot waits for the next delivery to start and returns its bot.
func startedBot(t *testing.T, h *gateHandler) notification.BotID {
	t.Helper()
	select {
	case m := <-h.started:
		return m.Bot
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery started")
		return 0
	}
}

// When the buffer is full, a freed slot goes first to a bot with nothing in lanes (it cannot send at all
// until it has one there), then to the bots below their share in turn, from where the last slot went:
// not always to the first bot of the ring until it reaches its share. Behind 50 bots' backlogs published
// at once, the old order kept an idle bot's fresh message waiting for seconds (docs/benchmarks.md, Bots).
func TestFreedSlotsGoFirstToABotWithNothingInLanesThenInTurn(t *testing.T) {
	c, h, ctx := holdingConsumer(t, 40) // normal's part: 30
	// The buffer is full but for two slots, of messages that went in before these bots came.
	for range 28 {
		if !c.g.buffered.TryAcquire(rate.Normal) {
			t.Fatal("could not fill the buffer")
		}
	}
	const x, y = notification.BotID(7), notification.BotID(8)
	var offset int64
	fetch(ctx, c, x, 20, &offset) // two go in, the rest are held
	fetch(ctx, c, y, 20, &offset) // all held: no slot
	for range 2 {
		if bot := startedBot(t, h); bot != x {
			t.Fatalf("bot %d started, want bot %d's first two", bot, x)
		}
	}
	if c.heldCount() != 38 {
		t.Fatalf("%d held, want 38", c.heldCount())
	}

	// One slot frees at a time (a message that went in before finishes): who gets it. Both bots are well
	// below their share (30 / 3 = 10).
	var got []notification.BotID
	for range 5 {
		c.g.buffered.Release(rate.Normal)
		c.promote(ctx)
		got = append(got, startedBot(t, h))
	}
	want := []notification.BotID{y, x, y, x, y}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("freed slots went to bots %v, want %v: bot %d, with nothing in lanes, first, then the two in turn", got, want, y)
		}
	}
}

// offsetGate reports each message as its delivery starts and holds it until the test releases its offset.
type offsetGate struct {
	started chan Message
	release map[int64]chan struct{}
}

func (g *offsetGate) Handle(start, work context.Context, m Message, lane *Lane) bool {
	g.started <- m
	select {
	case <-g.release[m.Offset]:
	case <-work.Done():
	}
	return true
}

// A bot's share of the buffer covers its chats, not a few chats' runs of messages: a lane takes at most
// laneDepth messages while its key has more, the rest are held per key and enter the lane in order as it
// drains, and the share goes to the bot's other chats. A fetch brings a partition's messages in a run,
// and with the share filled in fetch order a paid bot's chats sat idle behind others' runs (issue 43).
func TestABotsShareGoesToItsChatsNotToOneChatsRun(t *testing.T) {
	c, _, ctx := holdingConsumer(t, 12) // normal's part: 9; one bot: a share of 9 / 2 = 4
	h := &offsetGate{started: make(chan Message, 16), release: map[int64]chan struct{}{}}
	for o := range int64(9) {
		h.release[o] = make(chan struct{})
	}
	c.g.opts.Handler = h
	go c.promoteLoop(ctx, ctx) // as the consumer runs it: a lane that frees a place wakes it
	const bot = notification.BotID(7)
	const a, b, d = 7001, 7002, 7003
	var offset int64
	for _, chat := range []int64{a, a, a, a, a, a, b, d} {
		offset++
		env := queue.Envelope{V: queue.EnvelopeVersion, TrackingID: uuid.NewString(), TenantID: "acme"}
		c.hold <- struct{}{}
		c.take(ctx, ctx, kafka.Message{Topic: c.topic, Partition: 0, Offset: offset, Key: []byte(notification.ChatKey(bot, chat)),
			Value: env.Marshal(), Time: time.Now()})
	}
	started := func() Message {
		t.Helper()
		select {
		case m := <-h.started:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery started")
			return Message{}
		}
	}
	chats := map[string]bool{}
	for range 3 {
		chats[string(started().Key)] = true
	}
	for _, chat := range []int64{a, b, d} {
		if !chats[notification.ChatKey(bot, chat)] {
			t.Fatalf("deliveries started for %v, want one in each of chats %d, %d and %d", chats, a, b, d)
		}
	}
	if got := c.heldCount(); got != 4 {
		t.Fatalf("%d held, want 4: chat %d's messages past the two in its lane", got, a)
	}
	// Chat a's messages start one at a time, each as the one before it finishes, in their order.
	for o := int64(1); o < 6; o++ {
		close(h.release[o])
		if m := started(); string(m.Key) != notification.ChatKey(bot, a) || m.Offset != o+1 {
			t.Fatalf("started offset %d of %s, want chat %d's offset %d: its messages in order", m.Offset, m.Key, a, o+1)
		}
	}
	if got := c.heldCount(); got != 0 {
		t.Fatalf("%d held after chat %d's messages all started, want 0", got, a)
	}
	for o := int64(6); o < 9; o++ {
		close(h.release[o])
	}
}
