package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/ingress"
)

// A body over the limit is 413 (not 400), in the shared error body: invalid_request with status 413.
func TestOversizedBodiesAre413(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	pad := func(total int) string {
		head, tail := `{"user_id":"u1","message":"`, `"}`
		return head + strings.Repeat("a", total-len(head)-len(tail)) + tail
	}
	for _, path := range []string{"/v1/send", "/v1/link-token", "/v1/phone-verification/start"} {
		for _, size := range []int{ingress.MaxBodyBytes + 1, 4 * ingress.MaxBodyBytes} {
			r := e.do("POST", path, key, pad(size))
			expectError(t, r, http.StatusRequestEntityTooLarge, "invalid_request")
		}
	}
	// At the limit the body is read and judged on its merits (too long a message: 400).
	expectError(t, e.do("POST", "/v1/send", key, pad(ingress.MaxBodyBytes)), http.StatusBadRequest, "invalid_request")
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d notifications stored from oversized bodies", n)
	}
}

// A 401 says how to authenticate: WWW-Authenticate: Bearer (RFC 9110 §11.6.1, RFC 6750 §3).
func TestUnauthorizedAnswersCarryABearerChallenge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, key := range map[string]string{"no key": "", "a malformed key": "nope", "an unknown key": "hk_" + strings.Repeat("a", 43)} {
		r := e.do("GET", "/v1/status/00000000-0000-0000-0000-000000000000", key, nil)
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
		if c := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer") {
			t.Errorf("%s: WWW-Authenticate %q, want a Bearer challenge", name, c)
		}
	}
}

// A path parameter that is not valid UTF-8 cannot name anything: 404, never a 500 from PostgreSQL refusing
// the bytes (found by FuzzPathParams).
func TestPathParametersThatAreNotUTF8AreNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	for _, p := range []string{"/v1/phone-verification/status/%80", "/v1/phone-verification/status/u%C3", "/v1/phone-verification/status/%ED%A0%80"} {
		expectError(t, e.do("GET", p, key, nil), http.StatusNotFound, "not_found")
	}
}
