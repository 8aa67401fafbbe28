package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/sim"
)

func TestWebhookSetURLRegistersWithThePlatform(t *testing.T) {
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.Close()
	})
	var stdout, stderr bytes.Buffer
	err := runWebhook(context.Background(), []string{"set-url",
		"--messenger-api-url", srv.URL, "--messenger-bot-token", s.Token(), "--webhook-secret", "abc_DEF-123",
		"https://herald.example.com/messenger/webhook"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("set-url: %v (stderr %s)", err, stderr.String())
	}
	info := s.WebhookInfo()
	if info.URL != "https://herald.example.com/messenger/webhook" || !slices.Equal(info.AllowedUpdates, []string{"message"}) {
		t.Fatalf("webhook info = %+v", info)
	}
	if !strings.Contains(stdout.String(), "webhook set to https://herald.example.com/messenger/webhook") {
		t.Fatalf("stdout = %q", stdout.String())
	}

	// Configuration mistakes are reported, naming the variable.
	err = runWebhook(context.Background(), []string{"set-url", "--messenger-api-url", srv.URL,
		"--messenger-bot-token", s.Token(), "--webhook-secret", "bad secret!", "https://x/messenger/webhook"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "HERALD_WEBHOOK_SECRET") {
		t.Fatalf("a bad secret gave %v", err)
	}
	if err := runWebhook(context.Background(), []string{"set-url"}, &stdout, &stderr); err == nil {
		t.Fatal("set-url without a URL was accepted")
	}
}

func TestWebhookValidatesItsConfiguration(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", "")
	var stdout, stderr bytes.Buffer
	err := runWebhook(context.Background(), []string{"--webhook-secret", "", "--phone-hash-key", "short"}, &stdout, &stderr)
	if err == nil {
		t.Fatal("an empty configuration was accepted")
	}
	for _, v := range []string{"HERALD_DATABASE_URL", "HERALD_WEBHOOK_SECRET", "HERALD_PHONE_HASH_KEY", "HERALD_KAFKA_BROKERS"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("the error does not name %s: %v", v, err)
		}
	}
	// Polling needs the bot token instead of the secret.
	err = runWebhook(context.Background(), []string{"--updates", "polling", "--webhook-secret", "", "--messenger-bot-token", ""}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "HERALD_MESSENGER_BOT_TOKEN") || strings.Contains(err.Error(), "HERALD_WEBHOOK_SECRET") {
		t.Fatalf("polling configuration error = %v", err)
	}
}
