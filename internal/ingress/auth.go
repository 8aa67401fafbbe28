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
	"github.com/heraldhq/herald/internal/store"
)

type principalKey struct{}

func principalOf(ctx context.Context) store.Principal {
	p, _ := ctx.Value(principalKey{}).(store.Principal)
	return p
}

// authenticate resolves the Bearer key to its tenant. Only active keys pass; every other case is the same
// 401, so a caller learns nothing about which keys exist. A client address that has sent MaxAuthFailures
// requests without a valid key this window is answered 429 before its key is looked at (authlimit.go).
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		client := clientKey(a.opts.TrustedProxies.ClientAddr(r))
		if left, blocked := a.failures.blocked(client, now); blocked {
			authResults.WithLabelValues("throttled").Inc()
			apierror.Write(w, &apierror.Error{Code: apierror.RateLimited.Code, Status: apierror.RateLimited.Status,
				Message: "too many requests without a valid API key from this address; retry later", RetryAfter: left})
			return
		}
		secret, ok := bearerKey(r.Header.Get("Authorization"))
		if !ok {
			a.refuse(w, client, now, "malformed")
			return
		}
		digest := apikey.Digest(secret)
		p, ok := a.keys.get(digest)
		switch {
		case ok:
			authResults.WithLabelValues("cached").Inc()
		case a.unknownKeys.has(digest, now):
			a.refuse(w, client, now, "unknown_cached")
			return
		default:
			var err error
			a.authQueries.Add(1)
			p, err = a.store.Authenticate(r.Context(), digest)
			if errors.Is(err, store.ErrNotFound) {
				a.unknownKeys.add(digest, now)
				a.refuse(w, client, now, "unknown")
				return
			}
			if err != nil {
				a.log.Error("authentication failed", "err", err)
				apierror.Write(w, apierror.Unavailable)
				return
			}
			authResults.WithLabelValues("looked_up").Inc()
			a.keys.put(digest, p)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
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

// refuse answers 401 and counts the failure against the client address.
func (a *API) refuse(w http.ResponseWriter, client netip.Prefix, now time.Time, result string) {
	authResults.WithLabelValues(result).Inc()
	if a.failures.fail(client, now) {
		a.log.Warn("client address throttled: too many requests without a valid API key",
			"client", client.String(), "failures", a.failures.max, "window", a.failures.window)
	}
	unauthorized(w)
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
