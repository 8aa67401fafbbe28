package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// botPlatform is a simulated platform playing the bot of token.
func botPlatform(t *testing.T, token, username string) (*sim.Server, string) {
	t.Helper()
	s := sim.New(sim.Options{Token: token, BotUsername: username, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		_ = s.Close()
	})
	return s, srv.URL
}

// unsetBotSettings clears the variables of the bot settings for the test (an empty string variable would
// be a value).
func unsetBotSettings(t *testing.T) {
	t.Helper()
	for _, env := range []string{"HERALD_BOT_TOKEN_KEY", "HERALD_PUBLIC_URL", "HERALD_MESSENGER_API_URL"} {
		t.Setenv(env, "") // restores it after the test
		if err := os.Unsetenv(env); err != nil {
			t.Fatal(err)
		}
	}
}

// tokenFile writes a token to a file, as an operator keeps it, and returns the file's path.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// herald tenant update --bot-token-file registers the tenant's own bot (getMe, setWebhook at
// HERALD_PUBLIC_URL/messenger/webhook/{id}), stores its token sealed, makes the tenant send through it and
// prints its username; the token is never printed. Another bot, or --no-bot, ends the links made through
// the old one; a new token for the same bot keeps them.
func TestAdminCLIGivesATenantItsOwnBot(t *testing.T) {
	st, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	unsetBotSettings(t)
	ctx := context.Background()
	const tokenA, tokenB = "900001:bot-a-very-secret-token", "900002:bot-b-very-secret-token"
	platformA, apiA := botPlatform(t, tokenA, "acme_bot")
	_, apiB := botPlatform(t, tokenB, "acme_new_bot")
	keyText := signing.GenerateKey()
	key, _ := signing.ParseKey(keyText)
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme"); code != 0 {
		t.Fatal(stderr)
	}
	// A user linked through the shared bot, with a notification waiting.
	fx := fixture.New(st)
	fx.VerifiedUser(t, "acme", "u1", 11)
	waiting := fx.Notification(t, fixture.For("acme", "u1"), fixture.Body("hi"), fixture.Unpublished())
	links := func(through notification.BotID) (n int) {
		for _, l := range fx.Links(t) {
			if through < 0 || l.Bot == through {
				n++
			}
		}
		return n
	}
	const anyBot = -1

	update := func(api string, args ...string) (int, string, string) {
		t.Helper()
		code, stdout, stderr := herald(t, append([]string{"tenant", "update", "--id", "acme", "--messenger-api-url", api,
			"--public-url", "https://herald.example.com", "--bot-token-key", keyText}, args...)...)
		for _, token := range []string{tokenA, tokenB, "very-secret"} {
			if strings.Contains(stdout+stderr, token) {
				t.Errorf("the output shows the token:\n%s%s", stdout, stderr)
			}
		}
		return code, stdout, stderr
	}
	code, stdout, stderr := update(apiA, "--bot-token-file", tokenFile(t, tokenA), "--bot-rate-limit", "100", "--bot-paid-broadcast")
	if code != 0 || stdout != "acme_bot\n" {
		t.Fatalf("tenant update --bot-token-file: %d %q %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "tenant acme sends through its own bot @acme_bot") || !strings.Contains(stderr, "1 user") {
		t.Errorf("stderr does not say what changed: %s", stderr)
	}
	info := platformA.WebhookInfo()
	if info.URL != "https://herald.example.com/messenger/webhook/900001" || !slices.Equal(info.AllowedUpdates, bot.AllowedUpdates) {
		t.Errorf("the bot's webhook: %+v", info)
	}
	tenant, err := st.GetTenant(ctx, "acme")
	if err != nil || tenant.BotID != 900001 {
		t.Fatalf("acme's bot: %d %v", tenant.BotID, err)
	}
	b, err := st.GetBot(ctx, 900001)
	if err != nil || b.Username != "acme_bot" || b.RateLimit != 100 || !b.PaidBroadcast || b.State != botstate.Ready {
		t.Fatalf("the bot's row: %+v %v", b, err)
	}
	if strings.Contains(string(b.TokenSealed), "very-secret") {
		t.Error("the token is stored in clear")
	}
	if token, err := bot.OpenToken(key, 900001, b.TokenSealed); err != nil || token != tokenA {
		t.Errorf("the stored token does not open to the one given: %v", err)
	}
	if n, w := links(anyBot), fx.NotificationRow(t, waiting); n != 0 || w.Status != string(notification.Unlinked) || w.ErrCode != notification.CodeBotChanged {
		t.Errorf("after the move to its own bot: %d links left, the waiting notification %s/%d; want 0 and unlinked/%d", n, w.Status, w.ErrCode, notification.CodeBotChanged)
	}

	// A user links through the bot; the same bot again (a new token, a re-check) keeps the link.
	fx.User(t, "acme", "u1", fixture.LinkedTo(11), fixture.LinkedThrough(900001))
	if code, stdout, stderr := update(apiA, "--bot-token-file", tokenFile(t, tokenA)); code != 0 || stdout != "acme_bot\n" || strings.Contains(stderr, "must link again") {
		t.Fatalf("the same bot again: %d %q %s", code, stdout, stderr)
	}
	if b, _ := st.GetBot(ctx, 900001); b.RateLimit != 0 || b.PaidBroadcast {
		t.Errorf("the settings not given again are not back to the defaults: %+v", b)
	}
	if n := links(900001); n != 1 {
		t.Errorf("the same bot again ended its links (%d left)", n)
	}

	// Another bot: the links of the first end.
	if code, stdout, stderr := update(apiB, "--bot-token-file", tokenFile(t, tokenB)); code != 0 || stdout != "acme_new_bot\n" || !strings.Contains(stderr, "1 user") {
		t.Fatalf("another bot: %d %q %s", code, stdout, stderr)
	}
	if tenant, _ := st.GetTenant(ctx, "acme"); tenant.BotID != 900002 {
		t.Errorf("acme's bot is %d, want 900002", tenant.BotID)
	}
	if n := links(anyBot); n != 0 {
		t.Errorf("%d links of the first bot left", n)
	}
	if _, list, _ := herald(t, "tenant", "list"); !strings.Contains(list, "900002") {
		t.Errorf("tenant list does not show the bot:\n%s", list)
	}

	// Back to the shared bot.
	if code, stdout, stderr := herald(t, "tenant", "update", "--id", "acme", "--no-bot"); code != 0 || stdout != "" || !strings.Contains(stderr, "the shared bot") {
		t.Fatalf("--no-bot: %d %q %s", code, stdout, stderr)
	}
	if tenant, _ := st.GetTenant(ctx, "acme"); tenant.BotID != bot.Shared {
		t.Errorf("acme's bot is %d after --no-bot", tenant.BotID)
	}
}

