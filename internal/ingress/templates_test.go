package ingress_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/server"
)

// replica is a second tenant API over e's database and broker, as another ingress replica.
func (e *env) replica(t *testing.T) *env {
	t.Helper()
	ob := outbox.New(e.st, e.broker.Producer(t, prefix), outbox.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(ob.Close)
	api := ingress.New(e.st, ob, slog.New(slog.DiscardHandler), ingress.Options{DeepLinkBase: "https://t.me", BotUsername: "b"})
	r := server.NewRouter(slog.New(slog.DiscardHandler))
	api.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	c := *e
	c.srv, c.api = srv, api
	return &c
}

const orderTemplate = `{"format": "html", "default_locale": "en", "locales": {
	"en": {"message": "<b>Order {{ order.id }}</b> for {{ name }}", "buttons": [[{"text": "Track {{ order.id }}", "url": "https://shop.example/t/{{ order.id }}"}]]},
	"pt-br": {"message": "<b>Pedido {{ order.id }}</b> para {{ name }}"},
	"de": {"message": "<b>Bestellung {{ order.id }}</b> für {{ name }}"}}}`

func (e *env) putTemplate(key, name, body string, status int) map[string]any {
	e.t.Helper()
	r := e.do("PUT", "/v1/templates/"+name, key, body)
	if r.status != status {
		e.t.Fatalf("PUT %s: %d, want %d: %s", name, r.status, status, r.body)
	}
	return r.json(e.t)
}

// body reads a notification's stored body and template columns.
func (e *env) stored(id string) (body, entities string, template *string, version *int, locale *string) {
	e.t.Helper()
	r := e.fx.NotificationRow(e.t, id)
	body, template, version, locale = r.Body, r.TemplateName, r.TemplateVersion, r.TemplateLocale
	if r.Entities != nil {
		entities = *r.Entities
	}
	return
}

func TestTemplateRoutes(t *testing.T) {
	e, key := newEnvWithUser(t)
	v1 := e.putTemplate(key, "order.shipped", orderTemplate, http.StatusCreated)
	if v1["version"] != 1.0 || v1["format"] != "html" || v1["default_locale"] != "en" || v1["created_at"] == nil {
		t.Fatalf("created: %v", v1)
	}
	// Identical (another spacing): 200 with the latest, no new version.
	same := strings.ReplaceAll(orderTemplate, "\n\t", " ")
	if again := e.putTemplate(key, "order.shipped", same, http.StatusOK); again["version"] != 1.0 {
		t.Fatalf("identical save: %v", again)
	}
	e.putTemplate(key, "order.shipped", strings.Replace(orderTemplate, "for {{ name }}", "to {{ name }}", 1), http.StatusCreated)
	if got := e.do("GET", "/v1/templates/order.shipped", key, nil).json(t); got["version"] != 2.0 {
		t.Fatalf("latest: %v", got)
	}
	got := e.do("GET", "/v1/templates/order.shipped/versions/1", key, nil).json(t)
	if got["version"] != 1.0 || !strings.Contains(got["locales"].(map[string]any)["en"].(map[string]any)["message"].(string), "for {{ name }}") {
		t.Fatalf("version 1: %v", got)
	}
	expectError(t, e.do("GET", "/v1/templates/order.shipped/versions/9", key, nil), 404, "template_not_found")
	expectError(t, e.do("GET", "/v1/templates/nope", key, nil), 404, "template_not_found")

	// A syntax error names the locale, the line and the column.
	bad := e.do("PUT", "/v1/templates/broken", key, `{"default_locale": "en", "locales": {"en": {"message": "ok"}, "pt-br": {"message": "Oi\n{{ name | nope }}"}}}`)
	expectError(t, bad, 400, "template_invalid")
	if msg := bad.json(t)["message"].(string); !strings.Contains(msg, `locale "pt-br"`) || !strings.Contains(msg, "line 2, column 11") {
		t.Fatalf("template_invalid message: %s", msg)
	}
	for _, body := range []string{
		`{"default_locale": "fr", "locales": {"en": {"message": "x"}}}`,
		`{"default_locale": "en", "locales": {}}`,
		`{"default_locale": "en", "format": "markdown", "locales": {"en": {"message": "x"}}}`,
		`{"default_locale": "en", "locales": {"en": {"message": "x", "extra": 1}}}`,
		`{"default_locale": "en", "locales": {"en": {"message": "x"}, "EN": {"message": "y"}}}`,
		`{"default_locale": "e", "locales": {"e": {"message": "x"}}}`,
	} {
		expectError(t, e.do("PUT", "/v1/templates/t", key, body), 400, "invalid_request")
	}
	expectError(t, e.do("PUT", "/v1/templates/Bad%20Name", key, `{"default_locale": "en", "locales": {"en": {"message": "x"}}}`), 400, "invalid_request")

	// The list, by name, a page at a time, without the sources.
	e.putTemplate(key, "a.first", `{"default_locale": "en", "locales": {"en": {"message": "x"}}}`, http.StatusCreated)
	page := e.do("GET", "/v1/templates?limit=1", key, nil).json(t)
	data := page["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["name"] != "a.first" || page["next_cursor"] == nil || data[0].(map[string]any)["locales"] != nil {
		t.Fatalf("page 1: %v", page)
	}
	page = e.do("GET", "/v1/templates?limit=1&cursor="+page["next_cursor"].(string), key, nil).json(t)
	data = page["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["name"] != "order.shipped" || page["next_cursor"] != nil {
		t.Fatalf("page 2: %v", page)
	}
	if tags := data[0].(map[string]any)["locale_tags"].([]any); len(tags) != 3 || tags[0] != "de" {
		t.Fatalf("locale_tags: %v", tags)
	}
	// Another tenant sees none of them.
	other := e.tenant("globex", "Globex", nil)
	if page := e.do("GET", "/v1/templates", other, nil).json(t); len(page["data"].([]any)) != 0 {
		t.Fatalf("another tenant's list: %v", page)
	}
	expectError(t, e.do("GET", "/v1/templates/order.shipped", other, nil), 404, "template_not_found")

	if r := e.do("DELETE", "/v1/templates/order.shipped", key, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	expectError(t, e.do("DELETE", "/v1/templates/order.shipped", key, nil), 404, "template_not_found")
	expectError(t, e.do("GET", "/v1/templates/order.shipped/versions/1", key, nil), 404, "template_not_found")
}

func TestTemplatedSend(t *testing.T) {
	e, key := newEnvWithUser(t)
	e.putTemplate(key, "order", orderTemplate, http.StatusCreated)
	r := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {"order": {"id": "A<1>"}, "name": "Tom & Jerry", "unused": [1]}}`)
	if r.status != 202 {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	id := r.json(t)["tracking_id"].(string)
	body, entities, name, version, locale := e.stored(id)
	// html: the data escaped, then parsed into text and entities as any html send; the brand line first.
	if !strings.HasSuffix(body, "Order A<1> for Tom & Jerry") || entities == "" || *name != "order" || *version != 1 || *locale != "en" {
		t.Fatalf("stored: %q %q %v %v %v", body, entities, *name, *version, *locale)
	}
	if markup := e.fx.NotificationRow(t, id).Markup; markup == nil || !strings.Contains(*markup, `"url": "https://shop.example/t/A<1>"`) {
		t.Fatalf("buttons: %v", markup)
	}
	st := e.do("GET", "/v1/status/"+id, key, nil).json(t)
	if tpl, _ := st["template"].(map[string]any); tpl["name"] != "order" || tpl["version"] != 1.0 || tpl["locale"] != "en" || st["format"] != "html" {
		t.Fatalf("resource: %v", st)
	}
	// A send without a template shows template null.
	plain := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}).json(t)
	if st := e.do("GET", "/v1/status/"+plain["tracking_id"].(string), key, nil).json(t); st["template"] != nil {
		t.Fatalf("plain send's template: %v", st["template"])
	} else if _, has := st["template"]; !has {
		t.Fatal("the resource has no template field")
	}

	// Every missing path at once.
	miss := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {"order": {}}}`)
	expectError(t, miss, 400, "template_data_missing")
	if msg := miss.json(t)["message"].(string); !strings.Contains(msg, `"order.id"`) || !strings.Contains(msg, `"name"`) {
		t.Fatalf("missing message: %s", msg)
	}
	// null is given.
	if r := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {"order": {"id": 7}, "name": null}}`); r.status != 202 {
		t.Fatalf("null data: %d %s", r.status, r.body)
	}
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {"order": {"id": {"x": 1}}, "name": "n"}}`), 400, "template_render_failed")
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "message": "x", "data": {}}`), 400, "invalid_request")
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "format": "text", "data": {}}`), 400, "invalid_request")
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": [1]}`), 400, "invalid_request")
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "nope", "data": {}}`), 404, "template_not_found")
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "template_version": 5, "data": {}}`), 404, "template_not_found")
	big := `{"user_id": "u1", "template": "order", "data": {"x": "` + strings.Repeat("a", 33<<10) + `"}}`
	expectError(t, e.do("POST", "/v1/send", key, big), 400, "invalid_request")

	// html that the rendered result breaks is refused as a send's own markup would be.
	e.putTemplate(key, "broken.html", `{"format": "html", "default_locale": "en", "locales": {"en": {"message": "<b>{{ x }}"}}}`, http.StatusCreated)
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "broken.html", "data": {"x": 1}}`), 400, "invalid_format")

	// A template edit or deletion changes nothing already accepted: the body is pinned.
	e.putTemplate(key, "order", strings.ReplaceAll(orderTemplate, "Order", "ORDER"), http.StatusCreated)
	if after, _, _, _, _ := e.stored(id); after != body {
		t.Fatalf("the edit changed a queued notification: %q", after)
	}
	r2 := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {"order": {"id": 2}, "name": "n"}}`).json(t)
	if b, _, _, v, _ := e.stored(r2["tracking_id"].(string)); !strings.Contains(b, "ORDER 2") || *v != 2 {
		t.Fatalf("a send after the edit: %q %d", b, *v)
	}
	r3 := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "template_version": 1, "data": {"order": {"id": 3}, "name": "n"}}`).json(t)
	if b, _, _, v, _ := e.stored(r3["tracking_id"].(string)); !strings.Contains(b, "Order 3") || *v != 1 {
		t.Fatalf("a send of version 1: %q %d", b, *v)
	}
	if r := e.do("DELETE", "/v1/templates/order", key, nil); r.status != 204 {
		t.Fatal(r.status)
	}
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {}}`), 404, "template_not_found")
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "template_version": 1, "data": {}}`), 404, "template_not_found")
	if after, _, _, _, _ := e.stored(id); after != body {
		t.Fatalf("the deletion changed a queued notification: %q", after)
	}
}

// A warm cache sends without reading the template again: no round trip per send.
func TestTemplateLookupsAreCached(t *testing.T) {
	e, key := newEnvWithUser(t)
	e.putTemplate(key, "hello", `{"default_locale": "en", "locales": {"en": {"message": "Hi {{ name }}"}}}`, http.StatusCreated)
	before := ingress.TemplateLookups(e.api)
	for range 20 {
		if r := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "hello", "data": {"name": "x"}}`); r.status != 202 {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
	}
	if n := ingress.TemplateLookups(e.api) - before; n > 1 {
		t.Fatalf("20 sends read the template %d times; want at most once (the head's TTL)", n)
	}
}

