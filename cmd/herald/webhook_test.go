package main

import (
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
)

func TestWebhookSetURLRegistersWithThePlatform(t *testing.T) {
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.Close()
	})
	code, stdout, stderr := herald(t, "webhook", "set-url",
		"--messenger-api-url", srv.URL, "--messenger-bot-token", s.Token(), "--webhook-secret", "abc_DEF-123_ghi-456",
		"https://herald.example.com/messenger/webhook")
	if code != 0 {
		t.Fatalf("set-url: exit %d, stderr %s", code, stderr)
	}
	info := s.WebhookInfo()
	// Blocks and taps too (spec §9).
	if info.URL != "https://herald.example.com/messenger/webhook" || !slices.Equal(info.AllowedUpdates, []string{"message", "my_chat_member", "callback_query"}) {
		t.Fatalf("webhook info = %+v", info)
	}
	if !strings.Contains(stdout, "webhook set to https://herald.example.com/messenger/webhook (allowed_updates: message,my_chat_member,callback_query)") {
		t.Fatalf("stdout = %q", stdout)
	}

	// Configuration mistakes are reported, naming the variable, without echoing the secret.
	code, _, stderr = herald(t, "webhook", "set-url", "--messenger-api-url", srv.URL,
		"--messenger-bot-token", s.Token(), "--webhook-secret", "bad secret!", "https://x/messenger/webhook")
	if code != 1 || !strings.Contains(stderr, "HERALD_WEBHOOK_SECRET (--webhook-secret)") || strings.Contains(stderr, "bad secret!") {
		t.Fatalf("a bad secret gave %d %s", code, stderr)
	}
	if code, _, stderr := herald(t, "webhook", "set-url", "--messenger-bot-token", s.Token(), "--webhook-secret", "abc"); code != 2 || !strings.Contains(stderr, "<url>") {
		t.Fatalf("set-url without a URL: %d %s", code, stderr)
	}
}

func TestWebhookValidatesItsConfiguration(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", "")
	t.Setenv("HERALD_KAFKA_BROKERS", "")
	code, _, stderr := herald(t, "webhook", "--webhook-secret", "", "--phone-hash-key", "short")
	if code != 1 {
		t.Fatalf("an empty configuration: exit %d, stderr %s", code, stderr)
	}
	if !strings.HasPrefix(stderr, "herald webhook: invalid configuration:\n") {
		t.Errorf("stderr does not start as docs/configuration.md shows:\n%s", stderr)
	}
	for _, v := range []string{"HERALD_DATABASE_URL", "HERALD_WEBHOOK_SECRET", "HERALD_PHONE_HASH_KEY", "HERALD_KAFKA_BROKERS"} {
		if !strings.Contains(stderr, v) {
			t.Errorf("the error does not name %s: %s", v, stderr)
		}
	}
	// Polling needs the bot token instead of the secret.
	code, _, stderr = herald(t, "webhook", "--updates", "polling", "--webhook-secret", "", "--messenger-bot-token", "")
	if code != 1 || !strings.Contains(stderr, "HERALD_MESSENGER_BOT_TOKEN") || strings.Contains(stderr, "HERALD_WEBHOOK_SECRET") {
		t.Fatalf("polling configuration error: %d %s", code, stderr)
	}
}
