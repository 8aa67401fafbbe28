package operator

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The filter against the real API server is TestMetricsAreServedOnlyToTokensAllowedToReadThem (envtest);
// these pin down what it asks the API server, and when it asks again, with the reviews answered in memory.

type fakeTokens struct {
	users map[string]string // token → username
	err   error
	calls int
}

func (f *fakeTokens) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := tr.DeepCopy()
	if name, ok := f.users[tr.Spec.Token]; ok {
		out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: name, Groups: []string{"scrapers"}}}
	}
	return out, nil
}

type fakeAccess struct {
	allowed map[string]bool // username → may get /metrics
	last    authzv1.SubjectAccessReviewSpec
	calls   int
}

func (f *fakeAccess) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.calls++
	f.last = sar.Spec
	out := sar.DeepCopy()
	out.Status.Allowed = f.allowed[sar.Spec.User] && sar.Spec.NonResourceAttributes != nil &&
		sar.Spec.NonResourceAttributes.Path == "/metrics" && sar.Spec.NonResourceAttributes.Verb == "get"
	return out, nil
}

func newTestAuth() (*scrapeAuth, *fakeTokens, *fakeAccess, *time.Time) {
	tokens := &fakeTokens{users: map[string]string{"reader-token": "reader", "stranger-token": "stranger"}}
	access := &fakeAccess{allowed: map[string]bool{"reader": true}}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	a := &scrapeAuth{tokens: tokens, access: access, users: newTTLCache[authnv1.UserInfo](), decisions: newTTLCache[bool](),
		now: func() time.Time { return now }}
	return a, tokens, access, &now
}

func scrapeWith(a *scrapeAuth, header string) int {
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if header != "" {
		r.Header.Set("Authorization", header)
	}
	code, _, _ := a.check(r)
	return code
}

func TestScrapeAuthAnswersByTheAPIServersReviews(t *testing.T) {
	a, tokens, access, _ := newTestAuth()
	for _, c := range []struct {
		header string
		want   int
	}{
		{"", http.StatusUnauthorized},
		{"Basic cmVhZGVyOng=", http.StatusUnauthorized},
		{"Bearer ", http.StatusUnauthorized},
		{"Bearer unknown", http.StatusUnauthorized},
		{"Bearer stranger-token", http.StatusForbidden},
		{"Bearer reader-token", http.StatusOK},
		{"bearer reader-token", http.StatusOK},
	} {
		if got := scrapeWith(a, c.header); got != c.want {
			t.Errorf("Authorization %q: %d, want %d", c.header, got, c.want)
		}
	}
	if access.last.User != "reader" || len(access.last.Groups) != 1 || access.last.Groups[0] != "scrapers" ||
		access.last.NonResourceAttributes == nil || access.last.NonResourceAttributes.Verb != "get" {
		t.Errorf("the last SubjectAccessReview asked %+v, want the reader's user and groups, get on /metrics", access.last)
	}
	tokens.err = errors.New("API server unavailable")
	if got := scrapeWith(a, "Bearer new-token"); got != http.StatusInternalServerError {
		t.Errorf("with the TokenReview failing: %d, want 500", got)
	}
}

func TestScrapeAuthCachesTheAPIServersYesForAMinuteAndItsNoForThirtySeconds(t *testing.T) {
	a, tokens, access, now := newTestAuth()
	for range 3 {
		if got := scrapeWith(a, "Bearer reader-token"); got != http.StatusOK {
			t.Fatalf("reader: %d", got)
		}
	}
	if tokens.calls != 1 || access.calls != 1 {
		t.Errorf("three scrapes of the reader asked %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", tokens.calls, access.calls)
	}

	// An unknown token is asked about every time: only the API server's yes is cached.
	tokens.calls = 0
	scrapeWith(a, "Bearer unknown")
	scrapeWith(a, "Bearer unknown")
	if tokens.calls != 2 {
		t.Errorf("two scrapes with an unknown token asked %d TokenReviews, want 2", tokens.calls)
	}

	// A deny holds for 30 s, an allow for 5 minutes, a token for one.
	access.calls = 0
	scrapeWith(a, "Bearer stranger-token")
	access.allowed["stranger"] = true
	if got := scrapeWith(a, "Bearer stranger-token"); got != http.StatusForbidden || access.calls != 1 {
		t.Errorf("stranger, newly bound, within 30 s: %d after %d reviews, want the cached 403 after 1", got, access.calls)
	}
	*now = now.Add(31 * time.Second)
	if got := scrapeWith(a, "Bearer stranger-token"); got != http.StatusOK || access.calls != 2 {
		t.Errorf("stranger, newly bound, after 31 s: %d after %d reviews, want 200 after 2", got, access.calls)
	}
	tokens.calls = 0
	*now = now.Add(30 * time.Second) // 61 s after the reader's token was reviewed
	scrapeWith(a, "Bearer reader-token")
	if tokens.calls != 1 {
		t.Errorf("after a minute the reader's token was reviewed %d times, want 1", tokens.calls)
	}
}

func TestDecisionsAreCachedPerQuestion(t *testing.T) {
	pod := func(name string) authnv1.UserInfo {
		return authnv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", Groups: []string{"a", "b"},
			Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {name}}}
	}
	if decisionKeyOf(pod("p1"), "get", "/metrics") == decisionKeyOf(pod("p2"), "get", "/metrics") {
		t.Error("two pods' tokens share a cached decision")
	}
	if decisionKeyOf(pod("p1"), "get", "/metrics") == decisionKeyOf(pod("p1"), "post", "/metrics") {
		t.Error("two verbs share a cached decision")
	}
	ab, a := pod("p1"), pod("p1")
	a.Groups = []string{"a,b"}
	if decisionKeyOf(ab, "get", "/metrics") == decisionKeyOf(a, "get", "/metrics") {
		t.Error(`groups "a", "b" and the group "a,b" share a cached decision`)
	}
	if first, again := decisionKeyOf(pod("p1"), "get", "/metrics"), decisionKeyOf(pod("p1"), "get", "/metrics"); first != again {
		t.Error("the same question has two keys")
	}
}

func TestTTLCacheStaysBounded(t *testing.T) {
	c := newTTLCache[bool]()
	now := time.Now()
	for i := range 3 * ttlCacheMax {
		c.put(string(rune(i)), true, now, time.Hour)
		if len(c.m) > ttlCacheMax {
			t.Fatalf("%d entries after %d puts, want at most %d", len(c.m), i+1, ttlCacheMax)
		}
	}
	if _, ok := c.get(string(rune(3*ttlCacheMax-1)), now); !ok {
		t.Error("the latest entry is missing")
	}
}
