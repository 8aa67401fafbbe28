package ingress_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

func int32p(v int32) *int32 { return &v }

func (e *env) limit(tenant string, l store.TenantLimits) {
	e.t.Helper()
	if err := e.st.SetTenantLimits(context.Background(), tenant, l); err != nil {
		e.t.Fatal(err)
	}
}

var rateLimitField = regexp.MustCompile(`^"(sends|requests)";r=\d+;t=\d+$`)

// Sends over the tenant's limit are refused 429 rate_limited with Retry-After and the RateLimit fields, and
// nothing of a refused send is stored.
func TestSendsOverTheTenantsLimitAreRefused(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(1), Burst: int32p(5)})
	accepted, refused := 0, 0
	for range 10 {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
		if got := r.header.Get("RateLimit-Policy"); got != `"sends";q=5;w=5` {
			t.Errorf("RateLimit-Policy = %q, want \"sends\";q=5;w=5", got)
		}
		if got := r.header.Get("RateLimit"); !rateLimitField.MatchString(got) {
			t.Errorf("RateLimit = %q", got)
		}
		switch r.status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			refused++
			expectError(t, r, http.StatusTooManyRequests, "rate_limited")
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("Retry-After = %q, want whole seconds, at least 1", r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("send: %d %s", r.status, r.body)
		}
	}
	if accepted < 5 || accepted > 6 || refused != 10-accepted {
		t.Errorf("accepted %d, refused %d of 10 at 1/s with a burst of 5", accepted, refused)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != accepted {
		t.Errorf("%d rows for %d accepted sends: a refused send left something behind", n, accepted)
	}
}

// A batch spends one send per valid item, all at once: within the burst it is accepted whole (and
// refused whole once the bucket is short), and one with more valid items than the burst could never pass,
// so it is refused saying to split it, storing nothing.
func TestABatchCountsItsItemsAgainstTheSendRate(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(1), Burst: int32p(5)})
	batch := func(n int) map[string]any {
		items := make([]any, n)
		for i := range items {
			items[i] = map[string]any{"user_id": "u1", "message": "hi"}
		}
		return map[string]any{"notifications": items}
	}
	tooBig := e.do("POST", "/v1/send/batch", key, batch(6))
	expectError(t, tooBig, http.StatusTooManyRequests, "rate_limited")
	if !strings.Contains(string(tooBig.body), "smaller batches") {
		t.Errorf("a batch over the burst: %s, want the advice to split it", tooBig.body)
	}
	if r := e.do("POST", "/v1/send/batch", key, batch(4)); r.status != http.StatusOK {
		t.Fatalf("a batch of 4 within a burst of 5: %d %s", r.status, r.body)
	}
	expectError(t, e.do("POST", "/v1/send/batch", key, batch(4)), http.StatusTooManyRequests, "rate_limited")
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 4 {
		t.Errorf("%d rows, want the first batch's 4 only", n)
	}
}

// Every other /v1 route counts against the tenant's requests per second; sends do not.
func TestOtherRoutesCountAgainstRequestsPerSecond(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{RequestsPerSecond: int32p(2)}) // burst twice the rate: 4
	refused := 0
	for range 8 {
		r := e.do("GET", "/v1/phone-verification/status/u1", key, nil)
		if r.status == http.StatusTooManyRequests {
			refused++
			if r.header.Get("RateLimit-Policy") != `"requests";q=4;w=2` {
				t.Errorf("RateLimit-Policy = %q", r.header.Get("RateLimit-Policy"))
			}
		}
	}
	if refused < 3 {
		t.Errorf("%d of 8 lookups refused at 2/s (burst 4); want the rest beyond the burst", refused)
	}
	if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}); r.status != http.StatusAccepted {
		t.Errorf("a send was refused by the requests limit: %d %s", r.status, r.body)
	}
}

// A limit changed on the tenant applies within the authentication cache's TTL (500 ms in these tests, 2 s
// by default).
func TestAChangedLimitAppliesWithinSeconds(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(1), Burst: int32p(1)})
	send := func() int {
		return e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"}).status
	}
	send()
	if s := send(); s != http.StatusTooManyRequests {
		t.Fatalf("second send at 1/s: %d, want 429", s)
	}
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(1000)})
	deadline := time.Now().Add(5 * time.Second)
	for send() != http.StatusAccepted {
		if time.Now().After(deadline) {
			t.Fatal("a raised limit did not apply within 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Three ingress replicas, each with its own limiter and key cache, hold one tenant to its limit within
// 10 %.
func TestThreeReplicasHoldOneTenantsLimit(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	e.limit("acme", store.TenantLimits{SendsPerSecond: int32p(40), Burst: int32p(40)})
	var urls []string
	for range 3 {
		p := e.broker.Producer(t, prefix)
		logger := slog.New(slog.DiscardHandler)
		ob := outbox.New(e.st, p, outbox.Options{Logger: logger})
		t.Cleanup(ob.Close)
		api := ingress.New(e.st, ob, logger, ingress.Options{DeepLinkBase: "https://t.me", BotUsername: "b_bot"})
		r := server.NewRouter(logger)
		api.Routes(r)
		srv := httptest.NewServer(r)
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	const d = 3 * time.Second
	var accepted atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range 12 {
		url := urls[i%3]
		wg.Go(func() {
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest("POST", url+"/v1/send", strings.NewReader(`{"user_id":"u1","message":"hi"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == http.StatusAccepted {
					accepted.Add(1)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	want := 40 + 40*d.Seconds()
	if got := float64(accepted.Load()); got < 0.9*want || got > 1.1*want {
		t.Errorf("three replicas accepted %v sends in %v, want %v ±10%% (40/s with a burst of 40)", got, d, want)
	}
}
