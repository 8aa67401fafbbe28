package ingress_test

import (
	"bytes"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

var secretForm = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)

// The whole life of an endpoint, as §7's table has it.
func TestCallbackEndpointsFromCreationToDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)

	created := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/herald"})
	if created.status != 201 {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	c := created.json(t)
	id, secret := c["id"].(string), c["secret"].(string)
	if !secretForm.MatchString(secret) {
		t.Errorf("secret %q is not whsec_ and the base64 of 32 bytes", secret)
	}
	if c["url"] != "https://hooks.example.com/herald" || len(c["events"].([]any)) != len(store.EventTypes) {
		t.Errorf("created %s: want the URL and every event", created.body)
	}
	if _, err := time.Parse(time.RFC3339, c["created_at"].(string)); err != nil {
		t.Errorf("created_at: %v", err)
	}
	// The database holds the secret sealed only: a dump cannot forge a signature.
	secrets := e.fx.CallbackSecrets(t, id)
	if len(secrets) != 1 {
		t.Fatalf("the endpoint holds %d secrets, want 1", len(secrets))
	}
	sealed := secrets[0].Sealed
	s, _ := signing.ParseSecret(secret)
	raw := []byte(strings.TrimPrefix(secret, "whsec_"))
	if bytes.Contains(sealed, raw) || bytes.Contains(sealed, []byte(secret)) {
		t.Error("the secret is stored in clear")
	}
	if opened, err := e.key.Open(sealed, id); err != nil || !opened.Equal(s) {
		t.Errorf("the sealed secret does not open to the one shown: %v", err)
	}

	list := e.do("GET", "/v1/callbacks", key, nil)
	if list.status != 200 || strings.Contains(string(list.body), "whsec_") || strings.Contains(string(list.body), `"secret"`) {
		t.Fatalf("list: %d %s (never a secret)", list.status, list.body)
	}
	items := list.json(t)["data"].([]any)
	if len(items) != 1 {
		t.Fatalf("list: %s", list.body)
	}
	item := items[0].(map[string]any)
	if item["id"] != id || item["last_success_at"] != nil || item["last_failure_at"] != nil {
		t.Errorf("listed %v", item)
	}

	rotated := e.do("POST", "/v1/callbacks/"+id+"/rotate-secret", key, nil)
	if rotated.status != 200 || !secretForm.MatchString(rotated.json(t)["secret"].(string)) || rotated.json(t)["secret"] == secret {
		t.Errorf("rotate: %d %s", rotated.status, rotated.body)
	}
	if n := e.countRows(`SELECT count(*) FROM callback_secrets WHERE endpoint_id = $1 AND (expires_at IS NULL OR expires_at > now() + interval '23 hours')`, id); n != 2 {
		t.Errorf("%d valid secrets after a rotation, want the new one and the old one for 24 hours", n)
	}

	if r := e.do("POST", "/v1/callbacks/"+id+"/test", key, nil); r.status != 202 || len(bytes.TrimSpace(r.body)) != 0 {
		t.Errorf("test: %d %s", r.status, r.body)
	}
	if n := e.countRows(`SELECT count(*) FROM callback_events WHERE endpoint_id = $1 AND type = 'ping'`, id); n != 1 {
		t.Errorf("%d ping events queued", n)
	}

	if r := e.do("DELETE", "/v1/callbacks/"+id, key, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, r := range []response{
		e.do("DELETE", "/v1/callbacks/"+id, key, nil),
		e.do("POST", "/v1/callbacks/"+id+"/rotate-secret", key, nil),
		e.do("POST", "/v1/callbacks/"+id+"/test", key, nil),
	} {
		expectError(t, r, 404, "not_found")
	}
	if n := e.countRows(`SELECT count(*) FROM callback_events`); n != 0 {
		t.Errorf("the deleted endpoint's events stayed: %d", n)
	}
}

func TestCallbackRequestsAreValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	for name, body := range map[string]any{
		"no url":              map[string]any{},
		"url not a string":    `{"url": 5}`,
		"http":                map[string]any{"url": "http://hooks.example.com/"},
		"relative":            map[string]any{"url": "/hooks"},
		"user and password":   map[string]any{"url": "https://u:p@hooks.example.com/"},
		"too long":            map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("a", 2048)},
		"a loopback address":  map[string]any{"url": "https://127.0.0.1/hooks"},
		"a private address":   map[string]any{"url": "https://10.0.0.7/hooks"},
		"cloud metadata":      map[string]any{"url": "https://169.254.169.254/latest/"},
		"an unknown event":    map[string]any{"url": "https://hooks.example.com/", "events": []string{"notification.delivered", "notification.read"}},
		"no events":           map[string]any{"url": "https://hooks.example.com/", "events": []string{}},
		"events not a list":   map[string]any{"url": "https://hooks.example.com/", "events": "ping"},
		"an unknown field":    map[string]any{"url": "https://hooks.example.com/", "secret": "whsec_mine"},
		"not an object":       `["https://hooks.example.com/"]`,
		"malformed JSON":      `{"url":`,
		"a fragment in a url": map[string]any{"url": "https://hooks.example.com/#x"},
		// Internal addresses in other spellings (egress.HostAddr), and ports other than 443 and 8443.
		"loopback in one number":      map[string]any{"url": "https://2130706433/hooks"},
		"loopback in hex and short":   map[string]any{"url": "https://0x7f.1/hooks"},
		"loopback in octal":           map[string]any{"url": "https://017700000001/hooks"},
		"loopback as IPv4-mapped":     map[string]any{"url": "https://[::ffff:127.0.0.1]/hooks"},
		"private through local NAT64": map[string]any{"url": "https://[64:ff9b:1::a00:1]/hooks"},
		"metadata through Teredo":     map[string]any{"url": "https://[2001:0:4136:e378:8000:63bf:5601:5601]/"},
		"ECS credentials":             map[string]any{"url": "https://169.254.170.2/v2/credentials"},
		"EKS pod identity over IPv6":  map[string]any{"url": "https://[fd00:ec2::23]/"},
		"CGNAT":                       map[string]any{"url": "https://100.64.0.1/hooks"},
		"localhost":                   map[string]any{"url": "https://localhost/hooks"},
		"a port other than 443, 8443": map[string]any{"url": "https://hooks.example.com:6379/"},
	} {
		t.Run(name, func(t *testing.T) {
			expectError(t, e.do("POST", "/v1/callbacks", key, body), 400, "invalid_request")
		})
	}
	if n := e.countRows(`SELECT count(*) FROM callback_endpoints`); n != 0 {
		t.Errorf("%d endpoints stored from invalid requests", n)
	}
	// Events are kept in the contract's order, without repeats; null means all.
	r := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/",
		"events": []string{"ping", "notification.failed", "ping", "user.linked"}})
	if got := r.json(t)["events"]; !slices.Equal(toStrings(got), []string{"notification.failed", "user.linked", "ping"}) {
		t.Errorf("events %v", got)
	}
	r = e.do("POST", "/v1/callbacks", key, `{"url":"https://hooks.example.com/all","events":null}`)
	if got := r.json(t)["events"]; !slices.Equal(toStrings(got), store.EventTypes) {
		t.Errorf("events null: %v", got)
	}
}

