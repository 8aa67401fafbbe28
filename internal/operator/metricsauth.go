package operator

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authnclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsAuth is the FilterProvider of the operator's HTTPS /metrics: a scrape must carry a bearer token
// that the API server authenticates (a TokenReview) and authorizes for the request's verb on its path (a
// SubjectAccessReview of a non-resource URL, the ClusterRole herald-operator-metrics-reader). It answers
// like controller-runtime's filters.WithAuthenticationAndAuthorization — 401 without a valid token, 403
// when not allowed, 500 when the API server cannot be asked — with the same cache times (a token for a
// minute; an allow for 5 minutes, a deny for 30 seconds).
//
// Why not that filter: it builds on k8s.io/apiserver's delegating authenticator and authorizer, which link
// the apiserver's packages (CEL and gRPC among them) into herald. Their initialisation runs in every herald
// process, the ingress's included, and maps more of a larger binary into each (docs/benchmarks.md, "Less
// garbage, the default GOGC, no k8s.io/apiserver", has the sizes). Two API calls and two small caches are
// all the operator needs of them.
func metricsAuth(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authnclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	authz, err := authzclient.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	a := &scrapeAuth{
		tokens:    authn.TokenReviews(),
		access:    authz.SubjectAccessReviews(),
		users:     newTTLCache[authnv1.UserInfo](),
		decisions: newTTLCache[bool](),
		now:       time.Now,
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, msg, err := a.check(r)
			if code != http.StatusOK {
				if err != nil {
					log.Error(err, msg)
				}
				http.Error(w, msg, code)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// Cache times of scrapeAuth, controller-runtime's.
const (
	tokenTTL   = time.Minute
	allowTTL   = 5 * time.Minute
	denyTTL    = 30 * time.Second
	reviewWait = 10 * time.Second
)

type scrapeAuth struct {
	tokens    authnclient.TokenReviewInterface
	access    authzclient.SubjectAccessReviewInterface
	users     *ttlCache[authnv1.UserInfo] // sha256 of an authenticated token → its user
	decisions *ttlCache[bool]             // user, groups, verb and path → allowed
	now       func() time.Time
}

// check answers 200 when r may be served, else the status and message to answer (and, for a 500, why).
func (a *scrapeAuth) check(r *http.Request) (int, string, error) {
	// "Bearer <token>", the scheme in any case, as the API server reads it.
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return http.StatusUnauthorized, "Unauthorized", nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), reviewWait)
	defer cancel()

	sum := sha256.Sum256([]byte(token))
	tokenKey := string(sum[:])
	user, ok := a.users.get(tokenKey, a.now())
	if !ok {
		review, err := a.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return http.StatusInternalServerError, "Authentication failed", err
		}
		if !review.Status.Authenticated {
			// Not cached: only the API server's yes is remembered, so unknown tokens cannot fill the cache.
			return http.StatusUnauthorized, "Unauthorized", nil
		}
		user = review.Status.User
		a.users.put(tokenKey, user, a.now(), tokenTTL)
	}

	verb := strings.ToLower(r.Method)
	decisionKey := decisionKeyOf(user, verb, r.URL.Path)
	allowed, ok := a.decisions.get(decisionKey, a.now())
	if !ok {
		extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
		review, err := a.access.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: r.URL.Path, Verb: verb},
		}}, metav1.CreateOptions{})
		if err != nil {
			return http.StatusInternalServerError, fmt.Sprintf("Authorization for user %s failed", user.Username), err
		}
		allowed = review.Status.Allowed && !review.Status.Denied
		ttl := denyTTL
		if allowed {
			ttl = allowTTL
		}
		a.decisions.put(decisionKey, allowed, a.now(), ttl)
	}
	if !allowed {
		return http.StatusForbidden, fmt.Sprintf("Authorization denied for user %s", user.Username), nil
	}
	return http.StatusOK, "", nil
}

// decisionKeyOf names everything a SubjectAccessReview is asked about, the user's extra attributes too
// (a ServiceAccount token's pod and credential id), so that a cached decision answers only the same question.
func decisionKeyOf(user authnv1.UserInfo, verb, path string) string {
	parts := []string{user.Username, user.UID, strings.Join(user.Groups, "\x01"), verb, path}
	keys := slices.Sorted(maps.Keys(user.Extra))
	for _, k := range keys {
		parts = append(parts, k+"\x02"+strings.Join(user.Extra[k], "\x01"))
	}
	return strings.Join(parts, "\x00")
}

// ttlCache is a small map whose entries expire. It holds at most ttlCacheMax entries: a full cache drops
// its expired entries, then, if still full, everything (scrapers are few; this only bounds memory).
type ttlCache[V any] struct {
	mu sync.Mutex
	m  map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

const ttlCacheMax = 1024

func newTTLCache[V any]() *ttlCache[V] { return &ttlCache[V]{m: map[string]ttlEntry[V]{}} }

func (c *ttlCache[V]) get(k string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(k string, v V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= ttlCacheMax {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= ttlCacheMax {
			clear(c.m)
		}
	}
	c.m[k] = ttlEntry[V]{v: v, expires: now.Add(ttl)}
}
