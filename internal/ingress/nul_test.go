package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/heraldhq/herald/internal/store"
)

// PostgreSQL's text and jsonb cannot hold U+0000. Every string of a request that reaches the database is
// checked at the door: a NUL is 400 invalid_request naming the field (404 for a path parameter, which then
// names nothing), never a 500 from PostgreSQL refusing the statement, and nothing is stored.
func TestNULIsRefusedAtTheDoorNamingTheField(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string // what the message must name
	}{
		{"send: message", "POST", "/v1/send", `{"user_id":"u1","message":"hi\u0000there"}`, 400, "message"},
		{"send: message of only a NUL", "POST", "/v1/send", `{"user_id":"u1","message":"\u0000"}`, 400, "message"},
		{"send: user_id", "POST", "/v1/send", `{"user_id":"u1\u0000","message":"hi"}`, 400, "user_id"},
		{"send: metadata value", "POST", "/v1/send", `{"user_id":"u1","message":"hi","metadata":{"order":"7\u0000"}}`, 400, `metadata value of "order"`},
		{"send: metadata key", "POST", "/v1/send", `{"user_id":"u1","message":"hi","metadata":{"or\u0000der":"7"}}`, 400, "metadata key"},
		{"link-token: user_id", "POST", "/v1/link-token", `{"user_id":"u\u0000"}`, 400, "user_id"},
		{"verification start: user_id", "POST", "/v1/phone-verification/start", `{"user_id":"u1\u0000"}`, 400, "user_id"},
		{"list: user_id filter", "GET", "/v1/notifications?user_id=u1%00", "", 400, "user_id"},
		{"callbacks: url", "POST", "/v1/callbacks", `{"url":"https://hooks.example.com/a\u0000b"}`, 400, "url"},
		{"callbacks: event", "POST", "/v1/callbacks", `{"url":"https://hooks.example.com/","events":["ping\u0000"]}`, 400, "event"},
		{"template: message", "PUT", "/v1/templates/nul", `{"default_locale":"en","locales":{"en":{"message":"a\u0000b"}}}`, 400, "message"},
		{"template: button", "PUT", "/v1/templates/nul", `{"default_locale":"en","locales":{"en":{"message":"a","buttons":[[{"text":"t\u0000","url":"https://x.example/"}]]}}}`, 400, "button"},
		{"template: locale tag", "PUT", "/v1/templates/nul", `{"default_locale":"e\u0000n","locales":{"e\u0000n":{"message":"a"}}}`, 400, "locale"},
		{"templated send: data", "POST", "/v1/send", `{"user_id":"u1","template":"nul-free","data":{"x":"a\u0000"}}`, 400, "data.x"},
		{"templated send: data unused", "POST", "/v1/send", `{"user_id":"u1","template":"nul-free","data":{"y":[1,{"a\u0000":"x"}]}}`, 400, "data.y[1] key"},
		{"preview: data", "POST", "/v1/templates/nul-free/preview", `{"data":{"x":"\u0000"}}`, 400, "data.x"},
		{"user settings: locale", "PATCH", "/v1/users/u1", `{"locale":"de\u0000"}`, 400, "locale"},
		{"path: user", "GET", "/v1/users/u1%00", "", 404, ""},
		{"path: user erased", "DELETE", "/v1/users/u1%00", "", 404, ""},
		{"path: verification status", "GET", "/v1/phone-verification/status/u1%00", "", 404, ""},
		{"path: tracking_id", "GET", "/v1/status/%00", "", 404, ""},
		{"path: callback id", "DELETE", "/v1/callbacks/%00", "", 404, ""},
	}
	e.putTemplate(key, "nul-free", `{"default_locale":"en","locales":{"en":{"message":"{{ x | default: 1 }}"}}}`, http.StatusCreated)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.body != "" {
				body = c.body
			}
			r := e.do(c.method, c.path, key, body)
			code := "invalid_request"
			if c.status == 404 {
				code = "not_found"
			}
			expectError(t, r, c.status, code)
			if msg, _ := r.json(t)["message"].(string); !strings.Contains(msg, c.field) {
				t.Errorf("message %q does not name %s", msg, c.field)
			}
		})
	}
	// In a batch, the item with a NUL is refused in its place; the others go ahead.
	r := e.do("POST", "/v1/send/batch", key, `{"notifications":[
		{"user_id":"u1","message":"one"},
		{"user_id":"u1","message":"t\u0000wo"},
		{"user_id":"u1","message":"three","metadata":{"k":"\u0000"}},
		{"user_id":"u1\u0000","message":"four"},
		{"user_id":"u1","message":"five"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	var out struct {
		Results []map[string]string `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || len(out.Results) != 5 {
		t.Fatalf("batch results: %s", r.body)
	}
	for i, want := range []string{"queued", "invalid_request", "invalid_request", "invalid_request", "queued"} {
		if got := out.Results[i]["status"] + out.Results[i]["error"]; got != want {
			t.Errorf("batch item %d: %v, want %s", i, out.Results[i], want)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 2 {
		t.Errorf("%d notifications stored, want the batch's 2 valid items only", n)
	}
	if n := e.countRows(`SELECT count(*) FROM link_tokens`) + e.countRows(`SELECT count(*) FROM callback_endpoints`); n != 0 {
		t.Errorf("%d link tokens and callback endpoints stored from requests holding a NUL", n)
	}
	if strings.Contains(e.logs.String(), "request failed") {
		t.Errorf("a request holding a NUL reached PostgreSQL and failed there:\n%s", e.logs)
	}
}

// The reproduction: one tenant's sends holding a NUL, beside another tenant's valid sends, round
// after round. Not one valid send may fail (they shared the outbox's INSERT, which PostgreSQL refused as a
// whole), and the NUL sends are 400.
func TestNULSendsDoNotFailAnotherTenantsSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := e.tenant("mallory", "Mallory", nil)
	good := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "mallory", "m1", 2001)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	const rounds, each = 5, 20
	for round := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		answers := map[string]int{} // "valid 202", "nul 400", … → how many
		for i := range each {
			wg.Go(func() {
				r := e.do("POST", "/v1/send", bad, fmt.Sprintf(`{"user_id":"m1","message":"round %d\u0000%d","metadata":{"k":"\u0000"}}`, round, i))
				mu.Lock()
				answers[fmt.Sprintf("nul %d", r.status)]++
				mu.Unlock()
			})
			wg.Go(func() {
				r := e.do("POST", "/v1/send", good, map[string]any{"user_id": "u1", "message": fmt.Sprintf("round %d, send %d", round, i)})
				mu.Lock()
				answers[fmt.Sprintf("valid %d", r.status)]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if answers["valid 202"] != each || answers["nul 400"] != each {
			t.Errorf("round %d: answers %v, want %d valid sends 202 and %d sends holding a NUL 400", round, answers, each, each)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE tenant_id = 'acme'`); n != rounds*each {
		t.Errorf("%d of acme's %d valid sends stored", n, rounds*each)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE tenant_id = 'mallory'`); n != 0 {
		t.Errorf("%d of mallory's sends holding a NUL stored", n)
	}
}

// A message of nothing but white space (every code point unicode.IsSpace) says nothing: 400, as an empty
// one is, for a send and for a batch item. Space around words is kept.
func TestBlankMessagesAreRefused(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	blanks := []string{" ", "   ", "\n\t", "\r\n", "\u00a0", "\u3000\u2003", "\u0085\v\f"}
	for _, m := range blanks {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": m})
		expectError(t, r, http.StatusBadRequest, "invalid_request")
		if msg, _ := r.json(t)["message"].(string); !strings.Contains(msg, "message must not be blank") {
			t.Errorf("message %q: %q, want it to say the message must not be blank", m, msg)
		}
	}
	items := []any{map[string]any{"user_id": "u1", "message": " hi "}}
	for _, m := range blanks {
		items = append(items, map[string]any{"user_id": "u1", "message": m})
	}
	r := e.do("POST", "/v1/send/batch", key, batchOf(items...))
	var out struct {
		Results []map[string]string `json:"results"`
	}
	if err := json.Unmarshal(r.body, &out); r.status != http.StatusOK || err != nil || len(out.Results) != len(items) {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	if out.Results[0]["status"] != "queued" {
		t.Errorf("a message with words between spaces: %v, want queued", out.Results[0])
	}
	for i, res := range out.Results[1:] {
		if res["error"] != "invalid_request" || !strings.Contains(res["message"], "blank") {
			t.Errorf("blank item %q: %v, want invalid_request", blanks[i], res)
		}
	}
	if rows := e.fx.NotificationRows(t); len(rows) != 1 || rows[0].Body != "A message from Acme\n hi " {
		t.Errorf("stored %+v; want the one valid message, its spaces kept", rows)
	}
}

// A batch whose every item is invalid stores nothing, so it asks nothing of the database: it is answered
// 200 with each refusal in its place without a statement (the tables the outbox writes are locked
// throughout, so one would wait, then fail), an Idempotency-Key on it keeps nothing, and it counts one unit
// against the tenant's requests per second, as every route that is not a send does.
func TestABatchOfOnlyInvalidItemsCostsARequestAndNoStatement(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{RequestsPerSecond: int32p(1)}) // burst twice the rate: 2
	invalid := batchOf(map[string]any{"user_id": "u1", "message": "  "}, map[string]any{"user_id": "u1"}, "not an object",
		map[string]any{"user_id": "u1", "message": "hi\u0000"})

	tx, err := e.st.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), `LOCK TABLE notifications, idempotency_keys IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := range 6 {
		r := e.do("POST", "/v1/send/batch", key, invalid, "Idempotency-Key", "only-invalid")
		if got := r.header.Get("RateLimit-Policy"); got != `"requests";q=2;w=2` {
			t.Errorf("batch %d: RateLimit-Policy %q, want the requests bucket's", i, got)
		}
		if r.status == http.StatusTooManyRequests {
			expectError(t, r, http.StatusTooManyRequests, "rate_limited")
			refused++
			continue
		}
		var out struct {
			Results []map[string]string `json:"results"`
		}
		if err := json.Unmarshal(r.body, &out); r.status != http.StatusOK || err != nil || len(out.Results) != 4 {
			t.Fatalf("batch %d: %d %s", i, r.status, r.body)
		}
		for j, res := range out.Results {
			if res["error"] != "invalid_request" || res["message"] == "" || len(res) != 2 {
				t.Errorf("batch %d, item %d: %v, want invalid_request in its place", i, j, res)
			}
		}
	}
	if refused < 2 {
		t.Errorf("%d of 6 batches of invalid items refused at 1 request/s (burst 2); want those beyond the burst", refused)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := e.countRows(`SELECT count(*) FROM idempotency_keys`) + e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d keys and notifications stored by batches of invalid items", n)
	}
}