// POST /v1/callbacks/{id}/test answers 202 on every call, but an endpoint holds at most
// store.MaxPendingPings undelivered pings: a tenant cannot fill the outbox with test calls.
func TestTestCallsQueueAFewPingsAtMost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	id := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/h"}).json(t)["id"].(string)
	for i := range 10 {
		if r := e.do("POST", "/v1/callbacks/"+id+"/test", key, nil); r.status != 202 {
			t.Fatalf("test call %d: %d %s", i+1, r.status, r.body)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM callback_events WHERE endpoint_id = $1 AND type = 'ping'`, id); n != store.MaxPendingPings {
		t.Errorf("10 test calls queued %d pings, want %d", n, store.MaxPendingPings)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestATenantHasAtMostFiveEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	var ids []string
	for i := range 5 {
		r := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/" + string(rune('a'+i))})
		if r.status != 201 {
			t.Fatalf("endpoint %d: %d %s", i+1, r.status, r.body)
		}
		ids = append(ids, r.json(t)["id"].(string))
	}
	expectError(t, e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/f"}), 409, "limit_reached")
	// Another tenant has its own five.
	other := e.tenant("other", "Other", nil)
	if r := e.do("POST", "/v1/callbacks", other, map[string]any{"url": "https://hooks.example.com/o"}); r.status != 201 {
		t.Errorf("another tenant: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/callbacks/"+ids[0], key, nil); r.status != 204 {
		t.Fatal(r.status)
	}
	if r := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/f"}); r.status != 201 {
		t.Errorf("after a deletion: %d %s", r.status, r.body)
	}
}

// Another tenant's endpoint is unknown: 404 on every route that names it, absent from the list; a malformed
// id is 404 too.
func TestAnotherTenantsEndpointIsNotFoundOnEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	acme := e.tenant("acme", "Acme", nil)
	other := e.tenant("other", "Other", nil)
	id := e.do("POST", "/v1/callbacks", acme, map[string]any{"url": "https://hooks.example.com/"}).json(t)["id"].(string)
	for _, path := range []string{id, "not-a-uuid", "00000000-0000-0000-0000-000000000000"} {
		expectError(t, e.do("DELETE", "/v1/callbacks/"+path, other, nil), 404, "not_found")
		expectError(t, e.do("POST", "/v1/callbacks/"+path+"/rotate-secret", other, nil), 404, "not_found")
		expectError(t, e.do("POST", "/v1/callbacks/"+path+"/test", other, nil), 404, "not_found")
	}
	if r := e.do("GET", "/v1/callbacks", other, nil); string(bytes.TrimSpace(r.body)) != `{"data":[]}` {
		t.Errorf("another tenant lists %s", r.body)
	}
	if n := e.countRows(`SELECT count(*) FROM callback_events`); n != 0 {
		t.Errorf("%d events queued by another tenant", n)
	}
	for _, r := range []response{e.do("GET", "/v1/callbacks", "", nil), e.do("POST", "/v1/callbacks", "hk_nope", map[string]any{"url": "https://x.example/"})} {
		expectError(t, r, 401, "unauthorized")
	}
}

// The callback routes count against the tenant's requests per second, like every /v1 route but sends.
func TestCallbackRoutesCountAgainstTheTenantsRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	e.limit("acme", store.TenantLimits{RequestsPerSecond: int32p(1)})
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := e.do("GET", "/v1/callbacks", key, nil)
		if r.status == 429 {
			expectError(t, r, 429, "rate_limited")
			if r.header.Get("Retry-After") == "" || !strings.HasPrefix(r.header.Get("RateLimit"), `"requests"`) {
				t.Errorf("429 headers %v", r.header)
			}
			return
		}
	}
	t.Fatal("GET /v1/callbacks never answered 429 under a limit of 1 request per second")
}

// An ingress started without HERALD_CALLBACK_SECRET_KEY serves the API as before; the callback routes that
// make a secret answer 503 unavailable (nothing stored), and listing still works.
func TestWithoutACallbackKeyTheRoutesThatMakeASecretAreUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *ingress.Options) { o.CallbackKey = nil })
	key := e.tenant("acme", "Acme", nil)
	expectError(t, e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/herald"}),
		http.StatusServiceUnavailable, "unavailable")
	if n := e.countRows(`SELECT count(*) FROM callback_endpoints`); n != 0 {
		t.Errorf("%d endpoints stored", n)
	}
	if r := e.do("GET", "/v1/callbacks", key, nil); r.status != http.StatusOK {
		t.Errorf("listing without a key: %d %s", r.status, r.body)
	}
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}); r.status != http.StatusAccepted {
		t.Errorf("a send without a callback key: %d %s", r.status, r.body)
	}
}

// Registering a URL the tenant has registered already (a script run twice) answers the endpoint there is,
// 200 and without its secret, and makes no second one (which would get every event twice); with other
// events it is 409 endpoint_exists, naming the endpoint. Unknown events are listed readably.
func TestRegisteringAURLAgainAnswersItsEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	first := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/h"})
	if first.status != 201 {
		t.Fatalf("first registration: %d %s", first.status, first.body)
	}
	id := first.json(t)["id"].(string)
	for range 6 { // more than the 5 endpoints a tenant may have
		again := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/h"})
		if again.status != 200 {
			t.Fatalf("registering again: %d %s, want 200", again.status, again.body)
		}
		m := again.json(t)
		if m["id"] != id || m["secret"] != nil {
			t.Fatalf("registering again answered %s, want endpoint %s without its secret", again.body, id)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM callback_endpoints`); n != 1 {
		t.Errorf("%d endpoints, want 1", n)
	}
	other := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/h", "events": []string{"ping"}})
	expectError(t, other, 409, "endpoint_exists")
	if msg := other.json(t)["message"].(string); !strings.Contains(msg, id) {
		t.Errorf("message %q does not name endpoint %s", msg, id)
	}
	bad := e.do("POST", "/v1/callbacks", key, map[string]any{"url": "https://hooks.example.com/x", "events": []string{"nope"}})
	if msg := bad.json(t)["message"].(string); strings.Contains(msg, "[") || !strings.Contains(msg, "notification.delivered, notification.failed") {
		t.Errorf("message %q, want the events as a list of words", msg)
	}
}
