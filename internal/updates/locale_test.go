package updates_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/server"
)

// The locale chain of §12 through the webhook: the language_code of the user's latest update through the
// bot picks a templated send's locale, until the tenant sets the user's own.
func TestTemplatedSendsFollowTheLanguageOfTheLatestUpdate(t *testing.T) {
	e := newEnv(t)
	e.tenant("acme", "Acme")
	key := e.fx.APIKey(t, "acme")
	e.fx.VerifiedUser(t, "acme", "u1", 5001)

	// The tenant API over the same database and broker.
	ob := outbox.New(e.st, e.broker.Producer(t, prefix), outbox.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(ob.Close)
	r := server.NewRouter(slog.New(slog.DiscardHandler))
	ingress.New(e.st, ob, slog.New(slog.DiscardHandler), ingress.Options{DeepLinkBase: "https://t.me", BotUsername: "b"}).Routes(r)
	api := httptest.NewServer(r)
	t.Cleanup(api.Close)
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, api.URL+path, bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return m
	}
	call("PUT", "/v1/templates/greeting", `{"default_locale": "en", "locales": {"en": {"message": "Hello"}, "de": {"message": "Hallo"}, "pt-br": {"message": "Olá"}}}`)
	sentLocale := func() string {
		t.Helper()
		id := call("POST", "/v1/send", `{"user_id": "u1", "template": "greeting"}`)["tracking_id"].(string)
		locale := e.fx.NotificationRow(t, id).TemplateLocale
		if locale == nil {
			t.Fatalf("notification %s was rendered from no template", id)
		}
		return *locale
	}
	update := func(language string) {
		t.Helper()
		u := textUpdate(e.updateID(), 5001, "hi")
		u["message"].(map[string]any)["from"].(map[string]any)["language_code"] = language
		expectOK(t, e.post(u))
	}

	if l := sentLocale(); l != "en" {
		t.Fatalf("before any update: %s", l)
	}
	update("de")
	if l := sentLocale(); l != "de" {
		t.Fatalf("after an update in de: %s", l)
	}
	update("pt-BR") // the latest update wins
	if l := sentLocale(); l != "pt-br" {
		t.Fatalf("after an update in pt-BR: %s", l)
	}
	if u := call("GET", "/v1/users/u1", ""); u["messenger_language"] != "pt-BR" {
		t.Fatalf("user: %v", u)
	}
	// The tenant's setting comes first.
	call("PATCH", "/v1/users/u1", `{"locale": "de"}`)
	if l := sentLocale(); l != "de" {
		t.Fatalf("with the tenant's setting: %s", l)
	}
}
