package ingress_test

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/openapitest"
)

// TestResponsesMatchTheOpenAPIDocument drives every /v1 operation through each documented outcome and
// validates the real responses against docs/openapi.yaml.
func TestResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t)
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr("Acme Shop"))
	e.link("acme", "u1", 1001, "verified")
	e.link("acme", "u2", 1002, "")

	check := func(method, template string, r response, want int) {
		t.Helper()
		if r.status != want {
			t.Fatalf("%s %s: status %d, want %d: %s", method, template, r.status, want, r.body)
		}
		if err := doc.ValidateResponse(method, template, r.status, r.header.Get("Content-Type"), r.body); err != nil {
			t.Error(err)
		}
	}
	sent := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "priority": 7})
	check("POST", "/v1/send", sent, 202)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, `{`), 400)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": strings.Repeat("x", 4096)}), 400)
	check("POST", "/v1/send", e.do("POST", "/v1/send", "", nil), 401)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u2", "message": "hi"}), 409)
	e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "a"}, "Idempotency-Key", "k")
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "b"}, "Idempotency-Key", "k"), 409)

	id := sent.json(t)["tracking_id"].(string)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+id, key, nil), 200)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+id, "", nil), 401)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/nope", key, nil), 404)

	check("POST", "/v1/link-token", e.do("POST", "/v1/link-token", key, map[string]any{"user_id": "u3"}), 201)
	check("POST", "/v1/link-token", e.do("POST", "/v1/link-token", key, `{"user_id":1}`), 400)
	check("POST", "/v1/link-token", e.do("POST", "/v1/link-token", "", nil), 401)

	check("POST", "/v1/phone-verification/start", e.do("POST", "/v1/phone-verification/start", key, map[string]any{"user_id": "u2"}), 202)
	check("POST", "/v1/phone-verification/start", e.do("POST", "/v1/phone-verification/start", key, `[]`), 400)
	check("POST", "/v1/phone-verification/start", e.do("POST", "/v1/phone-verification/start", "", nil), 401)
	check("POST", "/v1/phone-verification/start", e.do("POST", "/v1/phone-verification/start", key, map[string]any{"user_id": "u3"}), 404)

	for _, u := range []string{"u1", "u2", "u3"} { // verified, pending, unverified
		check("GET", "/v1/phone-verification/status/{user_id}", e.do("GET", "/v1/phone-verification/status/"+u, key, nil), 200)
	}
	check("GET", "/v1/phone-verification/status/{user_id}", e.do("GET", "/v1/phone-verification/status/u1", "", nil), 401)
	check("GET", "/v1/phone-verification/status/{user_id}", e.do("GET", "/v1/phone-verification/status/nobody", key, nil), 404)

	// v1 extensions: send options, batch, list, cancel, users.
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	scheduled := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "later", "send_at": later,
		"expires_at": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), "metadata": map[string]string{"order": "42"}})
	check("POST", "/v1/send", scheduled, 202)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "metadata": []string{}}), 400)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+scheduled.json(t)["tracking_id"].(string), key, nil), 200)

	batch := map[string]any{"notifications": []any{
		map[string]any{"user_id": "u1", "message": "one"},
		map[string]any{"user_id": "u1", "message": "two", "send_at": later},
		map[string]any{"user_id": "u2", "message": "ungated"},
		map[string]any{"user_id": "u1", "message": strings.Repeat("x", 4096)},
		map[string]any{"user_id": "u1"},
	}}
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, batch), 200)
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []any{}}), 400)
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", "", nil), 401)
	e.do("POST", "/v1/send/batch", key, batch, "Idempotency-Key", "b")
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []any{map[string]any{"user_id": "u1", "message": "x"}}}, "Idempotency-Key", "b"), 409)

	page := e.do("GET", "/v1/notifications?limit=2", key, nil)
	check("GET", "/v1/notifications", page, 200)
	check("GET", "/v1/notifications", e.do("GET", "/v1/notifications?cursor="+page.json(t)["next_cursor"].(string)+"&limit=2", key, nil), 200)
	check("GET", "/v1/notifications", e.do("GET", "/v1/notifications?status=nope", key, nil), 400)
	check("GET", "/v1/notifications", e.do("GET", "/v1/notifications", "", nil), 401)

	cancelled := e.do("POST", "/v1/notifications/"+scheduled.json(t)["tracking_id"].(string)+"/cancel", key, nil)
	check("POST", "/v1/notifications/{tracking_id}/cancel", cancelled, 200)
	check("POST", "/v1/notifications/{tracking_id}/cancel", e.do("POST", "/v1/notifications/"+scheduled.json(t)["tracking_id"].(string)+"/cancel", key, nil), 409)
	check("POST", "/v1/notifications/{tracking_id}/cancel", e.do("POST", "/v1/notifications/"+id+"/cancel", "", nil), 401)
	check("POST", "/v1/notifications/{tracking_id}/cancel", e.do("POST", "/v1/notifications/nope/cancel", key, nil), 404)

	for _, u := range []string{"u1", "u2", "u3"} { // verified, pending, unverified (never linked)
		check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/"+u, key, nil), 200)
	}
	check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/u1", "", nil), 401)
	check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/nobody", key, nil), 404)
	check("DELETE", "/v1/users/{user_id}", e.do("DELETE", "/v1/users/u3", key, nil), 204)
	check("DELETE", "/v1/users/{user_id}", e.do("DELETE", "/v1/users/u3", key, nil), 404)
	check("DELETE", "/v1/users/{user_id}", e.do("DELETE", "/v1/users/u3", "", nil), 401)

	e.broker.Close()
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}), 502)
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, batch), 200) // queue_error per item

	// Every /v1 operation of the document was exercised.
	for _, op := range doc.Operations() {
		if !strings.Contains(op, " /v1/") {
			continue
		}
		found := false
		for seen := range doc.Seen {
			if strings.HasPrefix(seen, op+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("operation %s is documented but no test response was validated against it", op)
		}
	}
}