func TestTemplatedBatchAndIdempotency(t *testing.T) {
	e, key := newEnvWithUser(t)
	e.putTemplate(key, "hello", `{"default_locale": "en", "locales": {"en": {"message": "Hi {{ name }}"}}}`, http.StatusCreated)
	r := e.do("POST", "/v1/send/batch", key, `{"notifications": [
		{"user_id": "u1", "template": "hello", "data": {"name": "a"}},
		{"user_id": "u1", "template": "nope", "data": {}},
		{"user_id": "u1", "template": "hello", "data": {}},
		{"user_id": "u1", "message": "plain"}]}`)
	if r.status != 200 {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	results := r.json(t)["results"].([]any)
	codes := []any{}
	for _, x := range results {
		codes = append(codes, x.(map[string]any)["error"])
	}
	if results[0].(map[string]any)["tracking_id"] == nil || codes[1] != "template_not_found" || codes[2] != "template_data_missing" || results[3].(map[string]any)["tracking_id"] == nil {
		t.Fatalf("results: %s", r.body)
	}
	// The Idempotency-Key means the request as given: after an edit of the template, a retry replays.
	first := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "hello", "data": {"name": "a"}}`, "Idempotency-Key", "k1")
	e.putTemplate(key, "hello", `{"default_locale": "en", "locales": {"en": {"message": "Hello {{ name }}"}}}`, http.StatusCreated)
	again := e.do("POST", "/v1/send", key, `{"data": {"name": "a"}, "template": "hello", "user_id": "u1"}`, "Idempotency-Key", "k1")
	if first.status != 202 || again.status != 202 || first.json(t)["tracking_id"] != again.json(t)["tracking_id"] {
		t.Fatalf("replay: %s / %s", first.body, again.body)
	}
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "hello", "data": {"name": "b"}}`, "Idempotency-Key", "k1"), 409, "idempotency_conflict")
}

