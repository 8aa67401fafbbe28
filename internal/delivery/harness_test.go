package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/background"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const prefix = "dt"

// env is the whole pipeline for one test: PostgreSQL, kfake, the tenant API, the simulator, and workers
// started on demand.
type env struct {
	t        *testing.T
	st       *store.Store
	broker   *kafkatest.Broker
	producer *queue.Producer
	outbox   *outbox.Outbox
	api      *httptest.Server
	sim      *sim.Server
	simSrv   *httptest.Server
	client   *messenger.Client
	logger   *slog.Logger
	key      string // API key of tenant "acme"
}

func testLogger() *slog.Logger {
	if os.Getenv("HERALD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newEnv(t *testing.T, simOpts sim.Options) *env {
	t.Helper()
	return newEnvLogging(t, simOpts, testLogger())
}

// newEnvLogging is newEnv with the logger of the tenant API and the outbox (and of the workers that
// fastOptions configures, and of the simulator unless simOpts has its own).
func newEnvLogging(t *testing.T, simOpts sim.Options, logger *slog.Logger) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	b := kafkatest.New(t, prefix)
	p := b.Producer(t, prefix)
	ob := outbox.New(st, p, outbox.Options{Logger: logger})
	t.Cleanup(ob.Close)
	api := ingress.New(st, ob, logger, ingress.Options{DeepLinkBase: "https://t.me", BotUsername: "herald_test_bot",
		// These tests load the worker through the API: a tenant's default send limit is not what they test
		// (fairness_test.go sets its own).
		SendsPerSecond: 100000})
	r := server.NewRouter(logger)
	api.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	if simOpts.Logger == nil {
		simOpts.Logger = logger
	}
	s := sim.New(simOpts)
	simSrv := httptest.NewServer(s)
	t.Cleanup(func() { simSrv.Close(); s.Close() })
	e := &env{t: t, st: st, broker: b, producer: p, outbox: ob, api: srv, sim: s, simSrv: simSrv,
		client: messenger.New(simSrv.URL, s.Token(), nil), logger: logger}
	e.key = e.tenant("acme", "Acme Developer", "Acme Shop")
	return e
}

// fastOptions are worker options with every timing knob shortened for tests.
func (e *env) fastOptions() delivery.Options {
	return delivery.Options{
		Store:              e.st,
		Sender:             e.client,
		Brokers:            e.broker.Addrs(),
		TopicPrefix:        prefix,
		GroupID:            "workers",
		Logger:             e.logger,
		RateLimit:          1000,
		PerChatInterval:    time.Second,
		MaxAttempts:        8,
		Lease:              3 * time.Second,
		Backoff:            notification.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond, Jitter: 0.2},
		SendTimeout:        2 * time.Second,
		SchedulerInterval:  50 * time.Millisecond,
		RedriveInterval:    200 * time.Millisecond,
		QueuedRedriveAfter: 5 * time.Second,
		GracePeriod:        5 * time.Second,
		CommitInterval:     100 * time.Millisecond,
		LagInterval:        200 * time.Millisecond,
		AssignmentInterval: time.Second,
		SessionTimeout:     6 * time.Second,
	}
}

// running is a worker started by a test: Stop is SIGTERM (it drains), w.Kill then Stop a crash.
type running struct {
	w *delivery.Worker
	*background.Run
}

// start runs a worker until the test ends (or Stop).
func (e *env) start(opts delivery.Options) *running {
	e.t.Helper()
	w, err := delivery.New(opts)
	if err != nil {
		e.t.Fatalf("delivery.New: %v", err)
	}
	return &running{w: w, Run: background.Start(e.t, "the worker", 30*time.Second, w.Run)}
}

func (e *env) tenant(id, developerName, label string) string {
	e.t.Helper()
	ctx := context.Background()
	if err := e.st.CreateTenant(ctx, id, developerName); err != nil {
		e.t.Fatalf("create tenant: %v", err)
	}
	k := apikey.New()
	if _, err := e.st.InsertAPIKey(ctx, id, k.Digest, k.Prefix, &label, nil); err != nil {
		e.t.Fatalf("insert key: %v", err)
	}
	return k.Secret
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.st.Pool().Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("fixture %q: %v", sql, err)
	}
}

// user links user to chat (the chat id is also the simulated messenger user) with a verified phone, and
// makes the user exist in the simulator unless simUser is false (then the chat is unknown: "chat not
// found").
func (e *env) user(user string, chat int64, simUser bool) {
	e.t.Helper()
	fixture.New(e.st).VerifiedUser(e.t, "acme", user, chat)
	if simUser {
		if _, err := e.sim.EnsureUser(sim.User{ID: chat}); err != nil {
			e.t.Fatalf("sim user: %v", err)
		}
	}
}

