package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const prefix = "it"

// env is one running tenant API over a fresh database and broker.
type env struct {
	t      testing.TB // a *testing.F for a fuzz target's env: only before its Fuzz
	st     *store.Store
	fx     *fixture.F
	broker *kafkatest.Broker
	srv    *httptest.Server
	api    *ingress.API
	logs   *syncbuf.Buffer // what the API logged
	key    *signing.Key    // seals the callback secrets
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWithUser is newEnv with what most tests start from: tenant acme, a key of it (returned), and its
// user u1, linked to chat 1001 and verified.
func newEnvWithUser(t testing.TB) (*env, string) {
	t.Helper()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(t, "acme", "u1", 1001)
	return e, key
}

// newEnvWith is newEnv with options changed by opts.
func newEnvWith(t testing.TB, opts func(*ingress.Options)) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	b := kafkatest.New(t, prefix)
	p := b.Producer(t, prefix)
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ob := outbox.New(st, p, outbox.Options{Logger: logger})
	t.Cleanup(ob.Close)
	key, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	o := ingress.Options{DeepLinkBase: "https://t.me", BotUsername: "herald_test_bot", AuthCacheTTL: 500 * time.Millisecond, CallbackKey: key}
	if opts != nil {
		opts(&o)
	}
	api := ingress.New(st, ob, logger, o)
	r := server.NewRouter(logger)
	api.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, fx: fixture.New(st), broker: b, srv: srv, api: api, logs: logs, key: key}
}

// tenant creates a tenant, unless it exists, and returns a new key of it (label nil: the developer name
// brands).
func (e *env) tenant(id, developerName string, label *string) string {
	e.t.Helper()
	if err := e.st.CreateTenant(context.Background(), id, developerName); err != nil && !isConflict(err) {
		e.t.Fatalf("create tenant: %v", err)
	}
	var opts []fixture.KeyOption
	if label != nil {
		opts = append(opts, fixture.KeyLabel(*label))
	}
	return e.fx.APIKey(e.t, id, opts...)
}

func isConflict(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("conflict"))
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// do sends a request; body is sent as is when it is a string, else JSON-encoded.
func (e *env) do(method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// expectError asserts the status and the spec's error code, and the error body shape.
func expectError(t testing.TB, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	m := r.json(t)
	if m["error"] != code {
		t.Fatalf("error = %v, want %q; body %s", m["error"], code, r.body)
	}
	if msg, ok := m["message"].(string); !ok || msg == "" {
		t.Fatalf("error body has no message: %s", r.body)
	}
	if id := r.header.Get("X-Request-Id"); id == "" || m["request_id"] != id {
		t.Fatalf("error body's request_id %v, want the X-Request-Id header %q: %s", m["request_id"], id, r.body)
	}
	if len(m) != 3 {
		t.Fatalf("error body has fields beyond error, message and request_id: %s", r.body)
	}
}

func (e *env) countRows(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("count: %v", err)
	}
	return n
}

// envelopes returns the envelopes on a topic.
func (e *env) envelopes(topic string) []queue.Envelope {
	e.t.Helper()
	var out []queue.Envelope
	for _, m := range e.broker.Messages(e.t, topic) {
		env, err := queue.ParseEnvelope(m.Value)
		if err != nil {
			e.t.Fatalf("bad envelope on %s: %v", topic, err)
		}
		out = append(out, env)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