// What tenant update refuses about bots, saying why, without the token and without changing anything.
func TestAdminCLIRefusesABotItCannotRegister(t *testing.T) {
	st, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	unsetBotSettings(t)
	const token = "900003:bot-c-very-secret-token"
	platform, api := botPlatform(t, token, "c_bot")
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme"); code != 0 {
		t.Fatal(stderr)
	}
	good, wrong := tokenFile(t, token), tokenFile(t, "900003:not-the-very-secret-token")
	keyText := signing.GenerateKey()
	full := []string{"--messenger-api-url", api, "--public-url", "https://herald.example.com", "--bot-token-key", keyText}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--bot-token-file", good, "--no-bot"}, 2, "--no-bot"},
		{[]string{"--bot-rate-limit", "10"}, 2, "--bot-rate-limit and --bot-paid-broadcast go with --bot-token-file"},
		{[]string{"--bot-paid-broadcast"}, 2, "--bot-rate-limit and --bot-paid-broadcast go with --bot-token-file"},
		{append([]string{"--bot-token-file", good, "--bot-rate-limit", "1001"}, full...), 2, "--bot-rate-limit must be 1-1000"},
		{append([]string{"--bot-token-file", good, "--bot-rate-limit", "0"}, full...), 2, "--bot-rate-limit must be 1-1000"},
		{[]string{"--bot-token-file", good, "--messenger-api-url", api}, 1, "HERALD_BOT_TOKEN_KEY and HERALD_PUBLIC_URL"},
		{[]string{"--bot-token-file", good, "--messenger-api-url", api, "--bot-token-key", keyText}, 1, "set HERALD_PUBLIC_URL"},
		{append([]string{"--bot-token-file", filepath.Join(t.TempDir(), "missing")}, full...), 1, "reading the bot token file"},
		{append([]string{"--bot-token-file", tokenFile(t, "not a token")}, full...), 1, "does not hold a bot token"},
		{append([]string{"--bot-token-file", wrong}, full...), 1, "the messaging platform refused the bot token"},
		{append([]string{"--id", "ghost", "--bot-token-file", good}, full...), 1, "no tenant ghost"},
	} {
		args := append([]string{"tenant", "update", "--id", "acme"}, tc.args...)
		code, stdout, stderr := herald(t, args...)
		if code != tc.code || !strings.Contains(stderr, tc.says) || stdout != "" {
			t.Errorf("%s: exit %d (want %d), stdout %q, stderr %s(want it to say %q)", strings.Join(tc.args, " "), code, tc.code, stdout, stderr, tc.says)
		}
		if strings.Contains(stderr, "very-secret") {
			t.Errorf("%s: the error quotes the token: %s", strings.Join(tc.args, " "), stderr)
		}
	}
	if tenant, err := st.GetTenant(context.Background(), "acme"); err != nil || tenant.BotID != bot.Shared {
		t.Errorf("a refused update changed acme's bot: %d %v", tenant.BotID, err)
	}
	if info := platform.WebhookInfo(); info.URL != "" {
		t.Errorf("a refused update set the webhook: %+v", info)
	}
}
