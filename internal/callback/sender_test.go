package callback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// A request carries the three headers and a body exactly {"type","timestamp","data"}, and its signature
// verifies with the endpoint's secret under the published scheme.
func TestACallbackIsSignedTheStandardWebhooksWay(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	ep, secret := e.endpoint("acme", rc.srv.URL+"/hooks")
	e.pings("acme", ep, 1)
	e.start(e.options())
	wait.Until(t, 10*time.Second, "the ping", func() bool { return len(rc.requests()) == 1 })
	r := rc.requests()[0]
	if err := signing.Verify(r.Header, r.Body, time.Now(), signing.DefaultTolerance, secret); err != nil {
		t.Errorf("the signature does not verify with the endpoint's secret: %v", err)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if id := r.id(); !regexp.MustCompile(`^evt_[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("webhook-id %q", id)
	}
	ts, err := strconv.ParseInt(r.Header.Get(signing.HeaderTimestamp), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Second {
		t.Errorf("webhook-timestamp %q is not the Unix time of the request", r.Header.Get(signing.HeaderTimestamp))
	}
	sigs := strings.Fields(r.Header.Get(signing.HeaderSignature))
	if len(sigs) != 1 || !strings.HasPrefix(sigs[0], "v1,") {
		t.Errorf("webhook-signature %q: want one v1 signature", r.Header.Get(signing.HeaderSignature))
	}
	if !regexp.MustCompile(`^\{"type":"ping","timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","data":\{\}\}$`).Match(r.Body) {
		t.Errorf("body %s", r.Body)
	}
}

// After a rotation every request carries two signatures, one per secret, for 24 hours; then only the new
// one. The clock is moved in the database, not waited for.
func TestRotationSignsWithBothSecretsUntilTheOverlapEnds(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	ep, old := e.endpoint("acme", rc.srv.URL)
	fresh := signing.NewSecret()
	if err := e.st.RotateCallbackSecret(context.Background(), "acme", ep, e.key.Seal(fresh, ep), store.SecretOverlap); err != nil {
		t.Fatal(err)
	}
	e.start(e.options())
	e.pings("acme", ep, 1)
	wait.Until(t, 10*time.Second, "the first ping", func() bool { return len(rc.requests()) == 1 })
	r := rc.requests()[0]
	if n := len(strings.Fields(r.Header.Get(signing.HeaderSignature))); n != 2 {
		t.Fatalf("%d signatures during the overlap, want 2", n)
	}
	for name, s := range map[string]signing.Secret{"old": old, "new": fresh} {
		if err := signing.Verify(r.Header, r.Body, time.Now(), signing.DefaultTolerance, s); err != nil {
			t.Errorf("the %s secret does not verify during the overlap: %v", name, err)
		}
	}
	var expires time.Time
	for _, s := range e.fx.CallbackSecrets(t, ep) {
		if s.ExpiresAt != nil {
			expires = *s.ExpiresAt
		}
	}
	if time.Until(expires) < 23*time.Hour+59*time.Minute || time.Until(expires) > 24*time.Hour {
		t.Errorf("the old secret expires at %v, want 24 hours from now", expires)
	}
	// 24 hours later.
	e.exec(`UPDATE callback_secrets SET expires_at = expires_at - interval '24 hours' WHERE endpoint_id = $1 AND expires_at IS NOT NULL`, ep)
	e.pings("acme", ep, 1)
	wait.Until(t, 10*time.Second, "the second ping", func() bool { return len(rc.requests()) == 2 })
	r = rc.requests()[1]
	if n := len(strings.Fields(r.Header.Get(signing.HeaderSignature))); n != 1 {
		t.Errorf("%d signatures after the overlap, want 1", n)
	}
	if err := signing.Verify(r.Header, r.Body, time.Now(), signing.DefaultTolerance, old); err == nil {
		t.Error("the old secret still verifies after the overlap")
	}
	if err := signing.Verify(r.Header, r.Body, time.Now(), signing.DefaultTolerance, fresh); err != nil {
		t.Errorf("the new secret does not verify: %v", err)
	}
}

// Invariant: every event reaches a receiver that was down for a while, once it is back, under the webhook-id
// it had from the start and with the same body on every attempt.
func TestAReceiverDownForAWhileGetsEverythingOnceItIsBack(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	down := true
	rc := newReceiver(t, func(int, *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ep, _ := e.endpoint("acme", rc.srv.URL)
	const events = 20
	e.pings("acme", ep, events)
	e.start(e.options())
	wait.Until(t, 10*time.Second, "failed attempts", func() bool { return len(rc.requests()) >= 3*events })
	var lastFailure *time.Time
	eps, err := e.st.ListCallbackEndpoints(context.Background(), "acme")
	for _, x := range eps {
		if x.ID == ep {
			lastFailure = x.LastFailureAt
		}
	}
	if err != nil || lastFailure == nil {
		t.Error("last_failure_at is not set while the receiver is down")
	}
	mu.Lock()
	down = false
	mu.Unlock()
	wait.Until(t, 15*time.Second, "every event acknowledged", func() bool { return len(rc.acknowledged()) == events })
	bodies := map[string]string{}
	for _, r := range rc.requests() {
		if b, ok := bodies[r.id()]; ok && b != string(r.Body) {
			t.Errorf("event %s was sent with two bodies:\n%s\n%s", r.id(), b, r.Body)
		}
		bodies[r.id()] = string(r.Body)
	}
	if len(bodies) != events {
		t.Errorf("%d webhook-ids for %d events: a retry must keep its event's id", len(bodies), events)
	}
	wait.Until(t, 5*time.Second, "the outbox to settle", func() bool {
		return e.count(`SELECT count(*) FROM callback_events WHERE state = 'delivered'`) == events
	})
	if l, _ := e.st.ListCallbackEndpoints(context.Background(), "acme"); l[0].LastSuccessAt == nil {
		t.Error("last_success_at is not set")
	}
}

// Invariant: a sender killed while its requests are on the wire loses no event; another sender delivers
// them once the leases run out (again under the same webhook-ids).
func TestASenderKilledMidSendLosesNoEvent(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	var once sync.Once
	rc := newReceiver(t, func(n int, r *http.Request) int {
		select {
		case <-release:
			return http.StatusNoContent
		case <-r.Context().Done(): // the killed sender hung up
			return 0
		}
	})
	ep, _ := e.endpoint("acme", rc.srv.URL)
	const events = 12
	e.pings("acme", ep, events)
	opts := e.options()
	opts.Lease = 2500 * time.Millisecond
	first := e.start(opts)
	wait.Until(t, 10*time.Second, "requests on the wire", func() bool { return rc.inFlight.Load() == int32(opts.EndpointConcurrency) })
	first.s.Kill()
	first.Stop(t)
	if n := e.count(`SELECT count(*) FROM callback_events WHERE state = 'pending' AND leased_until > now()`); n != opts.EndpointConcurrency {
		t.Fatalf("%d events leased by the dead sender, want %d", n, opts.EndpointConcurrency)
	}
	once.Do(func() { close(release) })
	e.start(opts)
	wait.Until(t, 20*time.Second, "every event acknowledged", func() bool { return len(rc.acknowledged()) == events })
	wait.Until(t, 5*time.Second, "the outbox to settle", func() bool {
		return e.count(`SELECT count(*) FROM callback_events WHERE state = 'delivered'`) == events
	})
	ids := map[string]bool{}
	for _, r := range rc.requests() {
		ids[r.id()] = true
	}
	if len(ids) != events {
		t.Errorf("%d webhook-ids for %d events", len(ids), events)
	}
}

// One endpoint answering slowly holds at most EndpointConcurrency attempts; another endpoint's events go
// through meanwhile.
func TestASlowEndpointDoesNotHoldBackTheOthers(t *testing.T) {
	e := newEnv(t)
	slow := newReceiver(t, func(int, *http.Request) int { time.Sleep(700 * time.Millisecond); return http.StatusOK })
	fast := newReceiver(t, nil)
	slowEP, _ := e.endpoint("acme", slow.srv.URL)
	e.pings("acme", slowEP, 40)
	opts := e.options()
	opts.Concurrency, opts.EndpointConcurrency = 8, 2
	e.start(opts)
	wait.Until(t, 5*time.Second, "the slow endpoint busy", func() bool { return slow.inFlight.Load() == 2 })
	fastEP, _ := e.endpoint("other", fast.srv.URL)
	e.pings("other", fastEP, 20)
	start := time.Now()
	wait.Until(t, 5*time.Second, "the fast endpoint's events", func() bool { return len(fast.acknowledged()) == 20 })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the fast endpoint's 20 events took %s behind the slow one", took)
	}
	if m := slow.maxInFlight.Load(); m > 2 {
		t.Errorf("the slow endpoint had %d attempts in flight, want at most 2", m)
	}
}

// A redirect is not followed: it is a failed attempt, and the target never hears of it.
func TestARedirectIsAFailedAttemptNotFollowed(t *testing.T) {
	e := newEnv(t)
	target := newReceiver(t, nil)
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusFound })
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target.srv.URL)
		rc.serve(w, r)
	})
	ep, _ := e.endpoint("acme", rc.srv.URL)
	e.pings("acme", ep, 1)
	e.start(e.options())
	wait.Until(t, 10*time.Second, "two attempts", func() bool { return len(rc.requests()) >= 2 })
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect was followed: the target got %d requests", n)
	}
	if ev := e.firstEvent(); ev.LastStatus == nil || *ev.LastStatus != http.StatusFound || ev.LastError == nil || *ev.LastError != "HTTP 302" {
		t.Errorf("last_status %v, last_error %v", ev.LastStatus, ev.LastError)
	}
}

// The answer's body is read up to a small limit and never stored; a slow answer is a timeout.
func TestAnswerBodiesAreNotKeptAndSlowAnswersTimeOut(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 1<<20)
	rc := newReceiver(t, func(n int, r *http.Request) int { return 0 })
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.serve(w, r)
		if len(rc.requests()) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(big))
			return
		}
		time.Sleep(1500 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	})
	ep, _ := e.endpoint("acme", rc.srv.URL)
	e.pings("acme", ep, 1)
	opts := e.options()
	opts.Timeout, opts.Lease = time.Second, 2*time.Second
	e.start(opts)
	wait.Until(t, 10*time.Second, "a timed-out attempt", func() bool {
		lastErr := e.firstEvent().LastError
		return lastErr != nil && *lastErr == "timeout: no answer within 1s"
	})
	for _, ev := range e.fx.CallbackOutbox(t) {
		if ev.LastError != nil && len(*ev.LastError) > 250 {
			t.Errorf("last_error holds %d bytes", len(*ev.LastError))
		}
	}
	if got := value(callback.Attempts.WithLabelValues("timeout")); got < 1 {
		t.Errorf("herald_callback_attempts_total{outcome=timeout} = %v", got)
	}
}

// An event still failing after the retry window is dropped and counted.
func TestAnEventFailingPastTheRetryWindowIsDroppedAndCounted(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusBadGateway })
	ep, _ := e.endpoint("acme", rc.srv.URL)
	e.pings("acme", ep, 1)
	before := value(callback.Dropped.WithLabelValues("expired"))
	e.start(e.options())
	wait.Until(t, 10*time.Second, "a failed attempt", func() bool { return len(rc.requests()) >= 1 })
	// The event is 24 hours old.
	e.exec(`UPDATE callback_events SET created_at = created_at - interval '24 hours'`)
	// The result is written, then counted.
	wait.Until(t, 10*time.Second, "the drop counted", func() bool {
		return value(callback.Dropped.WithLabelValues("expired"))-before == 1
	})
	if n := e.count(`SELECT count(*) FROM callback_events WHERE state = 'dropped' AND finished_at IS NOT NULL AND payload IS NULL`); n != 1 {
		t.Errorf("%d dropped events in the outbox, want 1", n)
	}
	n := len(rc.requests())
	time.Sleep(300 * time.Millisecond)
	if len(rc.requests()) != n {
		t.Error("a dropped event was sent again")
	}
}

// The outbox gauges follow the database.
func TestQueueGaugesFollowTheOutbox(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	ep, _ := e.endpoint("acme", rc.srv.URL)
	e.pings("acme", ep, 3)
	opts := e.options()
	opts.Backoff = notification.Backoff{Base: time.Hour, Max: time.Hour}
	e.start(opts)
	wait.Until(t, 10*time.Second, "the gauges", func() bool {
		return value(callback.QueueDepth.WithLabelValues("retrying")) == 3 &&
			value(callback.EndpointFailures.WithLabelValues("acme")) == 3
	})
}

// The failing endpoints are reported by tenant (the label capped as every tenant label is, internal/metriclabel):
// the most consecutive failures among the tenant's endpoints. An endpoint id is not a label: endpoints come
// and go, and a label per id would keep every id ever seen. A deleted endpoint's failures go with it.
func TestEndpointFailuresAreReportedByTenant(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(int, *http.Request) int { return http.StatusInternalServerError })
	a, _ := e.endpoint("acme", rc.srv.URL+"/a")
	b, _ := e.endpoint("acme", rc.srv.URL+"/b")
	o, _ := e.endpoint("other", rc.srv.URL+"/o")
	e.pings("acme", a, 3)
	e.pings("acme", b, 1)
	e.pings("other", o, 2)
	opts := e.options()
	opts.Backoff = notification.Backoff{Base: time.Hour, Max: time.Hour}
	e.start(opts)
	wait.Until(t, 10*time.Second, `failures {tenant="acme"} 3 and {tenant="other"} 2, and nothing else`, func() bool {
		return maps.Equal(series(callback.EndpointFailures), map[string]float64{`tenant="acme"`: 3, `tenant="other"`: 2})
	})
	for tenant, id := range map[string]string{"acme": a, "other": o} {
		if err := e.st.DeleteCallbackEndpoint(context.Background(), tenant, id); err != nil {
			t.Fatal(err)
		}
	}
	wait.Until(t, 10*time.Second, `failures {tenant="acme"} 1 alone`, func() bool {
		return maps.Equal(series(callback.EndpointFailures), map[string]float64{`tenant="acme"`: 1})
	})
}

// series returns a collector's series, by their labels (name="value", comma-separated).
func series(c prometheus.Collector) map[string]float64 {
	ch := make(chan prometheus.Metric, 100)
	go func() { c.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			panic(err)
		}
		var labels []string
		for _, l := range d.GetLabel() {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		out[strings.Join(labels, ",")] = d.GetGauge().GetValue()
	}
	return out
}

func TestTheBackoffDoublesUpToItsMaximumWithJitter(t *testing.T) {
	b := notification.Backoff{Base: 5 * time.Second, Max: time.Hour, Jitter: 0.2}
	for attempt, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 5: 80 * time.Second, 11: time.Hour, 500: time.Hour} {
		for range 50 {
			got := b.Delay(attempt)
			if got < want*8/10 || got > want*12/10 {
				t.Fatalf("wait after attempt %d: %s, want %s ±20%%", attempt, got, want)
			}
		}
	}
	// The default schedule retries for at least the 24 hours of the contract before the window drops it.
	total, n := time.Duration(0), 0
	for n = 1; total < 24*time.Hour; n++ {
		total += callback.DefaultBackoff.Delay(n) * 10 / 12 // the shortest the jitter makes it
	}
	if n > 60 {
		t.Errorf("%d attempts in 24 hours", n)
	}
}

// payloadOf decodes a callback body.
func payloadOf(t *testing.T, body []byte) (typ, timestamp string, data map[string]any) {
	t.Helper()
	var p struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("callback body %s: %v", body, err)
	}
	return p.Type, p.Timestamp, p.Data
}

// value reads a counter or a gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
