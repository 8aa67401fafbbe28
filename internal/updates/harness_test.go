package updates_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
	"github.com/heraldhq/herald/internal/updates"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	prefix       = "wh"
	secret       = "s3cret_Webhook-token"
	phoneHashKey = "0123456789abcdef-phone-key"
	adminID      = int64(900001)
)

// env is one webhook receiver over a fresh database and broker, served by a real HTTP server.
type env struct {
	t      *testing.T
	st     *store.Store
	fx     *fixture.F
	broker *kafkatest.Broker
	rc     *updates.Receiver
	router chi.Router
	srv    *httptest.Server
	logs   *syncbuf.Buffer
	nextID atomic.Int64
}

// newEnv makes the env; each option may change the receiver's options (it is given the store).
func newEnv(t *testing.T, options ...func(*store.Store, *updates.Options)) *env {
	t.Helper()
	st, _ := pgtest.NewStore(t)
	b := kafkatest.New(t, prefix)
	p := b.Producer(t, prefix)
	logs := &syncbuf.Buffer{}
	// Debug level: the test about phone numbers must see every line the receiver can write.
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ob := outbox.New(st, p, outbox.Options{ProduceTimeout: time.Second, Logger: logger})
	t.Cleanup(ob.Close)
	opts := updates.Options{
		Secret: secret, PhoneHashKey: []byte(phoneHashKey), DevAdmins: []int64{adminID}, Logger: logger,
	}
	for _, o := range options {
		o(st, &opts)
	}
	rc := updates.New(st, ob, opts)
	r := server.NewRouter(logger)
	rc.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, fx: fixture.New(st), broker: b, rc: rc, router: r, srv: srv, logs: logs}
	e.nextID.Store(1000)
	return e
}

func (e *env) updateID() int64 { return e.nextID.Add(1) }

type response struct {
	status      int
	contentType string
	body        []byte
}

// post sends body (a string or []byte as is, anything else JSON-encoded) with the secret in the spec's
// header unless headers are given (pairs of name, value; a nil slice means "the default secret header").
func (e *env) post(body any, headers ...string) response {
	e.t.Helper()
	return e.postTo(updates.Path, body, headers...)
}

// postTo is post to another path of the webhook component (a bot's own route).
func (e *env) postTo(path string, body any, headers ...string) response {
	e.t.Helper()
	if headers == nil {
		headers = []string{updates.SecretHeader, secret}
	}
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			e.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	rb, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), body: rb}
}

// expectOK asserts 200 {"ok": true}.
func expectOK(t *testing.T, r response) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", r.status, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil || !reflect.DeepEqual(m, map[string]any{"ok": true}) {
		t.Fatalf(`body = %s, want {"ok": true}`, r.body)
	}
}

// expectError asserts the status and the error code of the catalogue's body.
func expectError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	var m map[string]string
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("error body is not {error, message}: %v\n%s", err, r.body)
	}
	if m["error"] != code || m["message"] == "" || m["request_id"] == "" || len(m) != 3 {
		t.Fatalf("error body = %s, want error %q with a message and a request_id", r.body, code)
	}
}

// Update builders, in the Bot API's JSON.

func sender(id int64) map[string]any {
	return map[string]any{"id": id, "is_bot": false, "first_name": "Ann", "language_code": "en"}
}

func privateChat(id int64) map[string]any {
	return map[string]any{"id": id, "type": "private", "first_name": "Ann"}
}

func textUpdate(updateID, from int64, text string) map[string]any {
	return map[string]any{"update_id": updateID, "message": map[string]any{
		"message_id": 7, "date": 1700000000, "from": sender(from), "chat": privateChat(from), "text": text,
	}}
}

// contactUpdate shares a contact; contactUserID 0 leaves user_id out.
func contactUpdate(updateID, from int64, phoneNumber string, contactUserID int64) map[string]any {
	c := map[string]any{"phone_number": phoneNumber, "first_name": "Ann"}
	if contactUserID != 0 {
		c["user_id"] = contactUserID
	}
	return map[string]any{"update_id": updateID, "message": map[string]any{
		"message_id": 8, "date": 1700000000, "from": sender(from), "chat": privateChat(from), "contact": c,
	}}
}

// Fixtures.

func (e *env) tenant(id, developerName string, developers ...int64) {
	e.t.Helper()
	e.fx.Tenant(e.t, id, fixture.DeveloperName(developerName), fixture.Developers(developers...))
}

// token creates a link token for a tenant's user, with the label snapshot, and returns it. state "expired"
// or "used" makes it so.
func (e *env) token(tenantID, userID, label, state string) string {
	e.t.Helper()
	opts := []fixture.TokenOption{fixture.TokenLabel(label)}
	switch state {
	case "expired":
		opts = append(opts, fixture.TokenExpiredAt(time.Now().Add(-time.Second)))
	case "used":
		opts = append(opts, fixture.TokenUsedAt(time.Now().Add(-time.Minute)))
	}
	return e.fx.LinkToken(e.t, tenantID, userID, opts...)
}