// The locale chain of §12: the send's locale, the tenant's setting, the messenger's report, the default;
// each tried exactly, then by its primary language.
func TestLocaleChain(t *testing.T) {
	e, key := newEnvWithUser(t)
	e.putTemplate(key, "order", orderTemplate, http.StatusCreated)
	send := func(extra string) string {
		t.Helper()
		r := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "data": {"order": {"id": 1}, "name": "n"}`+extra+`}`)
		if r.status != 202 {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		_, _, _, _, locale := e.stored(r.json(t)["tracking_id"].(string))
		return *locale
	}
	if l := send(""); l != "en" {
		t.Fatalf("nothing known: %s", l)
	}
	// The messenger reported pt_BR for the user's chat (chat 1001, the shared bot).
	e.fx.ChatLanguage(t, notification.SharedBot, 1001, "pt_BR")
	if l := send(""); l != "pt-br" {
		t.Fatalf("messenger's language: %s", l)
	}
	// The tenant's setting comes before it: de-CH falls back to de.
	if r := e.do("PATCH", "/v1/users/u1", key, `{"locale": "de-CH"}`); r.status != 200 || r.json(t)["locale"] != "de-CH" || r.json(t)["messenger_language"] != "pt_BR" {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if l := send(""); l != "de" {
		t.Fatalf("tenant's setting: %s", l)
	}
	// The send's own locale comes first; one the template lacks passes to the next.
	if l := send(`, "locale": "PT-br"`); l != "pt-br" {
		t.Fatalf("send's locale: %s", l)
	}
	if l := send(`, "locale": "ja"`); l != "de" {
		t.Fatalf("send's unknown locale: %s", l)
	}
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "order", "locale": "not a tag", "data": {}}`), 400, "invalid_request")
}

