package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// herald webhook takes a tenant's own bot's updates: on the bot's route with the bot's secret, and with
// --updates polling by polling the bot with its token (HERALD_BOT_TOKEN_KEY opens it).
func TestWebhookCommandTakesATenantsBotsUpdates(t *testing.T) {
	st, dbURL := pgtest.NewStore(t)
	fx := fixture.New(st)
	broker := kafkatest.New(t, "wc")
	unsetBotSettings(t)
	ctx := context.Background()
	platform := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler), GlobalRate: -1, PerChatRate: -1, WebhookBackoff: 10 * time.Millisecond})
	api := httptest.NewServer(platform)
	t.Cleanup(func() {
		api.Close()
		_ = platform.Close()
	})
	keyText := signing.GenerateKey()
	key, _ := signing.ParseKey(keyText)
	addr := freeHTTPAddr(t)

	// acme's own bot, registered as the admin CLI does, its webhook at this webhook component.
	if err := st.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	created, err := platform.CreateBot(sim.BotConfig{Username: "acme_bot"})
	if err != nil {
		t.Fatal(err)
	}
	registrar, err := bot.NewRegistrar(api.URL, nil, key, "http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	row, err := registrar.Register(ctx, created.Token, bot.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertBot(ctx, row); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetTenantBot(ctx, "acme", row.ID); err != nil {
		t.Fatal(err)
	}
	acme, _ := platform.BotHandle("acme_bot")

	// serve runs herald webhook with args until the returned function stops it.
	serve := func(args ...string) func() {
		t.Helper()
		runCtx, cancel := context.WithCancel(ctx)
		var stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- run(runCtx, append([]string{"webhook", "--http-addr", addr, "--database-url", dbURL,
				"--kafka-brokers", strings.Join(broker.Addrs(), ","), "--kafka-topic-prefix", "wc",
				"--webhook-secret", "shared-webhook-secret-0123", "--phone-hash-key", "phone-hash-key-0123456789",
				"--messenger-api-url", api.URL, "--bot-token-key", keyText}, args...), &bytes.Buffer{}, &stderr)
		}()
		wait.Until(t, 20*time.Second, "herald webhook to be ready", func() bool {
			res, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
		return func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("herald webhook exited %d: %s", code, stderr.String())
			}
			if strings.Contains(stderr.String(), created.Token) {
				t.Error("herald webhook logged the bot's token")
			}
		}
	}
	linkedThrough := func(user string) func() bool {
		return func() bool {
			l, ok := fx.LinkOf(t, "acme", user)
			return ok && bot.ID(l.Bot) == row.ID
		}
	}
	token := func(user string) string {
		t.Helper()
		tok := "link-token-of-" + user
		if _, err := st.CreateLinkToken(ctx, "acme", user, sha256.Sum256([]byte(tok)), "Acme"); err != nil {
			t.Fatal(err)
		}
		return tok
	}

	// Webhook mode: the platform posts to /messenger/webhook/{id} with the bot's secret.
	stop := serve()
	id, err := acme.StartUser(501, token("u1"))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out := acme.WaitWebhook(wctx, id); out.State != "answered" || out.Status != http.StatusOK {
		t.Fatalf("the bot's update: %+v", out)
	}
	wait.Until(t, 10*time.Second, "the link through acme's bot", linkedThrough("u1"))
	stop()

	// Polling mode: the bot's webhook is removed and its updates polled with its token.
	stop = serve("--updates", "polling", "--messenger-bot-token", platform.Token())
	defer stop()
	wait.Until(t, 10*time.Second, "polling to remove acme's webhook", func() bool { return acme.WebhookInfo().URL == "" })
	if _, err := acme.StartUser(502, token("u2")); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the link through acme's bot, polled", linkedThrough("u2"))
	if b, err := st.GetBot(ctx, row.ID); err != nil || b.State != botstate.Ready {
		t.Errorf("the bot after polling: %+v %v", b, err)
	}
}

func freeHTTPAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
