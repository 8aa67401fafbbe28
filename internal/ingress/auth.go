package ingress

import (
	"context"
	"errors"
	"net/http"
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
// 401, so a caller learns nothing about which keys exist.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || !apikey.LooksValid(strings.TrimSpace(secret)) {
			unauthorized(w)
			return
		}
		digest := apikey.Digest(strings.TrimSpace(secret))
		p, ok := a.keys.get(digest)
		if !ok {
			var err error
			p, err = a.store.Authenticate(r.Context(), digest)
			if errors.Is(err, store.ErrNotFound) {
				unauthorized(w)
				return
			}
			if err != nil {
				a.log.Error("authentication failed", "err", err)
				apierror.Write(w, apierror.Unavailable)
				return
			}
			a.keys.put(digest, p)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
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
// still be accepted. Only successes are cached: a key that was just created works at once.
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
