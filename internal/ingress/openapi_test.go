package ingress_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/openapitest"
)

const uuidLike = "00000000-0000-0000-0000-000000000000"

// TestResponsesMatchTheOpenAPIDocument drives every /v1 operation through each documented outcome and
// validates the real responses against docs/openapi.yaml.
func TestResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t)
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr("Acme Shop"))
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	e.fx.User(e.t, "acme", "u2", fixture.LinkedTo(1002))

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
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, `{"message":"`+strings.Repeat("x", 70000)+`"}`), 413)
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

	doc200 := e.do("GET", "/v1/openapi.yaml", "", nil)
	check("GET", "/v1/openapi.yaml", doc200, 200)
	check("GET", "/v1/openapi.yaml", e.do("GET", "/v1/openapi.yaml", "", nil, "If-None-Match", doc200.header.Get("ETag")), 304)

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

	// §13: a message delivered now may be deleted, once.
	replaced := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "packed", "replace_key": "order-42"})
	check("POST", "/v1/send", replaced, 202)
	rid := replaced.json(t)["tracking_id"].(string)
	check("DELETE", "/v1/notifications/{tracking_id}/message", e.do("DELETE", "/v1/notifications/"+rid+"/message", key, nil), 409)
	e.delivered(rid, 0)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+rid, key, nil), 200)
	check("DELETE", "/v1/notifications/{tracking_id}/message", e.do("DELETE", "/v1/notifications/"+rid+"/message", key, nil), 202)
	check("DELETE", "/v1/notifications/{tracking_id}/message", e.do("DELETE", "/v1/notifications/"+rid+"/message", "", nil), 401)
	check("DELETE", "/v1/notifications/{tracking_id}/message", e.do("DELETE", "/v1/notifications/nope/message", key, nil), 404)

	for _, u := range []string{"u1", "u2", "u3"} { // verified, pending, unverified (never linked)
		check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/"+u, key, nil), 200)
	}
	check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/u1", "", nil), 401)
	check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/nobody", key, nil), 404)
	// §9: the category of a send, opt-outs, the refusal at the door, the user's new fields.
	promo := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "sale", "category": "promo"})
	check("POST", "/v1/send", promo, 202)
	optOut := "/v1/users/{user_id}/opt-out"
	check("POST", optOut, e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}), 204)
	check("POST", optOut, e.do("POST", "/v1/users/u1/opt-out", key, map[string]any{"category": "Promo"}), 400)
	check("POST", optOut, e.do("POST", "/v1/users/u1/opt-out", "", nil), 401)
	check("POST", optOut, e.do("POST", "/v1/users/nobody/opt-out", key, nil), 404)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+promo.json(t)["tracking_id"].(string), key, nil), 200) // blocked, opted out
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "sale", "category": "promo"}), 409)
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []any{
		map[string]any{"user_id": "u1", "message": "sale", "category": "promo"},
		map[string]any{"user_id": "u1", "message": "news", "category": "news"},
	}}), 200)
	check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/u1", key, nil), 200)
	check("DELETE", optOut, e.do("DELETE", "/v1/users/u1/opt-out", key, map[string]any{"category": "promo"}), 204)
	if _, err := e.st.OptOut(context.Background(), "acme", "u1", "news", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	check("DELETE", optOut, e.do("DELETE", "/v1/users/u1/opt-out", key, map[string]any{"category": "news"}), 409)
	check("DELETE", optOut, e.do("DELETE", "/v1/users/u1/opt-out", key, `{"category":1}`), 400)
	check("DELETE", optOut, e.do("DELETE", "/v1/users/u1/opt-out", "", nil), 401)
	check("DELETE", optOut, e.do("DELETE", "/v1/users/nobody/opt-out", key, nil), 404)

	check("DELETE", "/v1/users/{user_id}", e.do("DELETE", "/v1/users/u3", key, nil), 204)
	check("DELETE", "/v1/users/{user_id}", e.do("DELETE", "/v1/users/u3", key, nil), 404)
	check("DELETE", "/v1/users/{user_id}", e.do("DELETE", "/v1/users/u3", "", nil), 401)

	cb := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/herald", "events": []string{"notification.delivered", "ping"}})
	check("POST", "/v1/callbacks", cb, 201)
	cbID := cb.json(t)["id"].(string)
	check("POST", "/v1/callbacks", e.do("POST", "/v1/callbacks", key, map[string]any{"url": "http://hooks.example.com/"}), 400)
	check("POST", "/v1/callbacks", e.do("POST", "/v1/callbacks", "", nil), 401)
	for i := 0; i < 4; i++ {
		e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("x", i+1)})
	}
	check("POST", "/v1/callbacks", e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/six"}), 409)
	e.fx.CallbackOutcomes(t, cbID, time.Now(), time.Now())
	check("GET", "/v1/callbacks", e.do("GET", "/v1/callbacks", key, nil), 200)
	check("GET", "/v1/callbacks", e.do("GET", "/v1/callbacks", "", nil), 401)
	check("POST", "/v1/callbacks/{id}/rotate-secret", e.do("POST", "/v1/callbacks/"+cbID+"/rotate-secret", key, nil), 200)
	check("POST", "/v1/callbacks/{id}/rotate-secret", e.do("POST", "/v1/callbacks/"+cbID+"/rotate-secret", "", nil), 401)
	check("POST", "/v1/callbacks/{id}/rotate-secret", e.do("POST", "/v1/callbacks/nope/rotate-secret", key, nil), 404)
	check("POST", "/v1/callbacks/{id}/test", e.do("POST", "/v1/callbacks/"+cbID+"/test", key, nil), 202)
	check("POST", "/v1/callbacks/{id}/test", e.do("POST", "/v1/callbacks/"+cbID+"/test", "", nil), 401)
	check("POST", "/v1/callbacks/{id}/test", e.do("POST", "/v1/callbacks/"+uuidLike+"/test", key, nil), 404)
	check("DELETE", "/v1/callbacks/{id}", e.do("DELETE", "/v1/callbacks/"+cbID, key, nil), 204)
	check("DELETE", "/v1/callbacks/{id}", e.do("DELETE", "/v1/callbacks/"+cbID, "", nil), 401)
	check("DELETE", "/v1/callbacks/{id}", e.do("DELETE", "/v1/callbacks/"+cbID, key, nil), 404)

	// Templates and locales (§12).
	tpl := `{"format": "html", "default_locale": "en", "locales": {"en": {"message": "<b>{{ n }}</b>", "buttons": [[{"text": "Go", "url": "https://x.example/{{ n }}"}]]}, "de": {"message": "{{ n }}!"}}}`
	check("PUT", "/v1/templates/{name}", e.do("PUT", "/v1/templates/hello", key, tpl), 201)
	check("PUT", "/v1/templates/{name}", e.do("PUT", "/v1/templates/hello", key, tpl), 200)
	check("PUT", "/v1/templates/{name}", e.do("PUT", "/v1/templates/hello", key, `{"default_locale": "en", "locales": {"en": {"message": "{{ x"}}}`), 400)
	check("PUT", "/v1/templates/{name}", e.do("PUT", "/v1/templates/hello", "", nil), 401)
	check("GET", "/v1/templates/{name}", e.do("GET", "/v1/templates/hello", key, nil), 200)
	check("GET", "/v1/templates/{name}", e.do("GET", "/v1/templates/nope", key, nil), 404)
	check("GET", "/v1/templates/{name}/versions/{version}", e.do("GET", "/v1/templates/hello/versions/1", key, nil), 200)
	check("GET", "/v1/templates/{name}/versions/{version}", e.do("GET", "/v1/templates/hello/versions/2", key, nil), 404)
	check("GET", "/v1/templates", e.do("GET", "/v1/templates", key, nil), 200)
	check("GET", "/v1/templates", e.do("GET", "/v1/templates?limit=0", key, nil), 400)
	check("POST", "/v1/templates/{name}/preview", e.do("POST", "/v1/templates/hello/preview", key, `{"data": {"n": 1}, "locale": "de"}`), 200)
	check("POST", "/v1/templates/{name}/preview", e.do("POST", "/v1/templates/hello/preview", key, `{"data": {}}`), 400)
	check("POST", "/v1/templates/{name}/preview", e.do("POST", "/v1/templates/nope/preview", key, `{}`), 404)
	templated := e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "hello", "data": {"n": 1}}`)
	check("POST", "/v1/send", templated, 202)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+templated.json(t)["tracking_id"].(string), key, nil), 200)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, `{"user_id": "u1", "template": "nope"}`), 404)
	check("PATCH", "/v1/users/{user_id}", e.do("PATCH", "/v1/users/u1", key, `{"locale": "de", "time_zone": "Europe/Berlin"}`), 200)
	check("PATCH", "/v1/users/{user_id}", e.do("PATCH", "/v1/users/u1", key, `{"time_zone": "Nowhere/Else"}`), 400)
	check("GET", "/v1/users/{user_id}", e.do("GET", "/v1/users/u1", key, nil), 200)
	check("DELETE", "/v1/templates/{name}", e.do("DELETE", "/v1/templates/hello", key, nil), 204)
	check("DELETE", "/v1/templates/{name}", e.do("DELETE", "/v1/templates/hello", key, nil), 404)

	check("GET", "/v1/usage", e.do("GET", "/v1/usage", key, nil), 200)
	check("GET", "/v1/usage", e.do("GET", "/v1/usage?granularity=hour", key, nil), 200)
	check("GET", "/v1/usage", e.do("GET", "/v1/usage?granularity=week", key, nil), 400)
	check("GET", "/v1/usage", e.do("GET", "/v1/usage", "", nil), 401)

	audited := e.do("GET", "/v1/audit-events?limit=1", key, nil)
	check("GET", "/v1/audit-events", audited, 200)
	if audited.json(t)["next_cursor"] == nil {
		t.Fatalf("GET /v1/audit-events?limit=1 after the changes above: no next page: %s", audited.body)
	}
	check("GET", "/v1/audit-events", e.do("GET", "/v1/audit-events?type=template.saved,callback.created", key, nil), 200)
	check("GET", "/v1/audit-events", e.do("GET", "/v1/audit-events?type=user.blocked", key, nil), 400)

	// Over the tenant's limits: sends, then every other route.
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(1), Burst: int32p(1), RequestsPerSecond: int32p(1)})
	waitForLimits := func(method, path string, body any) response {
		t.Helper()
		// The authentication cache brings the new limits within its TTL.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if r := e.do(method, path, key, body); r.status == 429 {
				return r
			}
		}
		t.Fatalf("%s %s never answered 429 under a limit of 1/s", method, path)
		return response{}
	}
	check("POST", "/v1/send", waitForLimits("POST", "/v1/send", map[string]any{"user_id": "u1", "message": "x"}), 429)
	check("POST", "/v1/send/batch", waitForLimits("POST", "/v1/send/batch", map[string]any{"notifications": []any{map[string]any{"user_id": "u1", "message": "x"}}}), 429)
	check("GET", "/v1/notifications", waitForLimits("GET", "/v1/notifications", nil), 429)
	check("GET", "/v1/status/{tracking_id}", waitForLimits("GET", "/v1/status/"+id, nil), 429)
	check("GET", "/v1/callbacks", waitForLimits("GET", "/v1/callbacks", nil), 429)
	e.limit("acme", store.TenantLimits{})
	time.Sleep(time.Second) // the cache's TTL: the default limits are back

	e.broker.Close()
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}), 502)
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, batch), 200) // queue_error per item

	// Past 20 requests without a valid key, this client address is throttled (every test request comes from
	// loopback): the 429 of every /v1 operation.
	throttled := false
	for range 25 {
		if r := e.do("GET", "/v1/status/"+id, "", nil); r.status == 429 {
			check("GET", "/v1/status/{tracking_id}", r, 429)
			throttled = true
			break
		}
	}
	if !throttled {
		t.Error("25 requests without a key from one address were never answered 429")
	}

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

// GET /v1/openapi.yaml serves docs/openapi.yaml itself, without a key, with what a cache needs.
func TestTheAPIReferenceIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	onDisk, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/v1/openapi.yaml", "", nil)
	etag := r.header.Get("ETag")
	if r.status != 200 || !bytes.Equal(r.body, onDisk) {
		t.Fatalf("GET /v1/openapi.yaml without a key: %d, %d bytes; want 200 and docs/openapi.yaml (%d bytes)", r.status, len(r.body), len(onDisk))
	}
	if ct, cc := r.header.Get("Content-Type"), r.header.Get("Cache-Control"); ct != "application/yaml" || !strings.Contains(cc, "max-age=") || !strings.HasPrefix(etag, `"`) {
		t.Errorf("Content-Type %q, Cache-Control %q, ETag %q", ct, cc, etag)
	}
	if again := e.do("GET", "/v1/openapi.yaml", "", nil, "If-None-Match", etag); again.status != 304 || len(again.body) != 0 {
		t.Errorf("revalidating with the ETag: %d, %d bytes; want 304 and no body", again.status, len(again.body))
	}
	if other := e.do("GET", "/v1/openapi.yaml", "", nil, "If-None-Match", `"stale"`); other.status != 200 {
		t.Errorf("a stale ETag: %d, want 200", other.status)
	}
	// A wrong key does not matter: the document is public.
	if r := e.do("GET", "/v1/openapi.yaml", "hk_wrong", nil); r.status != 200 {
		t.Errorf("with a wrong key: %d", r.status)
	}
}

// Every operation that takes a JSON body answers a body of another media type 415, as the document says:
// each such operation lists 415 with the error's schema.
func TestEveryOperationWithABodyDocuments415(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t)
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr("Acme Shop"))
	params := regexp.MustCompile(`\{[a-z_]+\}`)
	n := 0
	for _, op := range doc.Operations() {
		method, path, _ := strings.Cut(op, " ")
		if !doc.HasRequestBody(method, path) || !strings.HasPrefix(path, "/v1/") {
			continue
		}
		n++
		r := e.do(method, params.ReplaceAllString(path, "x1"), key, `{}`, "Content-Type", "text/plain")
		if r.status != http.StatusUnsupportedMediaType {
			t.Errorf("%s with text/plain: %d, want 415", op, r.status)
			continue
		}
		if err := doc.ValidateResponse(method, path, r.status, r.header.Get("Content-Type"), r.body); err != nil {
			t.Error(err)
		}
	}
	if n < 8 {
		t.Errorf("%d operations with a body in the document; want every one the API has", n)
	}
}
