package callback_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/background"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func testLogger() *slog.Logger {
	if os.Getenv("HERALD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// env is a database with tenants acme and other, and the callback key.
type env struct {
	t   *testing.T
	st  *store.Store
	fx  *fixture.F
	key *signing.Key
	// rawKey is key in the form of HERALD_CALLBACK_SECRET_KEY.
	rawKey string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	fx := fixture.New(st)
	for _, id := range []string{"acme", "other"} {
		fx.Tenant(t, id)
	}
	raw := signing.GenerateKey()
	key, err := signing.ParseKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, st: st, fx: fx, key: key, rawKey: raw}
}

// endpoint creates an endpoint of tenant for url (every event unless events are given) and returns its id
// and secret.
func (e *env) endpoint(tenant, url string, events ...string) (string, signing.Secret) {
	e.t.Helper()
	return e.fx.CallbackEndpoint(e.t, e.key, tenant, url, events...)
}

// pings queues n ping events for the endpoint of tenant: the first through the test route's store call, the
// rest straight into the outbox (the route keeps at most store.MaxPendingPings undelivered).
func (e *env) pings(tenant, endpoint string, n int) {
	e.t.Helper()
	if n == 0 {
		return
	}
	if err := e.st.EnqueuePing(context.Background(), tenant, endpoint); err != nil {
		e.t.Fatal(err)
	}
	e.fx.CallbackEvents(e.t, endpoint, n-1)
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.st.Pool().Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// firstEvent is the oldest event of the outbox, with what its last attempt met (the zero event when there is
// none yet).
func (e *env) firstEvent() fixture.OutboxEvent {
	e.t.Helper()
	if evs := e.fx.CallbackOutbox(e.t); len(evs) > 0 {
		return evs[0]
	}
	return fixture.OutboxEvent{}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// options are sender options with every timing knob shortened, allowing http:// and 127.0.0.1 (the test
// receivers).
func (e *env) options() callback.Options {
	return callback.Options{
		Store:               e.st,
		Key:                 e.key,
		Policy:              egress.Policy{AllowInsecure: true, AllowPrivate: true},
		Logger:              testLogger(),
		Concurrency:         32,
		EndpointConcurrency: 4,
		Timeout:             2 * time.Second,
		Lease:               3 * time.Second,
		Backoff:             notification.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: 0.2},
		PollInterval:        20 * time.Millisecond,
		StatsInterval:       100 * time.Millisecond,
		GracePeriod:         2 * time.Second,
	}
}

// running is a sender started by a test: Stop is SIGTERM, s.Kill then Stop a crash.
type running struct {
	s *callback.Sender
	*background.Run
}

// start runs a sender until the test ends (or Stop).
func (e *env) start(opts callback.Options) *running {
	e.t.Helper()
	s, err := callback.New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	return &running{s: s, Run: background.Start(e.t, "the sender", 30*time.Second, s.Run)}
}

// received is one request that reached a receiver.
type received struct {
	Header http.Header
	Body   []byte
	At     time.Time
	Status int // what the receiver answered
}

func (r received) id() string { return r.Header.Get(signing.HeaderID) }

// receiver is a real HTTP server playing a tenant's endpoint. answer decides each request's status (the
// n-th request, from 1); nil answers 204.
type receiver struct {
	srv    *httptest.Server
	answer func(n int, r *http.Request) int

	mu          sync.Mutex
	got         []received
	n           int
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	now := rc.inFlight.Add(1)
	defer rc.inFlight.Add(-1)
	for {
		top := rc.maxInFlight.Load()
		if now <= top || rc.maxInFlight.CompareAndSwap(top, now) {
			break
		}
	}
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.n++
	n := rc.n
	rc.mu.Unlock()
	status := http.StatusNoContent
	if rc.answer != nil {
		status = rc.answer(n, r)
	}
	rc.mu.Lock()
	rc.got = append(rc.got, received{Header: r.Header.Clone(), Body: body, At: time.Now(), Status: status})
	rc.mu.Unlock()
	if status > 0 {
		w.WriteHeader(status)
	}
}

// requests returns every request so far.
func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received{}, rc.got...)
}

// acknowledged returns the requests the receiver answered 2xx, by webhook-id.
func (rc *receiver) acknowledged() map[string][]received {
	out := map[string][]received{}
	for _, r := range rc.requests() {
		if r.Status >= 200 && r.Status < 300 {
			out[r.id()] = append(out[r.id()], r)
		}
	}
	return out
}
