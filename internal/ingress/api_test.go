package ingress_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"

	"github.com/heraldhq/herald/internal/apikey"
)

// every /v1 route with a body that would be valid for it.
var routes = []struct{ method, path, body string }{
	{"POST", "/v1/send", `{"user_id":"u1","message":"hi"}`},
	{"GET", "/v1/status/0190a1b2-0000-7000-8000-000000000000", ""},
	{"POST", "/v1/link-token", `{"user_id":"u1"}`},
	{"POST", "/v1/phone-verification/start", `{"user_id":"u1"}`},
	{"GET", "/v1/phone-verification/status/u1", ""},
	{"POST", "/v1/send/batch", `{"notifications":[{"user_id":"u1","message":"hi"}]}`},
	{"GET", "/v1/notifications", ""},
	{"POST", "/v1/notifications/0190a1b2-0000-7000-8000-000000000000/cancel", ""},
	{"GET", "/v1/users/u1", ""},
	{"DELETE", "/v1/users/u1", ""},
}

func TestEveryRouteRejectsBadKeysWith401(t *testing.T) {
	t.Parallel()
	// Each request from an address of its own: past 20 failures, one address gets 429 (authlimit_test.go).
	e := behindProxy(t)
	clients := 0
	client := func() []string { clients++; return from(fmt.Sprintf("198.51.%d.%d", clients/250, clients%250+1)) }
	ctx := context.Background()
	valid := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)

	mk := func(mutate string) string {
		k := apikey.New()
		var expires *time.Time
		if mutate == "expired" {
			past := time.Now().Add(-time.Minute)
			expires = &past
		}
		id, err := e.st.InsertAPIKey(ctx, "acme", k.Digest, k.Prefix, nil, expires)
		if err != nil {
			t.Fatal(err)
		}
		switch mutate {
		case "disabled":
			_, err = e.st.SetKeyState(ctx, id, store.KeyState{Disabled: true})
		case "revoked":
			_, err = e.st.RevokeAPIKeys(ctx, "acme", id)
		}
		if err != nil {
			t.Fatal(err)
		}
		return k.Secret
	}
	if err := e.st.CreateTenant(ctx, "suspended-co", "S"); err != nil {
		t.Fatal(err)
	}
	sk := apikey.New()
	if _, err := e.st.InsertAPIKey(ctx, "suspended-co", sk.Digest, sk.Prefix, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetTenantSuspended(ctx, "suspended-co", true); err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"missing header":       "",
		"unknown key":          apikey.New().Secret,
		"malformed key":        "not-a-key",
		"disabled key":         mk("disabled"),
		"expired key":          mk("expired"),
		"revoked key":          mk("revoked"),
		"suspended tenant key": sk.Secret,
	}
	for _, rt := range routes {
		for name, key := range bad {
			// A bad key is 401 even when the body is garbage: authentication comes first.
			for _, body := range []string{rt.body, "{garbage"} {
				if rt.method == "GET" && body != rt.body {
					continue
				}
				var b any
				if body != "" {
					b = body
				}
				r := e.do(rt.method, rt.path, key, b, client()...)
				expectError(t, r, http.StatusUnauthorized, "unauthorized")
				_ = name
			}
		}
		// Basic scheme and a lowercase bearer.
		r := e.do(rt.method, rt.path, "", nil, append(client(), "Authorization", "Basic "+valid)...)
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
	}
	r := e.do("POST", "/v1/send", "", `{"user_id":"u1","message":"hi"}`, "Authorization", "bearer "+valid)
	if r.status != http.StatusAccepted {
		t.Errorf("the Bearer scheme is case-insensitive: %d %s", r.status, r.body)
	}
}

