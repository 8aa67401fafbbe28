package config

import (
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// Tenants' own bots are optional: without HERALD_BOT_TOKEN_KEY and HERALD_PUBLIC_URL every command starts
// (no tenant can bring a bot). Given, the key is checked wherever it is read (operator, webhook, worker,
// dev, the admin CLI) without being quoted, and the public URL must be https (the platform calls only
// https webhooks).
func TestOwnBotSettings(t *testing.T) {
	for _, env := range []string{"HERALD_BOT_TOKEN_KEY", "HERALD_PUBLIC_URL", "HERALD_MESSENGER_API_URL"} {
		unsetenv(t, env)
	}
	const key = "0DWOf8Sl5yhEBDaqE1T0mhK7G8EH5lbSQ2f06vZAUVs="
	const badKey = "not-a-key-but-a-secret-all-the-same"
	commands := map[string][]string{
		"operator": {"operator", "--database-url", "postgres://u@h/db"},
		"webhook":  {"webhook", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--phone-hash-key", "0123456789abcdef", "--webhook-secret", "0123456789abcdef"},
		"worker":   {"worker", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-token", "1:abc"},
		"dev":      {"dev"},
	}
	for name, args := range commands {
		g, err := parse(t, args...)
		if err != nil {
			t.Errorf("%s without a bot token key: %v", name, err)
			continue
		}
		if k := map[string]*BotKey{"operator": &g.Operator.BotKey, "webhook": &g.Webhook.BotKey, "worker": &g.Worker.BotKey, "dev": &g.Dev.BotKey}[name].Key(); k != nil {
			t.Errorf("%s without a key has one", name)
		}
		_, err = parse(t, append(args, "--bot-token-key", badKey)...)
		if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_BOT_TOKEN_KEY (--bot-token-key): must be the standard base64 of 32 random bytes") ||
			strings.Contains(msg, badKey) {
			t.Errorf("%s with a malformed key:\n%s", name, msg)
		}
		if _, err := parse(t, append(args, "--bot-token-key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,"+key)...); err != nil {
			t.Errorf("%s with a list of two keys: %v", name, err)
		}
	}

	g, err := parse(t, "operator", "--database-url", "postgres://u@h/db", "--public-url", "https://herald.example.com", "--bot-token-key", key)
	if err != nil || g.Operator.PublicURL != "https://herald.example.com" || g.Operator.Key() == nil || g.Operator.MessengerAPIURL != "https://api.telegram.org" {
		t.Errorf("the operator's bot settings: %+v %v", g.Operator.BotRegistration, err)
	}
	for _, bad := range []string{"http://herald.example.com", "herald.example.com", "https://", "https://h.example.com/?x=1", "https://u:p@h.example.com"} {
		_, err := parse(t, "operator", "--database-url", "postgres://u@h/db", "--public-url", bad)
		if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_PUBLIC_URL (--public-url): must be an https:// URL") {
			t.Errorf("public URL %q: %s", bad, msg)
		}
	}

	// The admin CLI's tenant update reads the same settings.
	var admin struct {
		Update struct{ AdminBot } `cmd:""`
	}
	p, err := NewParser(&admin, kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) { t.Fatal("kong exited") }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"update", "--database-url", "postgres://u@h/db"}); err != nil {
		t.Errorf("tenant update without bot settings: %v", err)
	}
	_, err = p.Parse([]string{"update", "--database-url", "postgres://u@h/db", "--bot-token-key", badKey, "--public-url", "http://x"})
	if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_BOT_TOKEN_KEY") || !strings.Contains(msg, "HERALD_PUBLIC_URL") || strings.Contains(msg, badKey) {
		t.Errorf("tenant update with a bad key and URL:\n%s", msg)
	}
}