// link makes the user linked to a messenger account directly.
func (e *env) link(tenantID, userID string, messengerID int64) {
	e.t.Helper()
	e.fx.User(e.t, tenantID, userID, fixture.LinkedTo(messengerID))
}

// session sets the user's verification: "pending" (10 minutes ahead), "expired" (pending, past), or
// "verified". label may be nil (the developer name brands).
func (e *env) session(tenantID, userID, state string, label *string) {
	e.t.Helper()
	opts := []fixture.UserOption{fixture.SessionLabel(label)}
	switch state {
	case "pending":
		opts = append(opts, fixture.Pending())
	case "expired":
		opts = append(opts, fixture.SessionExpired())
	case "verified":
		opts = append(opts, fixture.Verified(), fixture.PhoneLast4("9999"), fixture.PhoneHash([]byte{0}))
	default:
		e.t.Fatalf("no session state %q", state)
	}
	e.fx.User(e.t, tenantID, userID, opts...)
}

type linkRow struct {
	MessengerUserID int64
	ChatID          int64
}

// links returns the links of a tenant's user (0 or 1).
func (e *env) links(tenantID, userID string) []linkRow {
	e.t.Helper()
	var out []linkRow
	if l, ok := e.fx.LinkOf(e.t, tenantID, userID); ok {
		out = append(out, linkRow{l.MessengerUserID, l.ChatID})
	}
	return out
}

type verificationRow = fixture.PhoneVerification

func (e *env) verification(tenantID, userID string) verificationRow {
	e.t.Helper()
	return e.fx.PhoneVerificationOf(e.t, tenantID, userID)
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("count: %v", err)
	}
	return n
}

// reply is a queued system message, read back from PostgreSQL by the tracking id of its envelope.
type reply struct {
	TrackingID  string
	EnvTenantID string
	Kind        string
	TenantID    *string
	ChatID      int64
	Bot         int64 // the bot it goes through; 0: the shared bot
	Priority    int
	Body        string
	ReplyMarkup map[string]any
	CreatedAt   time.Time
}

// replies returns every message on the high topic, oldest first, and checks that the normal topic is empty
// (replies are system messages: priority 9, high topic).
func (e *env) replies() []reply {
	e.t.Helper()
	topics := queue.TopicsFor(prefix)
	if n := len(e.broker.Messages(e.t, topics.Normal)); n != 0 {
		e.t.Fatalf("%d messages on the normal topic; replies belong on the high topic", n)
	}
	var out []reply
	for _, m := range e.broker.Messages(e.t, topics.High) {
		env, err := queue.ParseEnvelope(m.Value)
		if err != nil {
			e.t.Fatalf("bad envelope: %v", err)
		}
		r := reply{TrackingID: env.TrackingID, EnvTenantID: env.TenantID}
		row := e.fx.NotificationRow(e.t, env.TrackingID)
		if row.ChatID == nil {
			e.t.Fatalf("reply %s has no chat", env.TrackingID)
		}
		r.Kind, r.TenantID, r.ChatID, r.Bot, r.Priority, r.Body, r.CreatedAt = row.Kind, row.TenantID, *row.ChatID, int64(row.Bot), row.Priority, row.Body, row.CreatedAt
		if row.Markup != nil {
			if err := json.Unmarshal([]byte(*row.Markup), &r.ReplyMarkup); err != nil {
				e.t.Fatal(err)
			}
		}
		if r.Kind != notification.KindSystem || r.Priority != outbox.SystemPriority {
			e.t.Fatalf("reply %s: kind %s priority %d, want a system message of priority 9", r.TrackingID, r.Kind, r.Priority)
		}
		if got := deref(r.TenantID); got != env.TenantID {
			e.t.Fatalf("reply %s: envelope tenant %q, row tenant %q", r.TrackingID, env.TenantID, got)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TrackingID < out[j].TrackingID }) // UUIDv7: time order
	if n := e.count(`SELECT count(*) FROM notifications WHERE kind = 'system'`); n != len(out) {
		e.t.Fatalf("%d notification rows but %d envelopes: every stored reply must be produced, and only those", n, len(out))
	}
	return out
}

// onlyReply asserts exactly one reply and returns it.
func (e *env) onlyReply() reply {
	e.t.Helper()
	return e.wantReplies(1)[0]
}

// wantReplies asserts exactly n replies and returns them.
func (e *env) wantReplies(n int) []reply {
	e.t.Helper()
	rs := e.replies()
	if len(rs) != n {
		e.t.Fatalf("%d replies, want %d: %+v", len(rs), n, rs)
	}
	return rs
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var removeKeyboard = map[string]any{"remove_keyboard": true}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// endingsDone waits (up to 10 s) until the notifications committed opt-outs and relinks cover have ended:
// the receiver ends them after the update's commit, in the background (issue 35).
func (e *env) endingsDone() {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.count(`SELECT count(*) FROM endings_due`) != 0 {
		if time.Now().After(deadline) {
			e.t.Fatal("the endings of the committed updates did not finish within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