// post sends POST /v1/send and returns the status, body and the time of the answer.
func (e *env) post(user, message string, priority int) (int, []byte, time.Time) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"user_id": user, "message": message, "priority": priority})
	req, _ := http.NewRequest("POST", e.api.URL+"/v1/send", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Errorf("POST /v1/send: %v", err)
		return 0, nil, time.Time{}
	}
	at := time.Now()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b, at
}

// call sends a request to the tenant API with acme's key and returns the status and the decoded body.
func (e *env) call(method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.api.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+e.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return 0, nil
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// send posts /v1/send, expects 202 and returns the tracking id and the time of the 202.
func (e *env) send(user, message string, priority int) (string, time.Time) {
	e.t.Helper()
	status, b, at := e.post(user, message, priority)
	if status != http.StatusAccepted {
		e.t.Errorf("POST /v1/send: %d %s", status, b)
		return "", at
	}
	var out struct {
		TrackingID string `json:"tracking_id"`
	}
	_ = json.Unmarshal(b, &out)
	return out.TrackingID, at
}

// enqueueRaw stores a queued tenant notification and produces its envelope, bypassing the API's checks
// (for states the API refuses, such as a user without a link). The row records the chat of the user's link,
// if any, as a send does.
func (e *env) enqueueRaw(user, body string, priority int) string {
	e.t.Helper()
	id := fixture.New(e.st).Notification(e.t, fixture.For("acme", user), fixture.Priority(priority), fixture.Body(body))
	if err := e.producer.Publish(context.Background(), queue.NewOutgoing(id, "acme", user, 0, priority)); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
	return id
}

// system stores and publishes a system message as the webhook does, and returns its tracking id.
func (e *env) system(m outbox.SystemMessage) string {
	e.t.Helper()
	n := outbox.System(m)
	if err := e.st.InsertSystemMessage(context.Background(), n); err != nil {
		e.t.Fatalf("insert system message: %v", err)
	}
	if !e.outbox.Publish(context.Background(), []store.NewNotification{n}) {
		e.t.Fatal("system message not published")
	}
	return n.TrackingID
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// row is the stored delivery state of a notification.
type row struct {
	Status    string
	Attempts  int
	MsgID     *string
	ErrCode   int
	ErrMsg    *string
	NextAt    *time.Time
	UpdatedAt time.Time
}

func (e *env) row(id string) row {
	e.t.Helper()
	n := fixture.New(e.st).NotificationRow(e.t, id)
	return row{n.Status, n.Attempts, n.MessageID, n.ErrCode, n.ErrMsg, n.NextAttemptAt, n.UpdatedAt}
}

var terminal = map[string]bool{"delivered": true, "blocked": true, "unlinked": true, "failed": true, "cancelled": true, "expired": true}

// waitStatus waits until the notification has the status and returns its row.
func (e *env) waitStatus(id, status string, within time.Duration) row {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := e.row(id)
		if r.Status == status {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("notification %s is %s after %v, want %s", id, r.Status, within, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitTerminal waits until the notification reaches a terminal status and returns its row.
func (e *env) waitTerminal(id string, within time.Duration) row {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := e.row(id)
		if terminal[r.Status] {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("notification %s still %s after %v (attempts %d, error %d)", id, r.Status, within, r.Attempts, r.ErrCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllTerminal waits until every id is terminal and returns their statuses.
func (e *env) waitAllTerminal(ids []string, within time.Duration) map[string]string {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := fixture.New(e.st).Statuses(e.t, ids)
		open := map[string]int{}
		for _, s := range got {
			if !terminal[s] {
				open[s]++
			}
		}
		if len(got) == len(ids) && len(open) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("after %v: %d of %d notifications found, not terminal: %v", within, len(got), len(ids), open)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// messages returns the texts chat received, in order.
func (e *env) texts(chat int64) []string {
	var out []string
	for _, m := range e.sim.Messages(chat) {
		out = append(out, m.Text)
	}
	return out
}

func (e *env) assertNoViolations() {
	e.t.Helper()
	if st := e.sim.Stats(); st.LimitViolations != 0 {
		e.t.Errorf("the simulator counted %d rate limit violations (global %d, per chat %d); want 0",
			st.LimitViolations, st.GlobalLimitViolations, st.ChatLimitViolations)
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// parallel runs f(i) for i in [0, n) on k goroutines.
func parallel(n, k int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range k {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func brand(msg string) string { return fmt.Sprintf("A message from Acme Shop\n%s", msg) }
