package ingress_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/testing/fixture"
)

func TestSendQueuesBrandedNotificationAndProducesEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme Developer", ptr("Acme Shop"))
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)

	cases := []struct {
		name     string
		priority any
		want     int
		topic    string
	}{
		{"default priority is 5 on the normal topic", nil, 5, "it.notifications.normal"},
		{"priority 6 stays normal", 6, 6, "it.notifications.normal"},
		{"priority 7 goes high", 7, 7, "it.notifications.high"},
		{"priority 9 goes high", 9, 9, "it.notifications.high"},
		{"priority 0 is normal", 0, 0, "it.notifications.normal"},
	}
	for _, c := range cases {
		body := map[string]any{"user_id": "u1", "message": "Your order shipped: " + c.name}
		if c.priority != nil {
			body["priority"] = c.priority
		}
		r := e.do("POST", "/v1/send", key, body)
		if r.status != http.StatusAccepted {
			t.Fatalf("%s: status %d %s", c.name, r.status, r.body)
		}
		m := r.json(t)
		if m["status"] != "queued" || len(m) != 2 {
			t.Fatalf("%s: response %s, want exactly tracking_id and status queued", c.name, r.body)
		}
		id, err := uuid.Parse(m["tracking_id"].(string))
		if err != nil {
			t.Fatalf("%s: tracking_id is not a UUID: %v", c.name, err)
		}
		row := e.fx.NotificationRow(t, id.String())
		status, bodyText, priority := row.Status, row.Body, row.Priority
		if status != "queued" || priority != c.want {
			t.Errorf("%s: stored status %s priority %d, want queued %d", c.name, status, priority, c.want)
		}
		if want := "A message from Acme Shop\nYour order shipped: " + c.name; bodyText != want {
			t.Errorf("%s: branded body %q, want %q", c.name, bodyText, want)
		}
		found := false
		for _, env := range e.envelopes(c.topic) {
			if env.TrackingID == id.String() {
				found = env.TenantID == "acme" && env.V == 1
			}
		}
		if !found {
			t.Errorf("%s: envelope for %s not on %s", c.name, id, c.topic)
		}
	}
}

func TestSendBrandsWithDeveloperNameWhenKeyHasNoLabel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme Developer", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d %s", r.status, r.body)
	}
	if body := e.fx.NotificationRow(t, r.json(t)["tracking_id"].(string)).Body; body != "A message from Acme Developer\nhi" {
		t.Errorf("body = %q", body)
	}
}

func TestSendRejectsInvalidRequests(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	long := strings.Repeat("é", 4097)
	cases := []struct {
		name, body string
	}{
		{"malformed JSON", `{"user_id": "u1", "message": `},
		{"not an object", `["u1", "hi"]`},
		{"a JSON string", `"hello"`},
		{"empty body", ``},
		{"missing user_id", `{"message":"hi"}`},
		{"missing message", `{"user_id":"u1"}`},
		{"user_id not a string", `{"user_id":12,"message":"hi"}`},
		{"message not a string", `{"user_id":"u1","message":12}`},
		{"empty user_id", `{"user_id":"","message":"hi"}`},
		{"user_id too long", fmt.Sprintf(`{"user_id":%q,"message":"hi"}`, strings.Repeat("u", 129))},
		{"user_id with control character", `{"user_id":"u\u0001","message":"hi"}`},
		{"empty message", `{"user_id":"u1","message":""}`},
		{"message over 4096 code points", fmt.Sprintf(`{"user_id":"u1","message":%q}`, long)},
		{"priority 5.5", `{"user_id":"u1","message":"hi","priority":5.5}`},
		{"priority string", `{"user_id":"u1","message":"hi","priority":"5"}`},
		{"priority boolean", `{"user_id":"u1","message":"hi","priority":true}`},
		{"priority 10", `{"user_id":"u1","message":"hi","priority":10}`},
		{"priority -1", `{"user_id":"u1","message":"hi","priority":-1}`},
		{"priority 5.0", `{"user_id":"u1","message":"hi","priority":5.0}`},
		{"priority 5e0", `{"user_id":"u1","message":"hi","priority":5e0}`},
		{"unknown field", `{"user_id":"u1","message":"hi","priorty":5}`},
		{"trailing data", `{"user_id":"u1","message":"hi"} {}`},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/send", key, c.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400; %s", c.name, r.status, r.body)
			continue
		}
		expectError(t, r, http.StatusBadRequest, "invalid_request")
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d notifications stored by invalid requests", n)
	}
	// What is wrong is said in plain words, not in the decoder's.
	for body, want := range map[string]string{
		`{"user_id":"u1","message":"hi","priorty":5}`: `unknown field "priorty": this request accepts only "user_id", "message"`,
		`{"user_id":12,"message":"hi"}`:               `field "user_id" must be a string`,
	} {
		m := e.do("POST", "/v1/send", key, body).json(t)
		if msg, _ := m["message"].(string); !strings.Contains(msg, want) || strings.Contains(msg, "json:") || strings.Contains(msg, "Go ") {
			t.Errorf("%s: message %q, want it to say %q", body, msg, want)
		}
	}
	// The caller's own request id comes back in the error body, to quote to an operator.
	if m := e.do("POST", "/v1/send", key, `{}`, "X-Request-Id", "order-7.retry_2").json(t); m["request_id"] != "order-7.retry_2" {
		t.Errorf("request_id %v, want the caller's X-Request-Id", m["request_id"])
	}
	// Content-Type other than JSON.
	r := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"hi"}`, "Content-Type", "text/plain")
	expectError(t, r, http.StatusUnsupportedMediaType, "invalid_request")
	// None at all: the same 415, as the simulator answers.
	expectError(t, e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"hi"}`, "Content-Type", ""), http.StatusUnsupportedMediaType, "invalid_request")
}

