package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
)

func TestPublishRoutesByPriorityAndKeepsEnvelope(t *testing.T) {
	t.Parallel()
	b := kafkatest.New(t, "qt")
	p := b.Producer(t, "qt")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	byPriority := map[int]queue.Envelope{}
	for _, prio := range []int{0, 6, 7, 9} {
		out := queue.NewOutgoing(time.Now().Format(time.RFC3339Nano), "acme", "u1", 4242, prio)
		byPriority[prio] = out.Envelope
		if err := p.Publish(ctx, out); err != nil {
			t.Fatalf("publish priority %d: %v", prio, err)
		}
	}
	onTopic := func(topic string) map[queue.Envelope]string {
		out := map[queue.Envelope]string{}
		for _, m := range b.Messages(t, topic) {
			env, err := queue.ParseEnvelope(m.Value)
			if err != nil {
				t.Fatalf("envelope on %s does not parse: %v", topic, err)
			}
			out[env] = string(m.Key)
		}
		return out
	}
	high, normal := onTopic("qt.notifications.high"), onTopic("qt.notifications.normal")
	for prio, env := range byPriority {
		want, other := normal, high
		if prio >= 7 {
			want, other = high, normal
		}
		key, ok := want[env]
		if !ok {
			t.Errorf("priority %d: envelope missing from its topic", prio)
		}
		if _, wrong := other[env]; wrong {
			t.Errorf("priority %d: envelope on the wrong topic", prio)
		}
		if ok && key != "chat/4242" {
			t.Errorf("priority %d: key = %q, want chat/4242 (every message is keyed by its chat)", prio, key)
		}
	}
}

func TestTheKeyIsTheChatSoEveryMessageToAChatSharesAPartition(t *testing.T) {
	t.Parallel()
	tenantA := queue.NewOutgoing("1", "acme", "u1", 77, 5)
	tenantB := queue.NewOutgoing("2", "globex", "someone", 77, 9)
	system := queue.NewOutgoing("3", "acme", "", 77, 8)
	if string(tenantA.Key) != string(tenantB.Key) || string(tenantA.Key) != string(system.Key) {
		t.Errorf("keys of three messages to chat 77: %q, %q, %q; want one", tenantA.Key, tenantB.Key, system.Key)
	}
	// A row stored before the chat was recorded on it still keeps its user's messages together.
	if old := queue.NewOutgoing("4", "acme", "u1", 0, 5); string(old.Key) != "acme/u1" {
		t.Errorf("key without a chat: %q, want acme/u1", old.Key)
	}
}

func TestParseEnvelopeRejectsUnknownVersions(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{}`, `{"v":2,"tracking_id":"x"}`, `{"v":1}`, `not json`} {
		if _, err := queue.ParseEnvelope([]byte(raw)); err == nil {
			t.Errorf("ParseEnvelope(%s) accepted an invalid envelope", raw)
		}
	}
}

// A tenant's own bot's messages are keyed by bot and chat: a user's chats with two bots are two chats, and
// the worker reads the bot from the key before it claims (notification.ParseChatKey). The shared bot's keys
// stay those of every envelope published before bots existed.
func TestAnOwnBotsMessagesAreKeyedByBotAndChat(t *testing.T) {
	t.Parallel()
	own := queue.NewOutgoingVia(42, "1", "acme", "u1", 77, 5)
	shared := queue.NewOutgoingVia(notification.SharedBot, "2", "acme", "u1", 77, 5)
	if string(own.Key) != "bot/42/chat/77" || string(shared.Key) != "chat/77" {
		t.Errorf("keys %q and %q, want bot/42/chat/77 and chat/77", own.Key, shared.Key)
	}
	if bot, chat, ok := notification.ParseChatKey(string(own.Key)); !ok || bot != 42 || chat != 77 {
		t.Errorf("ParseChatKey(%q) = %d, %d, %v", own.Key, bot, chat, ok)
	}
}
