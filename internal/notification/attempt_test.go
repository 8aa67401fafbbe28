package notification

import (
	"encoding/json"
	"testing"
	"time"
)

// The wait doubles from Base, stops at Max, and the jitter spreads it by at most ±Jitter.
func TestTheBackoffDoublesUpToItsMaximum(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Minute}
	for attempt, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 1000: time.Minute} {
		if got := b.Delay(attempt); got != want {
			t.Errorf("delay after attempt %d: %s, want %s", attempt, got, want)
		}
	}
	if got := (Backoff{Base: time.Hour, Max: time.Minute}).Delay(1); got != time.Minute {
		t.Errorf("a base above the cap waits %s, want the cap", got)
	}
	b.Jitter = 0.2
	for range 200 {
		if got := b.Delay(2); got < 1600*time.Millisecond || got > 2400*time.Millisecond {
			t.Fatalf("jittered delay %s, want 2 s ± 20 %%", got)
		}
	}
}

// A chat's key names the bot and the chat, and nothing else reads as one. The shared bot's keys are the keys
// every envelope had before bots existed.
func TestChatKeys(t *testing.T) {
	for _, bot := range []BotID{SharedBot, 7, 9007199254740993} {
		for _, chat := range []int64{1, -1001234567890, 0} {
			if gotBot, got, ok := ParseChatKey(ChatKey(bot, chat)); !ok || got != chat || gotBot != bot {
				t.Errorf("ParseChatKey(ChatKey(%d, %d)) = %d, %d, %v", bot, chat, gotBot, got, ok)
			}
		}
	}
	if ChatKey(SharedBot, 42) != "chat/42" {
		t.Errorf("ChatKey(SharedBot, 42) = %q, want chat/42 (the key of every envelope already on Kafka)", ChatKey(SharedBot, 42))
	}
	if ChatKey(7, 42) != "bot/7/chat/42" {
		t.Errorf("ChatKey(7, 42) = %q, want bot/7/chat/42", ChatKey(7, 42))
	}
	if ChatKey(7, 42) == ChatKey(8, 42) || ChatKey(7, 42) == ChatKey(SharedBot, 42) {
		t.Error("one user's chats with two bots share a key")
	}
	for _, key := range []string{"acme/u1", "chat/", "chat/x", "chat/1/2", "Chat/1", "", "bot/7", "bot/7/", "bot/7/chat/",
		"bot/0/chat/1", "bot/-7/chat/1", "bot/07/chat/1", "bot/x/chat/1", "bot//chat/1", "bot/7/chat/1/2", "bot/7/bot/8/chat/1"} {
		if bot, chat, ok := ParseChatKey(key); ok {
			t.Errorf("ParseChatKey(%q) = %d, %d, want no chat", key, bot, chat)
		}
	}
}

// The resource renders every timestamp in UTC to the millisecond, absent ones as null, and metadata as {}
// when there is none.
func TestTheResource(t *testing.T) {
	created := time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.FixedZone("x", 3600))
	b, err := json.Marshal(View{TrackingID: "t", UserID: "u", Priority: 5, Status: Queued, CreatedAt: created, UpdatedAt: created}.Resource())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tracking_id":"t","user_id":"u","priority":5,"status":"queued","attempts":0,` +
		`"created_at":"2026-01-02T14:04:05.123Z","updated_at":"2026-01-02T14:04:05.123Z","messenger_message_id":null,` +
		`"last_error_code":0,"last_error_message":null,"metadata":{},"send_at":null,"expires_at":null,"delivered_at":null,"next_attempt_at":null,"category":null,"format":"text","template":null,"replace_key":null,"delivered_as":null,"message_deleted_at":null,` +
		`"digest_key":null,"digest_size":null}`
	if string(b) != want {
		t.Errorf("resource\n%s\nwant\n%s", b, want)
	}
}

// The category a send named is in the resource; none is null.
func TestTheResourceNamesTheCategory(t *testing.T) {
	promo := "promo"
	b, err := json.Marshal(View{TrackingID: "t", Status: Queued, Category: &promo}.Resource())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["category"] != "promo" {
		t.Errorf("resource %s, want category promo", b)
	}
}

// A claim that found the user's link blocked, or an opt-out covering the notification, ends it blocked
// without a call, with the lifecycle's own code and message; one that found neither is sent.
func TestAClaimStoppedByABlockOrAnOptOut(t *testing.T) {
	cases := []struct {
		name string
		d    Delivery
		want DeliveryResult
		stop bool
	}{
		{"neither", Delivery{Kind: KindTenant, ChatID: 1}, DeliveryResult{}, false},
		{"the link is blocked", Delivery{Kind: KindTenant, ChatID: 1, Blocked: true},
			DeliveryResult{Status: Blocked, ErrorCode: CodeBlocked, ErrorMessage: BlockedMessage}, true},
		{"an opt-out covers it", Delivery{Kind: KindTenant, ChatID: 1, OptedOut: true},
			DeliveryResult{Status: Blocked, ErrorCode: CodeOptedOut, ErrorMessage: OptedOutMessage}, true},
		{"both: the opt-out says more", Delivery{Kind: KindTenant, ChatID: 1, Blocked: true, OptedOut: true},
			DeliveryResult{Status: Blocked, ErrorCode: CodeOptedOut, ErrorMessage: OptedOutMessage}, true},
	}
	for _, c := range cases {
		got, stop := c.d.Stopped()
		if stop != c.stop || got != c.want {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, stop, c.want, c.stop)
		}
	}
	if Block.To() != Blocked || OptOut.To() != Blocked {
		t.Error("a block and an opt-out end a notification blocked")
	}
	if OptedOutMessage != "opted out" {
		t.Errorf("the opt-out's message %q, the contract's is \"opted out\"", OptedOutMessage)
	}
	seen := map[int]bool{}
	for _, code := range []int{CodeNoLink, CodeRelinked, CodeBotTokenRefused, CodeBotChanged, CodeBlocked, CodeOptedOut} {
		if seen[code] {
			t.Errorf("gateway code %d used twice", code)
		}
		seen[code] = true
	}
}
