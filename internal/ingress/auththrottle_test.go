package ingress_test

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/server"
)

// throttle sends MaxAuthFailures invalid keys from client, then checks that the next one is 429: the
// address is throttled. The check's key is malformed, so it costs no lookup.
func (e *env) throttle(client string) {
	e.t.Helper()
	for i := range ingress.MaxAuthFailures {
		if r := e.do("GET", statusPath, apikey.New().Secret, nil, from(client)...); r.status != http.StatusUnauthorized {
			e.t.Fatalf("invalid key %d of the minute from %s: status %d, want 401", i+1, client, r.status)
		}
	}
	expectError(e.t, e.do("GET", statusPath, "malformed", nil, from(client)...), http.StatusTooManyRequests, "rate_limited")
}

// Behind a load balancer that is not listed as a trusted proxy, every client shares one address: one
// client's invalid keys used to lock every tenant behind it out for a minute. Only what fails is
// throttled: a valid, active key passes from a throttled address — one the replica has just seen (its
// positive cache), and one it has never seen (looked up within the budget for throttled addresses).
func TestAValidKeyPassesFromAThrottledAddress(t *testing.T) {
	t.Parallel()
	e := behindProxy(t)
	used := e.tenant("acme", "Acme", nil)
	unseen := e.tenant("globex", "Globex", nil)
	const shared = "203.0.113.7" // the balancer's address, or a NAT's
	if r := e.do("GET", statusPath, used, nil, from(shared)...); r.status != http.StatusNotFound {
		t.Fatalf("a valid key before any failure: %d %s, want 404 (authenticated)", r.status, r.body)
	}
	e.throttle(shared)
	for name, key := range map[string]string{"a key in the positive cache": used, "a key never seen here": unseen} {
		if r := e.do("GET", statusPath, key, nil, from(shared)...); r.status != http.StatusNotFound {
			t.Errorf("%s from a throttled address: %d %s, want 404 (authenticated)", name, r.status, r.body)
		}
	}
	// Its invalid keys stay throttled, whatever their form, and a valid key changes nothing for them.
	for _, key := range []string{apikey.New().Secret, "malformed", ""} {
		expectError(t, e.do("GET", statusPath, key, nil, from(shared)...), http.StatusTooManyRequests, "rate_limited")
	}
}

