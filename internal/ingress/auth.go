package ingress

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/store"
)

type principalKey struct{}

func principalOf(ctx context.Context) store.Principal {
	p, _ := ctx.Value(principalKey{}).(store.Principal)
	return p
}

// authenticate resolves the Bearer key to its tenant. Only active keys pass; every other case is the same
// 401, so a caller learns nothing about which keys exist. Only what fails is throttled (authlimit.go): a
// client address that has sent MaxAuthFailures requests without a valid key this window gets 429 for its
// invalid keys, while a valid, active key from it passes — at once when cached, after a lookup when this
// replica has seen it valid recently, and otherwise within the budget of lookups for throttled addresses.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		a.warnUntrustedForwarder(r)
		client := clientKey(a.opts.TrustedProxies.ClientAddr(r))
		left, throttled := a.failures.blocked(client, now)
		secret, ok := bearerKey(r.Header.Get("Authorization"))
		if !ok {
			a.refuse(w, client, now, "malformed", left)
			return
		}
		digest := apikey.Digest(secret)
		p, ok := a.keys.get(digest)
		switch {
		case ok:
			authResults.WithLabelValues("cached").Inc()
		case a.unknownKeys.has(digest, now):
			a.refuse(w, client, now, "unknown_cached", left)
			return
		default:
			if throttled && !a.recentKeys.has(digest) {
				// Neither known good nor known bad: a random key would cost a query per request.
				if wait, ok := a.throttledLookups.take(now); !ok {
					authResults.WithLabelValues("throttled").Inc()
					throttle(w, wait)
					return
				}
			}
			var err error
			a.authQueries.Add(1)
			p, err = a.store.Authenticate(r.Context(), digest)
			if errors.Is(err, store.ErrNotFound) {
				a.unknownKeys.add(digest, now)
				a.recentKeys.forget(digest)
				a.refuse(w, client, now, "unknown", left)
				return
			}
			if err != nil {
				a.log.Error("authentication failed", "err", err)
				apierror.Write(w, apierror.Unavailable)
				return
			}
			authResults.WithLabelValues("looked_up").Inc()
			a.keys.put(digest, p)
			a.recentKeys.add(digest, now)
		}
		// The key is the actor of every change the request makes (the audit trail, §15).
		ctx := audit.WithActor(context.WithValue(r.Context(), principalKey{}, p), audit.APIKey(p.KeyID))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// bearerKey reads the key of an Authorization header, "Bearer <key>" (the scheme in any case); ok is false
// unless the key has the shape of a Herald key, which spares a lookup for anything else.
func bearerKey(header string) (string, bool) {
	scheme, secret, ok := strings.Cut(header, " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !apikey.LooksValid(secret) {
		return "", false
	}
	return secret, true
}

// refuse counts a failed authentication against the client address and answers it: 401, or 429 when the
// address was throttled (left is what remains of its window).
func (a *API) refuse(w http.ResponseWriter, client netip.Prefix, now time.Time, result string, left time.Duration) {
	if a.failures.fail(client, now) {
		a.log.Warn("client address throttled: too many requests without a valid API key",
			"client", client.String(), "failures", a.failures.max, "window", a.failures.window)
	}
	if left > 0 {
		authResults.WithLabelValues("throttled").Inc()
		throttle(w, left)
		return
	}
	authResults.WithLabelValues(result).Inc()
	unauthorized(w)
}

func throttle(w http.ResponseWriter, retry time.Duration) {
	apierror.Write(w, apierror.RateLimited.With("too many requests without a valid API key from this address; retry later").After(retry))
}

// warnUntrustedForwarder logs, once per process, a request that carries X-Forwarded-For from a peer that
// is not a trusted proxy. The ingress cannot know at start whether a load balancer stands in front of it;
// such a request shows one does, and that every client behind it shares its address for the throttle.
func (a *API) warnUntrustedForwarder(r *http.Request) {
	if a.forwarderWarned.Load() {
		return
	}
	peer, ok := a.opts.TrustedProxies.UntrustedForwarder(r)
	if !ok || a.forwarderWarned.Swap(true) {
		return
	}
	a.log.Warn("a request carried X-Forwarded-For from a peer that is not a trusted proxy: if it is a load balancer, "+
		"list it in HERALD_TRUSTED_PROXIES (chart: ingress.trustedProxies), or every client behind it shares its address "+
		"and one client's invalid keys throttle authentication for all of them", "peer", peer.String())
}

// bearerChallenge tells a client without valid credentials how to authenticate (RFC 9110 §11.6.1, RFC 6750
// §3). It names no error: a missing key and a wrong one look the same.
const bearerChallenge = `Bearer realm="herald"`

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", bearerChallenge)
	apierror.Write(w, apierror.Unauthorized)
}

// keyCache remembers active keys for a short TTL so the hot path does not ask PostgreSQL on every request.
// Its TTL is the bound on how long a revoked, disabled or expired key, or a suspended tenant's key, can
// still be accepted. Failures are remembered apart, and for shorter (negativeCache, NegativeCacheTTL).
type keyCache struct {
	ttl time.Duration
	mu  sync.RWMutex
	m   map[[32]byte]cachedPrincipal
}

type cachedPrincipal struct {
	p     store.Principal
	until time.Time
}

const keyCacheMax = 10000

func newKeyCache(ttl time.Duration) *keyCache {
	return &keyCache{ttl: ttl, m: make(map[[32]byte]cachedPrincipal)}
}

func (c *keyCache) get(d [32]byte) (store.Principal, bool) {
	c.mu.RLock()
	e, ok := c.m[d]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.until) {
		return store.Principal{}, false
	}
	return e.p, true
}

func (c *keyCache) put(d [32]byte, p store.Principal) {
	until := time.Now().Add(c.ttl)
	if p.ExpiresAt != nil && p.ExpiresAt.Before(until) {
		until = *p.ExpiresAt
	}
	c.mu.Lock()
	if len(c.m) >= keyCacheMax {
		// Crude but bounded: a full cache starts over rather than growing with key-guessing traffic.
		clear(c.m)
	}
	c.m[d] = cachedPrincipal{p: p, until: until}
	c.mu.Unlock()
}