func TestSendAcceptsLimitsExactly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "A", ptr("L")) // branding adds "A message from L\n" = 17 code points
	user := strings.Repeat("ü", 128)
	e.fx.VerifiedUser(e.t, "acme", user, 1001)
	cases := []struct {
		name    string
		message string
		status  int
		code    string
	}{
		{"fits exactly after branding", strings.Repeat("€", 4096-17), http.StatusAccepted, ""},
		{"one over after branding", strings.Repeat("€", 4096-16), http.StatusBadRequest, "message_too_long_after_branding"},
		{"4096 before branding is too long after", strings.Repeat("€", 4096), http.StatusBadRequest, "message_too_long_after_branding"},
		{"emoji count as one code point each", strings.Repeat("😀", 4000), http.StatusAccepted, ""},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": user, "message": c.message, "priority": nil})
		if c.code != "" {
			expectError(t, r, c.status, c.code)
		} else if r.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, r.status, c.status, r.body)
		}
	}
}

func TestSendIsGatedOnVerifiedPhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	e.fx.User(e.t, "acme", "unlinked-user")
	e.fx.User(e.t, "acme", "linked-unverified", fixture.LinkedTo(1002))
	e.fx.User(e.t, "acme", "pending", fixture.LinkedTo(1003), fixture.Pending())
	e.fx.User(e.t, "acme", "expired", fixture.LinkedTo(1004), fixture.SessionExpired())
	e.fx.User(e.t, "acme", "verified-without-link", fixture.Verified())
	for _, user := range []string{"nobody", "unlinked-user", "linked-unverified", "pending", "expired", "verified-without-link"} {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": user, "message": "hi"})
		expectError(t, r, http.StatusConflict, "phone_unverified")
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d notifications stored for ungated users", n)
	}
}

func TestSendAnswersQueueErrorAndStoresNothingWhenTheBrokerIsDown(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.broker.Close()
	// Both paths: the batched one, and an idempotent send's own transaction.
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
	expectError(t, r, http.StatusBadGateway, "queue_error")
	r = e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}, "Idempotency-Key", "k-502")
	expectError(t, r, http.StatusBadGateway, "queue_error")
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("a failed enqueue left %d notification rows", n)
	}
	if n := e.countRows(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Errorf("a failed enqueue left %d idempotency records", n)
	}
}

func TestSendIdempotency(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	other := e.tenant("globex", "Globex", nil)
	e.fx.VerifiedUser(e.t, "globex", "u1", 1002)

	first := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"hi","priority":3}`, "Idempotency-Key", "order-1")
	if first.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	// The same request in another spelling is the same request.
	again := e.do("POST", "/v1/send", key, `{"priority":3, "message":"hi", "user_id":"u1"}`, "Idempotency-Key", "order-1")
	if again.status != http.StatusAccepted || again.json(t)["tracking_id"] != first.json(t)["tracking_id"] {
		t.Fatalf("replay: %d %s, want the first answer %s", again.status, again.body, first.body)
	}
	conflict := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"different"}`, "Idempotency-Key", "order-1")
	expectError(t, conflict, http.StatusConflict, "idempotency_conflict")
	// Keys are per tenant.
	globex := e.do("POST", "/v1/send", other, `{"user_id":"u1","message":"hi","priority":3}`, "Idempotency-Key", "order-1")
	if globex.status != http.StatusAccepted || globex.json(t)["tracking_id"] == first.json(t)["tracking_id"] {
		t.Fatalf("another tenant's identical key must be independent: %d %s", globex.status, globex.body)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE tenant_id = 'acme'`); n != 1 {
		t.Errorf("acme has %d notifications, want 1", n)
	}
	if n := len(e.envelopes("it.notifications.normal")); n != 2 {
		t.Errorf("%d envelopes produced, want 2 (one per tenant)", n)
	}
	bad := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"hi"}`, "Idempotency-Key", "has space")
	expectError(t, bad, http.StatusBadRequest, "invalid_request")

	// A key older than the window is forgotten.
	e.fx.IdempotencyKeysAged(t, 25*time.Hour)
	late := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"hi","priority":3}`, "Idempotency-Key", "order-1")
	if late.status != http.StatusAccepted || late.json(t)["tracking_id"] == first.json(t)["tracking_id"] {
		t.Fatalf("after 24 h the key must start a new send: %d %s", late.status, late.body)
	}
}

func TestSendIdempotencyUnderConcurrency(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"same"}`, "Idempotency-Key", "burst")
			if r.status == http.StatusAccepted {
				ids[i] = r.json(t)["tracking_id"].(string)
			} else {
				t.Errorf("concurrent duplicate: %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if ids[i] != ids[0] {
			t.Fatalf("concurrent duplicates got different tracking ids: %v", ids)
		}
	}
	if c := e.countRows(`SELECT count(*) FROM notifications`); c != 1 {
		t.Errorf("%d notifications for %d concurrent duplicates, want 1", c, n)
	}
	if c := len(e.envelopes("it.notifications.normal")); c != 1 {
		t.Errorf("%d envelopes for %d concurrent duplicates, want 1", c, n)
	}
}