func TestRevocationTakesEffectWithinTheCacheBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // AuthCacheTTL is 500 ms in tests; production uses 2 s
	ctx := context.Background()
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	if r := e.do("GET", "/v1/phone-verification/status/u1", key, nil); r.status != http.StatusOK {
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	if err := e.st.SetTenantSuspended(ctx, "acme", true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	r := e.do("GET", "/v1/phone-verification/status/u1", key, nil)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
}

// The Notification resource is the spec's fields and the v1 extensions' (§2, and §9's category), nothing
// else: never the body.
func TestStatusReturnsExactlyTheContractFields(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	sent := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "secret body text", "priority": 8})
	id := sent.json(t)["tracking_id"].(string)
	r := e.do("GET", "/v1/status/"+id, key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	m := r.json(t)
	want := []string{"tracking_id", "user_id", "priority", "status", "attempts", "created_at", "updated_at", "messenger_message_id", "last_error_code", "last_error_message",
		"metadata", "send_at", "expires_at", "delivered_at", "next_attempt_at", "category", "format", "template", "replace_key", "delivered_as",
		"message_deleted_at", "digest_key", "digest_size"}
	if len(m) != len(want) {
		t.Errorf("fields %v, want exactly %v", keys(m), want)
	}
	for _, f := range want {
		if _, ok := m[f]; !ok {
			t.Errorf("field %s missing", f)
		}
	}
	if strings.Contains(string(r.body), "secret body text") {
		t.Error("the status response leaks the message body")
	}
	if m["tracking_id"] != id || m["user_id"] != "u1" || m["priority"] != 8.0 || m["status"] != "queued" || m["attempts"] != 0.0 ||
		m["messenger_message_id"] != nil || m["last_error_code"] != 0.0 || m["last_error_message"] != nil {
		t.Errorf("unexpected values: %s", r.body)
	}
	// A send without the options: metadata is {} (not null), the timestamps null.
	if md, ok := m["metadata"].(map[string]any); !ok || len(md) != 0 {
		t.Errorf("metadata = %v, want {}", m["metadata"])
	}
	for _, f := range []string{"send_at", "expires_at", "delivered_at", "next_attempt_at"} {
		if m[f] != nil {
			t.Errorf("%s = %v, want null", f, m[f])
		}
	}
	for _, f := range []string{"created_at", "updated_at"} {
		if _, err := time.Parse(time.RFC3339, m[f].(string)); err != nil {
			t.Errorf("%s is not ISO 8601: %v", f, m[f])
		}
	}
	for _, path := range []string{"/v1/status/0190a1b2-0000-7000-8000-000000000000", "/v1/status/not-a-uuid", "/v1/status/%20"} {
		expectError(t, e.do("GET", path, key, nil), http.StatusNotFound, "not_found")
	}
}

func TestLinkTokenIssuesSingleUseDeepLinkAndStoresOnlyTheDigest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme Dev", ptr("Acme"))
	before := time.Now()
	r := e.do("POST", "/v1/link-token", key, map[string]any{"user_id": "user-42"})
	if r.status != http.StatusCreated {
		t.Fatalf("link-token: %d %s", r.status, r.body)
	}
	m := r.json(t)
	if len(m) != 3 {
		t.Errorf("fields %v, want token, expires_at, deep_link", keys(m))
	}
	token := m["token"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) != 32 || len(token) > 64 {
		t.Fatalf("token %q is not 32 bytes of base64url within 64 characters", token)
	}
	if m["deep_link"] != "https://t.me/herald_test_bot?start="+token {
		t.Errorf("deep_link = %v", m["deep_link"])
	}
	expires, err := time.Parse(time.RFC3339, m["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if d := expires.Sub(before); d < 14*time.Minute || d > 16*time.Minute {
		t.Errorf("token lifetime %v, want 15 minutes", d)
	}
	digest := sha256.Sum256([]byte(token))
	label, ok := e.fx.LinkTokenLabel(t, digest, "acme", "user-42")
	if !ok {
		t.Fatal("digest not stored")
	}
	if label != "Acme" {
		t.Errorf("label snapshot %q, want Acme", label)
	}
	if n := e.countRows(`SELECT count(*) FROM link_tokens WHERE encode(digest, 'escape') LIKE '%' || $1 || '%'`, token); n != 0 {
		t.Error("the token is stored in clear")
	}
	for _, body := range []string{`{}`, `{"user_id":""}`, `{"user_id":7}`, `{"user_id":"a","x":1}`, `nope`} {
		expectError(t, e.do("POST", "/v1/link-token", key, body), http.StatusBadRequest, "invalid_request")
	}
}

func TestPhoneVerificationStartAndStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme Dev", ptr("Acme"))

	// Unknown user, and a user with a token but no link.
	expectError(t, e.do("GET", "/v1/phone-verification/status/ghost", key, nil), http.StatusNotFound, "not_found")
	expectError(t, e.do("POST", "/v1/phone-verification/start", key, map[string]any{"user_id": "ghost"}), http.StatusNotFound, "not_found")
	if r := e.do("POST", "/v1/link-token", key, map[string]any{"user_id": "u1"}); r.status != http.StatusCreated {
		t.Fatal(r.status)
	}
	expectError(t, e.do("POST", "/v1/phone-verification/start", key, map[string]any{"user_id": "u1"}), http.StatusNotFound, "not_found")
	st := e.do("GET", "/v1/phone-verification/status/u1", key, nil)
	if st.status != http.StatusOK || st.json(t)["status"] != "unverified" || st.json(t)["verified_at"] != nil || st.json(t)["phone_last4"] != nil {
		t.Fatalf("a user with a token reads unverified: %d %s", st.status, st.body)
	}

	e.fx.User(e.t, "acme", "u1", fixture.LinkedTo(5005))
	before := time.Now()
	r := e.do("POST", "/v1/phone-verification/start", key, map[string]any{"user_id": "u1"})
	if r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["user_id"] != "u1" || m["status"] != "pending" || len(m) != 3 {
		t.Errorf("start response %s", r.body)
	}
	expires, _ := time.Parse(time.RFC3339, m["expires_at"].(string))
	if d := expires.Sub(before); d < 9*time.Minute || d > 11*time.Minute {
		t.Errorf("session lifetime %v, want 10 minutes", d)
	}
	// The branded prompt is a system message on the high topic with a request-contact keyboard.
	envs := e.envelopes("it.notifications.high")
	if len(envs) != 1 {
		t.Fatalf("%d envelopes on the high topic, want the prompt", len(envs))
	}
	row := e.fx.NotificationRow(t, envs[0].TrackingID)
	kind, body := row.Kind, row.Body
	var chat int64
	if row.ChatID != nil {
		chat = *row.ChatID
	}
	var markup []byte
	if row.Markup != nil {
		markup = []byte(*row.Markup)
	}
	if kind != "system" || chat != 5005 || !strings.HasPrefix(body, "A message from Acme\n") {
		t.Errorf("prompt: kind %s chat %d body %q", kind, chat, body)
	}
	var kb struct {
		Keyboard [][]struct {
			RequestContact bool `json:"request_contact"`
		} `json:"keyboard"`
	}
	if err := json.Unmarshal(markup, &kb); err != nil || len(kb.Keyboard) != 1 || !kb.Keyboard[0][0].RequestContact {
		t.Errorf("prompt keyboard %s has no request-contact button", markup)
	}
	// Tenants cannot look system messages up.
	expectError(t, e.do("GET", "/v1/status/"+envs[0].TrackingID, key, nil), http.StatusNotFound, "not_found")

	st = e.do("GET", "/v1/phone-verification/status/u1", key, nil)
	sm := st.json(t)
	// The prompt's delivery is visible (a user who blocked the bot never gets it), never its text.
	if p, _ := sm["prompt"].(map[string]any); sm["status"] != "pending" || len(sm) != 6 || p["status"] != "queued" || len(p) != 4 {
		t.Errorf("status after start: %s", st.body)
	}
	// Pending past its expiry reads as unverified.
	e.fx.User(e.t, "acme", "u1", fixture.SessionExpired())
	if got := e.do("GET", "/v1/phone-verification/status/u1", key, nil).json(t)["status"]; got != "unverified" {
		t.Errorf("expired pending reads %v, want unverified", got)
	}
	// Verified shows only the last four digits.
	e.fx.VerifiedUser(e.t, "acme", "u1", 5005)
	vm := e.do("GET", "/v1/phone-verification/status/"+url.PathEscape("u1"), key, nil).json(t)
	if vm["status"] != "verified" || vm["phone_last4"] != "4567" || vm["verified_at"] == nil {
		t.Errorf("verified status: %v", vm)
	}
	for _, body := range []string{`{}`, `[1]`, `{"user_id":null}`} {
		expectError(t, e.do("POST", "/v1/phone-verification/start", key, body), http.StatusBadRequest, "invalid_request")
	}
}

