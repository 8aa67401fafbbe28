package ingress_test

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/server"
)

// behindProxy is a tenant API whose clients arrive through a load balancer on loopback: the client address
// is the X-Forwarded-For hop the balancer adds.
func behindProxy(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, func(o *ingress.Options) {
		o.TrustedProxies = server.TrustedProxies{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
}

func from(client string) []string { return []string{"X-Forwarded-For", client} }

const statusPath = "/v1/status/00000000-0000-0000-0000-000000000000"

// Repeated invalid keys cost no PostgreSQL query each: an unknown key is remembered briefly.
func TestRepeatedInvalidKeysCostNoQueryEach(t *testing.T) {
	t.Parallel()
	e := behindProxy(t)
	bad := apikey.New().Secret // well-formed, never stored
	for i := range 15 {
		// One client per request, so the address throttle is not what spares the database.
		r := e.do("GET", statusPath, bad, nil, from("198.51.100."+strconv.Itoa(i+1))...)
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
	}
	if n := ingress.AuthQueries(e.api); n != 1 {
		t.Errorf("15 requests with one invalid key made %d key lookups in PostgreSQL, want 1", n)
	}
}

// A key created after it was refused works within the negative cache's bound (1 s), not later.
func TestANewKeyWorksWithinTheNegativeCacheBound(t *testing.T) {
	t.Parallel()
	e := behindProxy(t)
	if err := e.st.CreateTenant(context.Background(), "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	k := apikey.New()
	expectError(t, e.do("GET", statusPath, k.Secret, nil), http.StatusUnauthorized, "unauthorized")
	if _, err := e.st.InsertAPIKey(context.Background(), "acme", k.Digest, k.Prefix, nil, nil); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	for i := 0; ; i++ {
		r := e.do("GET", statusPath, k.Secret, nil, from("198.51.100."+strconv.Itoa(i%250+1))...)
		if r.status == http.StatusNotFound { // authenticated: the notification is unknown
			break
		}
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
		if time.Since(created) > ingress.NegativeCacheTTL+500*time.Millisecond {
			t.Fatalf("a new key is still refused %s after it was created; the bound is %s", time.Since(created), ingress.NegativeCacheTTL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waited := time.Since(created); waited > ingress.NegativeCacheTTL+500*time.Millisecond {
		t.Errorf("the new key worked after %s, want within %s", waited, ingress.NegativeCacheTTL)
	}
}

// More than 20 invalid keys from one client address in a minute: 429 rate_limited with Retry-After for the
// rest of that minute, for every invalid key of that address (missing, malformed or unknown) and for no
// other address. A valid key from it still passes (auththrottle_test.go).
func TestAClientAddressSendingMoreThan20InvalidKeysIsThrottled(t *testing.T) {
	t.Parallel()
	e := behindProxy(t)
	good := e.tenant("acme", "Acme", nil)
	attacker, bystander := "203.0.113.7", "198.51.100.20"
	for i := range ingress.MaxAuthFailures {
		r := e.do("GET", statusPath, apikey.New().Secret, nil, from(attacker)...)
		if r.status != http.StatusUnauthorized {
			t.Fatalf("invalid key %d of the minute: status %d, want 401", i+1, r.status)
		}
	}
	before := ingress.AuthQueries(e.api)
	for _, key := range []string{apikey.New().Secret, "malformed", ""} {
		r := e.do("GET", statusPath, key, nil, from(attacker)...)
		expectError(t, r, http.StatusTooManyRequests, "rate_limited")
		secs, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 {
			t.Errorf("Retry-After %q, want whole seconds 1..60", r.header.Get("Retry-After"))
		}
	}
	// The unknown key may be looked up within the budget for throttled addresses; nothing else is.
	if n := ingress.AuthQueries(e.api) - before; n > 1 {
		t.Errorf("a throttled address cost %d key lookups for one unknown key", n)
	}
	if r := e.do("GET", statusPath, good, nil, from(attacker)...); r.status != http.StatusNotFound {
		t.Errorf("a valid key from the throttled address: status %d, want 404 (authenticated)", r.status)
	}
	// Another client behind the same balancer is unaffected.
	expectError(t, e.do("GET", statusPath, apikey.New().Secret, nil, from(bystander)...), http.StatusUnauthorized, "unauthorized")
	if r := e.do("GET", statusPath, good, nil, from(bystander)...); r.status != http.StatusNotFound {
		t.Errorf("another client with a valid key: status %d, want 404 (authenticated)", r.status)
	}
	// Without a trusted proxy, X-Forwarded-For is the client's own claim and changes nothing.
	direct := newEnv(t)
	for i := range ingress.MaxAuthFailures {
		direct.do("GET", statusPath, apikey.New().Secret, nil, from("192.0.2."+strconv.Itoa(i+1))...)
	}
	expectError(t, direct.do("GET", statusPath, apikey.New().Secret, nil, from("192.0.2.200")...), http.StatusTooManyRequests, "rate_limited")
}

// IPv6 clients are counted by /64: a client can pick any address of its prefix.
func TestIPv6ClientsAreThrottledByPrefix(t *testing.T) {
	t.Parallel()
	e := behindProxy(t)
	for i := range ingress.MaxAuthFailures {
		e.do("GET", statusPath, apikey.New().Secret, nil, from("2001:db8:5:6::"+strconv.FormatInt(int64(i+1), 16))...)
	}
	expectError(t, e.do("GET", statusPath, apikey.New().Secret, nil, from("2001:db8:5:6:ffff::1")...), http.StatusTooManyRequests, "rate_limited")
	expectError(t, e.do("GET", statusPath, apikey.New().Secret, nil, from("2001:db8:5:7::1")...), http.StatusUnauthorized, "unauthorized")
}