func TestPatchUser(t *testing.T) {
	e, key := newEnvWithUser(t)
	// Before the user links: the user exists, unlinked.
	r := e.do("PATCH", "/v1/users/later", key, `{"locale": "pt_BR", "time_zone": "America/Sao_Paulo"}`)
	if r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	u := e.do("GET", "/v1/users/later", key, nil).json(t)
	if u["linked"] != false || u["locale"] != "pt_BR" || u["time_zone"] != "America/Sao_Paulo" || u["messenger_language"] != nil {
		t.Fatalf("user: %v", u)
	}
	// One field at a time; null clears.
	u = e.do("PATCH", "/v1/users/later", key, `{"time_zone": null}`).json(t)
	if u["locale"] != "pt_BR" || u["time_zone"] != nil {
		t.Fatalf("after clearing the zone: %v", u)
	}
	for _, body := range []string{`{"locale": "english please"}`, `{"locale": 5}`, `{"time_zone": "Mars/Olympus"}`, `{"time_zone": "Local"}`, `{"other": 1}`} {
		expectError(t, e.do("PATCH", "/v1/users/later", key, body), 400, "invalid_request")
	}
	// Erasure erases them.
	if r := e.do("DELETE", "/v1/users/later", key, nil); r.status != 204 {
		t.Fatalf("erase: %d", r.status)
	}
	expectError(t, e.do("GET", "/v1/users/later", key, nil), 404, "not_found")
	if n := e.countRows(`SELECT count(*) FROM users WHERE user_id = 'later' AND (locale IS NOT NULL OR time_zone IS NOT NULL)`); n != 0 {
		t.Fatal("the erasure left the settings")
	}
}

