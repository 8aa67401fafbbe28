package delivery_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/updates"
)

// The messenger side of a test that links and verifies users the way they do: the webhook receives the
// simulator's updates, and the users open their deep links and share their contacts in the simulator.

// botUsername is the bot the tenant API's deep links open; a test that links through the webhook gives the
// simulator the same (sim.Options.BotUsername).
const botUsername = "herald_test_bot"

// webhook serves a webhook receiver over the env's store and outbox, logging to logger, and registers it
// with the simulator.
func (e *env) webhook(logger *slog.Logger) {
	e.t.Helper()
	const secret = "webhook-secret"
	rc := updates.New(e.st, e.outbox, updates.Options{Secret: secret, PhoneHashKey: []byte("0123456789abcdef-key"), Logger: logger})
	r := server.NewRouter(logger)
	rc.Routes(r)
	srv := httptest.NewServer(r)
	e.t.Cleanup(func() { srv.Close(); rc.Close() })
	if err := updates.SetWebhookURL(context.Background(), e.client, srv.URL+updates.Path, secret); err != nil {
		e.t.Fatal(err)
	}
}

// linkThroughWebhook links the tenant's user to the messenger account: a link token from the API, its
// deep link opened in the simulator, the update through the webhook.
func (e *env) linkThroughWebhook(user string, account int64) {
	e.t.Helper()
	status, m := e.call("POST", "/v1/link-token", map[string]any{"user_id": user})
	link, _ := m["deep_link"].(string)
	if status != http.StatusCreated || link == "" {
		e.t.Fatalf("POST /v1/link-token: %d %v", status, m)
	}
	if _, err := e.sim.OpenLink(account, link); err != nil {
		e.t.Fatal(err)
	}
	wait.Until(e.t, 10*time.Second, "the link to the new account", func() bool {
		l, ok := fixture.New(e.st).LinkOf(e.t, "acme", user)
		return ok && l.MessengerUserID == account
	})
}

// verifyThroughWebhook verifies the phone of a linked user: the verification started through the API, the
// contact shared in the simulator.
func (e *env) verifyThroughWebhook(user string, account int64, phone string) {
	e.t.Helper()
	if status, m := e.call("POST", "/v1/phone-verification/start", map[string]any{"user_id": user}); status != http.StatusAccepted {
		e.t.Fatalf("POST /v1/phone-verification/start: %d %v", status, m)
	}
	if _, err := e.sim.ShareContact(account, phone, nil); err != nil {
		e.t.Fatal(err)
	}
	wait.Until(e.t, 10*time.Second, "the verification", func() bool {
		_, m := e.call("GET", "/v1/phone-verification/status/"+url.PathEscape(user), nil)
		return m["status"] == "verified"
	})
}

// settle waits until every notification, the system messages included, has reached a final state.
func (e *env) settle() {
	e.t.Helper()
	wait.Until(e.t, 20*time.Second, "every notification settled", func() bool {
		n := 0
		for status, count := range fixture.New(e.st).StatusCounts(e.t) {
			if !terminal[status] {
				n += count
			}
		}
		return n == 0
	})
}

// simOptions are the simulator's options for a test that links through the webhook: the tenant API's bot.
func simOptions(logger *slog.Logger) sim.Options {
	return sim.Options{BotUsername: botUsername, Logger: logger}
}
