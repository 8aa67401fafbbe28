package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/apikey"
)

// The tenant API's changes are recorded as the key's, and GET /v1/audit-events shows a tenant only its own
// trail, newest first, filtered by type and paged by cursor — never a key, a secret or a body.
func TestAuditEventsThroughTheAPI(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	other := e.tenant("globex", "Globex", nil)
	var keyID string
	if err := e.st.Pool().QueryRow(t.Context(), `SELECT id::text FROM api_keys WHERE digest = $1`, func() []byte {
		d := apikey.Digest(key)
		return d[:]
	}()).Scan(&keyID); err != nil {
		t.Fatal(err)
	}

	mustStatus := func(r response, want int) {
		t.Helper()
		if r.status != want {
			t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
		}
	}
	mustStatus(e.do("PUT", "/v1/templates/welcome", key, map[string]any{"locales": map[string]any{"en": map[string]any{"message": "BODYTEXT {{ name }}"}}, "default_locale": "en"}), http.StatusCreated)
	cb := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example/cb", "events": []string{"notification.delivered"}})
	mustStatus(cb, http.StatusCreated)
	secret, _ := cb.json(t)["secret"].(string)
	mustStatus(e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}), http.StatusNoContent)
	mustStatus(e.do("DELETE", "/v1/users/u1", key, nil), http.StatusNoContent)
	mustStatus(e.do("PUT", "/v1/templates/globex-only", other, map[string]any{"locales": map[string]any{"en": map[string]any{"message": "x"}}, "default_locale": "en"}), http.StatusCreated)

	r := e.do("GET", "/v1/audit-events", key, nil)
	mustStatus(r, http.StatusOK)
	for _, s := range []string{key, secret, "BODYTEXT", "hooks.example", "globex-only"} {
		if s != "" && strings.Contains(string(r.body), s) {
			t.Errorf("acme's trail holds %q: %s", s, r.body)
		}
	}
	var got []string
	for _, ev := range r.json(t)["data"].([]any) {
		m := ev.(map[string]any)
		got = append(got, m["type"].(string)+" "+m["actor"].(string)+" "+m["target"].(string))
	}
	a := " api_key:" + keyID + " "
	want := []string{"user.erased" + a + "u1", "user.opted_out" + a + "u1", "callback.created" + a + cb.json(t)["id"].(string), "template.saved" + a + "welcome"}
	// The fixture's own key creation (a store call) is the oldest: the first four are the API's.
	if len(got) < len(want) || strings.Join(got[:len(want)], "|") != strings.Join(want, "|") {
		t.Fatalf("acme's trail %q, want it to start %q", got, want)
	}

	// One type; then pages of one, walked to the end.
	r = e.do("GET", "/v1/audit-events?type=template.saved", key, nil)
	if data := r.json(t)["data"].([]any); len(data) != 1 {
		t.Errorf("type=template.saved: %s", r.body)
	}
	seen, path := 0, "/v1/audit-events?limit=1"
	for {
		r := e.do("GET", path, key, nil)
		mustStatus(r, http.StatusOK)
		seen += len(r.json(t)["data"].([]any))
		next, ok := r.json(t)["next_cursor"].(string)
		if !ok {
			break
		}
		path = "/v1/audit-events?limit=1&cursor=" + next
		if e.do("GET", "/v1/audit-events?type=user.erased&cursor="+next, key, nil).status != http.StatusBadRequest {
			t.Error("a cursor served another filter")
		}
	}
	if seen != len(got) {
		t.Errorf("pages of one walked %d events, the whole trail is %d", seen, len(got))
	}
	for _, bad := range []string{"?type=nope", "?limit=0", "?limit=201", "?cursor=xyz", "?since=1", "?type=a&type=b"} {
		if r := e.do("GET", "/v1/audit-events"+bad, key, nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"invalid_request"`) {
			t.Errorf("%s: %d %s", bad, r.status, r.body)
		}
	}
}