func TestPreview(t *testing.T) {
	e, key := newEnvWithUser(t)
	e.putTemplate(key, "order", orderTemplate, http.StatusCreated)
	r := e.do("POST", "/v1/templates/order/preview", key, `{"data": {"order": {"id": "<7>"}, "name": "Ana"}, "locale": "pt_BR"}`)
	if r.status != 200 {
		t.Fatalf("preview: %d %s", r.status, r.body)
	}
	p := r.json(t)
	if p["message"] != "<b>Pedido &lt;7&gt;</b> para Ana" || p["locale"] != "pt-br" || p["version"] != 1.0 || p["format"] != "html" || p["name"] != "order" {
		t.Fatalf("preview: %v", p)
	}
	// With a user: the user's locale.
	e.do("PATCH", "/v1/users/u1", key, `{"locale": "de"}`)
	p = e.do("POST", "/v1/templates/order/preview", key, `{"data": {"order": {"id": 1}, "name": "A"}, "user_id": "u1"}`).json(t)
	if p["locale"] != "de" {
		t.Fatalf("preview for u1: %v", p)
	}
	p = e.do("POST", "/v1/templates/order/preview", key, `{"data": {"order": {"id": 1}, "name": "A"}}`).json(t)
	if buttons := p["buttons"].([]any); p["locale"] != "en" || len(buttons) != 1 {
		t.Fatalf("preview en: %v", p)
	}
	// The errors a send would get.
	expectError(t, e.do("POST", "/v1/templates/order/preview", key, `{"data": {}}`), 400, "template_data_missing")
	expectError(t, e.do("POST", "/v1/templates/nope/preview", key, `{}`), 404, "template_not_found")
	expectError(t, e.do("POST", "/v1/templates/order/preview", key, `{"version": 4}`), 404, "template_not_found")
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE template_name IS NOT NULL`); n != 0 {
		t.Fatalf("a preview stored %d notifications", n)
	}
}

// Two replicas over one database: a replica's own save and delete reach its sends at once; another
// replica's reach them within TemplateHeadTTL (templatecache.go), and a version named explicitly follows
// the deletion alike.
func TestTemplateCacheAcrossReplicas(t *testing.T) {
	e, key := newEnvWithUser(t)
	other := e.replica(t)
	put := `{"default_locale": "en", "locales": {"en": {"message": "v1 {{ n }}"}}}`
	e.putTemplate(key, "hello", put, http.StatusCreated)
	send := func(srv *env, extra string) response {
		return srv.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "hello", "data": {"n": 1}`+extra+`}`)
	}
	if r := send(other, ""); r.status != 202 { // warms the other replica's cache
		t.Fatalf("other replica: %d %s", r.status, r.body)
	}
	// A new version saved through the first replica: the other renders it within the TTL.
	e.putTemplate(key, "hello", strings.Replace(put, "v1", "v2", 1), http.StatusCreated)
	deadline := time.Now().Add(ingress.TemplateHeadTTL + 2*time.Second)
	for {
		id := send(other, "").json(t)["tracking_id"].(string)
		if body, _, _, _, _ := e.stored(id); strings.HasSuffix(body, "v2 1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other replica still renders version 1 past the TTL")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Deleted through the first: 404 there at once, and on the other within the TTL, also for version 1.
	if r := e.do("DELETE", "/v1/templates/hello", key, nil); r.status != 204 {
		t.Fatal(r.status)
	}
	expectError(t, send(e, ""), 404, "template_not_found")
	time.Sleep(ingress.TemplateHeadTTL + 100*time.Millisecond)
	expectError(t, send(other, ""), 404, "template_not_found")
	expectError(t, send(other, `, "template_version": 1`), 404, "template_not_found")
}