// The hard part: a throttled address must not cost PostgreSQL a query per request by sending random,
// well-formed keys. Outside the positive cache and the set of keys recently valid on the replica, a
// throttled address's key is looked up only within a small per-replica budget; past it the answer is 429
// without a query. The residual: a valid key this replica has not seen valid recently, from a throttled
// address, while the budget is spent.
func TestAThrottledAddressCannotCostAQueryPerRandomKey(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, func(o *ingress.Options) {
		o.TrustedProxies = server.TrustedProxies{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		o.AuthCacheTTL = time.Nanosecond // no positive cache: every valid key is looked up
	})
	const budget = 5
	ingress.SetThrottledLookups(e.api, 0, budget) // never refills: the test counts exactly
	known := e.tenant("acme", "Acme", nil)
	fresh := e.tenant("globex", "Globex", nil)
	const shared, bystander = "203.0.113.7", "198.51.100.20"
	if r := e.do("GET", statusPath, known, nil, from(bystander)...); r.status != http.StatusNotFound {
		t.Fatalf("a valid key: %d %s, want 404", r.status, r.body)
	}
	e.throttle(shared)

	before := ingress.AuthQueries(e.api)
	for i := range 100 {
		r := e.do("GET", statusPath, apikey.New().Secret, nil, from(shared)...)
		expectError(t, r, http.StatusTooManyRequests, "rate_limited")
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("random key %d from a throttled address: 429 without Retry-After", i+1)
		}
	}
	if n := ingress.AuthQueries(e.api) - before; n != budget {
		t.Errorf("100 random keys from a throttled address cost %d key lookups, want the budget's %d", n, budget)
	}

	// A key valid here recently is looked up as usual, budget or not.
	before = ingress.AuthQueries(e.api)
	if r := e.do("GET", statusPath, known, nil, from(shared)...); r.status != http.StatusNotFound {
		t.Errorf("a recently valid key from a throttled address with the budget spent: %d %s, want 404", r.status, r.body)
	}
	if n := ingress.AuthQueries(e.api) - before; n != 1 {
		t.Errorf("a recently valid key cost %d lookups, want 1", n)
	}
	// The residual: a valid key this replica has never seen, from the throttled address, with the budget
	// spent, waits (429) — until it is used from elsewhere, or the budget refills.
	expectError(t, e.do("GET", statusPath, fresh, nil, from(shared)...), http.StatusTooManyRequests, "rate_limited")
	if r := e.do("GET", statusPath, fresh, nil, from(bystander)...); r.status != http.StatusNotFound {
		t.Fatalf("the new key from another address: %d %s, want 404", r.status, r.body)
	}
	if r := e.do("GET", statusPath, fresh, nil, from(shared)...); r.status != http.StatusNotFound {
		t.Errorf("the new key, once valid here, from the throttled address: %d %s, want 404", r.status, r.body)
	}

	// A revoked key loses its place among the recently valid at its first failed lookup: it cannot be
	// replayed for a query each.
	if _, err := e.st.RevokeAPIKeys(context.Background(), "acme", known[:apikey.PrefixLen]); err != nil {
		t.Fatal(err)
	}
	expectError(t, e.do("GET", statusPath, known, nil, from(shared)...), http.StatusTooManyRequests, "rate_limited")
	before = ingress.AuthQueries(e.api)
	for range 10 {
		expectError(t, e.do("GET", statusPath, known, nil, from(shared)...), http.StatusTooManyRequests, "rate_limited")
	}
	if n := ingress.AuthQueries(e.api) - before; n != 0 {
		t.Errorf("a revoked key replayed from a throttled address cost %d lookups, want 0", n)
	}
}

// The ingress cannot know whether a load balancer stands in front of it, but a request that carries
// X-Forwarded-For from a peer that is not a trusted proxy says so: it is logged as a warning, once.
func TestForwardedForFromAnUntrustedPeerIsWarnedOnce(t *testing.T) {
	t.Parallel()
	const warning = "X-Forwarded-For from a peer that is not a trusted proxy"
	count := func(e *env) int { return strings.Count(e.logs.String(), warning) }

	direct := newEnv(t) // HERALD_TRUSTED_PROXIES empty
	key := direct.tenant("acme", "Acme", nil)
	direct.do("GET", statusPath, key, nil)
	if n := count(direct); n != 0 {
		t.Fatalf("a request without X-Forwarded-For was warned about: %s", direct.logs.String())
	}
	for range 3 {
		direct.do("GET", statusPath, key, nil, from("198.51.100.1")...)
		direct.do("GET", statusPath, apikey.New().Secret, nil, from("198.51.100.2")...)
	}
	if n := count(direct); n != 1 {
		t.Errorf("requests through an untrusted proxy: the warning was logged %d times, want once:\n%s", n, direct.logs.String())
	}

	trusted := behindProxy(t)
	trusted.do("GET", statusPath, apikey.New().Secret, nil, from("198.51.100.1")...)
	if n := count(trusted); n != 0 {
		t.Errorf("X-Forwarded-For from a trusted proxy was warned about:\n%s", trusted.logs.String())
	}

	elsewhere := newEnvWith(t, func(o *ingress.Options) {
		o.TrustedProxies = server.TrustedProxies{netip.MustParsePrefix("10.0.0.0/8")} // not the test's loopback peer
	})
	elsewhere.do("GET", statusPath, apikey.New().Secret, nil, from("198.51.100.1")...)
	if n := count(elsewhere); n != 1 {
		t.Errorf("X-Forwarded-For from a peer outside HERALD_TRUSTED_PROXIES: warned %d times, want once", n)
	}
}