func TestAnotherTenantsDataIsNotFoundOnEveryRoute(t *testing.T) {
	t.Parallel()
	e, acme := newEnvWithUser(t)
	globex := e.tenant("globex", "Globex", nil)
	sent := e.do("POST", "/v1/send", acme, map[string]any{"user_id": "u1", "message": "hi"})
	id := sent.json(t)["tracking_id"].(string)

	expectError(t, e.do("GET", "/v1/status/"+id, globex, nil), http.StatusNotFound, "not_found")
	expectError(t, e.do("GET", "/v1/phone-verification/status/u1", globex, nil), http.StatusNotFound, "not_found")
	expectError(t, e.do("POST", "/v1/phone-verification/start", globex, map[string]any{"user_id": "u1"}), http.StatusNotFound, "not_found")
	// Acme's verified user is not sendable by globex.
	expectError(t, e.do("POST", "/v1/send", globex, map[string]any{"user_id": "u1", "message": "hi"}), http.StatusConflict, "phone_unverified")
	// A link token for the same user_id belongs to globex's own user.
	if r := e.do("POST", "/v1/link-token", globex, map[string]any{"user_id": "u1"}); r.status != http.StatusCreated {
		t.Fatalf("globex link-token: %d", r.status)
	}
	if n := e.countRows(`SELECT count(*) FROM link_tokens WHERE tenant_id = 'globex' AND user_id = 'u1'`); n != 1 {
		t.Errorf("globex token not scoped to globex")
	}
	if got := e.do("GET", "/v1/phone-verification/status/u1", acme, nil).json(t)["status"]; got != "verified" {
		t.Errorf("globex's token changed acme's user: %v", got)
	}
}

func TestSendAnswersQueueErrorWhenTheBrokerIsTooSlow(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	// The broker holds every produce request longer than the 2 s budget.
	e.broker.Cluster().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.broker.Cluster().KeepControl()
		time.Sleep(5 * time.Second)
		return nil, nil, false
	})
	start := time.Now()
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
	expectError(t, r, http.StatusBadGateway, "queue_error")
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("the send waited %v; the produce budget is 2 s", took)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("a timed-out enqueue left %d rows", n)
	}
}

func TestUnknownRoutesAndMethodsAnswerJSONErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	expectError(t, e.do("GET", "/v2/send", key, nil), http.StatusNotFound, "not_found")
	r := e.do("DELETE", "/v1/send", key, nil)
	if r.status != http.StatusMethodNotAllowed || r.json(t)["error"] != "invalid_request" {
		t.Errorf("DELETE /v1/send: %d %s", r.status, r.body)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOverloadIsShedWith503AndRetryAfter(t *testing.T) {
	t.Parallel()
	// A handler whose only slot is held by a request that blocks until released.
	release := make(chan struct{})
	held := make(chan struct{})
	blocking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { close(held); <-release })
	h := ingress.LimitInFlightForTest(1)(blocking)
	srv := httptest.NewServer(h)
	defer srv.Close()
	go func() {
		res, err := http.Get(srv.URL)
		if err == nil {
			res.Body.Close()
		}
	}()
	<-held
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	close(release)
	var body map[string]string
	_ = json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusServiceUnavailable || body["error"] != "unavailable" || res.Header.Get("Retry-After") != "1" {
		t.Errorf("overloaded answer: %d %v Retry-After=%q", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
}
