package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/devenv"
	"github.com/heraldhq/herald/internal/testing/devtest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// The documented local path for a tenant's own bot (docs/dev.md, "Tenants' own bots"): with the exports of
// `herald dev --print-env`, the admin CLI registers a bot made in the simulator, and the bot's updates reach
// the running herald dev — which answers them in the bot's chat. Before, the CLI reported success and every
// update of the bot was dropped (an https URL nothing served).
func TestTheAdminCLIGivesATenantABotUnderHeraldDev(t *testing.T) {
	dir := t.TempDir()
	dev := devtest.Start(t, devenv.Options{DataDir: dir, DatabaseURL: pgtest.NewDatabase(t), TopicPrefix: "herald",
		DeepLinkBase: "https://t.me", RateLimit: 30}, 20*time.Second)
	unsetBotSettings(t)
	var env strings.Builder
	if err := devenv.PrintEnv(&env, dir); err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(HERALD_[A-Z_]+)='([^']*)'`).FindAllStringSubmatch(env.String(), -1) {
		t.Setenv(m[1], m[2])
	}
	for _, name := range []string{"HERALD_DATABASE_URL", "HERALD_BOT_TOKEN_KEY", "HERALD_MESSENGER_API_URL", "HERALD_PUBLIC_URL"} {
		if !strings.Contains(env.String(), name+"=") {
			t.Fatalf("--print-env does not export %s:\n%s", name, env.String())
		}
	}

	simCall := func(path string, body any, out any) {
		t.Helper()
		b, _ := json.Marshal(body)
		res, err := http.Post(dev.Base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d", path, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var made struct{ Token string }
	simCall("/sim/bots", map[string]any{"username": "acme_dev_bot"}, &made)
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme"); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := herald(t, "tenant", "update", "--id", "acme", "--bot-token-file", tokenFile(t, made.Token))
	if code != 0 || stdout != "acme_dev_bot\n" {
		t.Fatalf("tenant update --bot-token-file: %d %q %s", code, stdout, stderr)
	}

	// A user writes to the bot: the update reaches herald dev's webhook for that bot, which answers it.
	var wrote struct {
		Webhook struct {
			State  string
			Status int
		}
	}
	simCall("/sim/users/1001/message?bot=acme_dev_bot", map[string]any{"text": "/help"}, &wrote)
	if wrote.Webhook.State != "answered" || wrote.Webhook.Status != http.StatusOK {
		t.Fatalf("the bot's update reached its webhook as %+v; want answered 200", wrote.Webhook)
	}
	// The answer goes out through the queue and a worker, as every message of Herald's does.
	wait.Until(t, 30*time.Second, "herald dev's answer to /help in the bot's chat", func() bool {
		var chat struct{ Messages []struct{ Text string } }
		res, err := http.Get(dev.Base + "/sim/chats/1001/messages?bot=acme_dev_bot")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		return json.NewDecoder(res.Body).Decode(&chat) == nil && len(chat.Messages) > 0
	})
}