// The date filter renders in the user's time zone (PATCH /v1/users) when the tenant set one, else in UTC —
// also for a template of one locale, whose locale needs no user, and in a preview for the user.
func TestTheDateFilterRendersInTheUsersTimeZone(t *testing.T) {
	e, key := newEnvWithUser(t)
	e.putTemplate(key, "due", `{"default_locale": "en", "locales": {"en": {"message": "Due {{ at | date: \"%Y-%m-%d %H:%M %Z\" }}"}}}`, http.StatusCreated)
	send := func() string {
		t.Helper()
		r := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "due", "data": {"at": "2026-07-01T20:30:00Z"}}`)
		if r.status != 202 {
			t.Fatalf("send: %d %s", r.status, r.body)
		}
		body, _, _, _, _ := e.stored(r.json(t)["tracking_id"].(string))
		return body
	}
	if got := send(); !strings.HasSuffix(got, "Due 2026-07-01 20:30 UTC") {
		t.Fatalf("no zone set: %q, want UTC", got)
	}
	for zone, want := range map[string]string{"Europe/Berlin": "Due 2026-07-01 22:30 CEST", "America/Sao_Paulo": "Due 2026-07-01 17:30 -03"} {
		if r := e.do("PATCH", "/v1/users/u1", key, `{"time_zone": "`+zone+`"}`); r.status != 200 {
			t.Fatalf("patch: %d %s", r.status, r.body)
		}
		if got := send(); !strings.HasSuffix(got, want) {
			t.Errorf("zone %s: %q, want it to end %q", zone, got, want)
		}
		r := e.do("POST", "/v1/templates/due/preview", key, `{"user_id": "u1", "data": {"at": "2026-07-01T20:30:00Z"}}`)
		if r.status != 200 || r.json(t)["message"] != want {
			t.Errorf("preview in %s: %d %s, want %q", zone, r.status, r.body, want)
		}
	}
}

// Concurrent templated sends of two tenants share their users' locale reads (one statement for many
// requests): each is still rendered in its own user's zone — never another request's, nor another
// tenant's user of the same id.
func TestConcurrentSendsEachRenderInTheirOwnUsersZone(t *testing.T) {
	e := newEnv(t)
	keys := map[string]string{"acme": e.tenant("acme", "Acme", nil), "globex": e.tenant("globex", "Globex", nil)}
	zones := []struct{ zone, want string }{
		{"Europe/Berlin", "Due 2026-07-01 22:30 CEST"}, {"America/Sao_Paulo", "Due 2026-07-01 17:30 -03"},
		{"Asia/Tokyo", "Due 2026-07-02 05:30 JST"}, {"UTC", "Due 2026-07-01 20:30 UTC"},
	}
	const users = 12
	want := map[string]string{} // tenant/user → the message's end
	for ti, tenant := range []string{"acme", "globex"} {
		e.putTemplate(keys[tenant], "due", `{"default_locale": "en", "locales": {"en": {"message": "Due {{ at | date: \"%Y-%m-%d %H:%M %Z\" }}"}}}`, http.StatusCreated)
		for u := range users {
			id := fmt.Sprintf("u%d", u)
			e.fx.VerifiedUser(t, tenant, id, int64(1000*(ti+1)+u))
			z := zones[(u+ti)%len(zones)] // the same id has another zone in the other tenant
			if r := e.do("PATCH", "/v1/users/"+id, keys[tenant], `{"time_zone": "`+z.zone+`"}`); r.status != 200 {
				t.Fatalf("patch %s/%s: %d %s", tenant, id, r.status, r.body)
			}
			want[tenant+"/"+id] = z.want
		}
	}
	type sent struct {
		user string // tenant/user
		r    response
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []sent
	for range 4 {
		for tenant, key := range keys {
			for u := range users {
				wg.Go(func() {
					id := fmt.Sprintf("u%d", u)
					r := e.do("POST", "/v1/send", key, `{"user_id": "`+id+`", "template": "due", "data": {"at": "2026-07-01T20:30:00Z"}}`)
					mu.Lock()
					all = append(all, sent{tenant + "/" + id, r})
					mu.Unlock()
				})
			}
		}
	}
	wg.Wait()
	var failures []string
	for _, s := range all {
		if s.r.status != 202 {
			failures = append(failures, fmt.Sprintf("%s: %d %s", s.user, s.r.status, s.r.body))
			continue
		}
		body, _, _, _, _ := e.stored(s.r.json(t)["tracking_id"].(string))
		if !strings.HasSuffix(body, want[s.user]) {
			failures = append(failures, fmt.Sprintf("%s: %q, want it to end %q", s.user, body, want[s.user]))
		}
	}
	if len(failures) > 0 || len(all) != 4*2*users {
		t.Fatalf("%d of %d sends wrong:\n%s", len(failures), len(all), strings.Join(failures, "\n"))
	}
}
