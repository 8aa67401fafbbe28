package updates_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/updates"
)

func TestSecretHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name    string
		headers []string
		status  int
	}{
		{"spec header", []string{updates.SecretHeader, secret}, http.StatusOK},
		{"platform header", []string{updates.PlatformSecretHeader, secret}, http.StatusOK},
		{"both headers right", []string{updates.SecretHeader, secret, updates.PlatformSecretHeader, secret}, http.StatusOK},
		{"missing", []string{"X-Other", "x"}, http.StatusUnauthorized},
		{"empty", []string{updates.SecretHeader, ""}, http.StatusUnauthorized},
		{"wrong", []string{updates.SecretHeader, "not-the-secret"}, http.StatusUnauthorized},
		{"wrong on the platform header", []string{updates.PlatformSecretHeader, secret + "x"}, http.StatusUnauthorized},
		{"prefix of the secret", []string{updates.SecretHeader, secret[:len(secret)-1]}, http.StatusUnauthorized},
		{"wrong next to right", []string{updates.SecretHeader, secret, updates.PlatformSecretHeader, "nope"}, http.StatusUnauthorized},
		{"bearer instead", []string{"Authorization", "Bearer " + secret}, http.StatusUnauthorized},
	}
	for _, c := range cases {
		r := e.post(textUpdate(e.updateID(), 42, "/start"), c.headers...)
		if c.status == http.StatusOK {
			expectOK(t, r)
		} else {
			expectError(t, r, c.status, "unauthorized")
		}
	}
	// Only the two authorised calls had an effect: each a /start explanation.
	if n := len(e.replies()); n != 3 {
		t.Fatalf("%d replies, want 3 (one per authorised call)", n)
	}
}

// tripwire fails the test when the handler reads the body.
type tripwire struct{ t *testing.T }

func (tw tripwire) Read([]byte) (int, error) {
	tw.t.Error("the body was read before the secret was checked")
	return 0, io.EOF
}

func TestUnauthorizedBeforeReadingTheBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, headers := range [][]string{nil, {updates.SecretHeader, "wrong"}} {
		req := httptest.NewRequest(http.MethodPost, updates.Path, tripwire{t})
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		w := httptest.NewRecorder()
		e.router.ServeHTTP(w, req)
		expectError(t, response{status: w.Code, body: w.Body.Bytes()}, http.StatusUnauthorized, "unauthorized")
	}
	// And over a real connection: the answer arrives while the client still holds most of a large body.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(bytes.Repeat([]byte(" "), 1024)) }() // then never finishes
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+updates.Path, pr)
	req.ContentLength = 10 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status = %d, want 401", res.StatusCode)
	}
}

func TestMalformedUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bodies := map[string]string{
		"empty":                    ``,
		"not JSON":                 `update_id=1`,
		"truncated":                `{"update_id": 1, "message": {`,
		"array":                    `[{"update_id": 1}]`,
		"null":                     `null`,
		"string":                   `"update"`,
		"number":                   `42`,
		"empty object":             `{}`,
		"missing update_id":        `{"message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "text": "/start"}}`,
		"update_id null":           `{"update_id": null}`,
		"update_id string":         `{"update_id": "17"}`,
		"update_id fraction":       `{"update_id": 1.5}`,
		"update_id exponent":       `{"update_id": 1e3}`,
		"update_id beyond int64":   `{"update_id": 99999999999999999999}`,
		"update_id bool":           `{"update_id": true}`,
		"update_id object":         `{"update_id": {"id": 1}}`,
		"message not an object":    `{"update_id": 5, "message": "hello"}`,
		"message.from wrong type":  `{"update_id": 6, "message": {"message_id": 1, "from": 12, "chat": {"id": 1, "type": "private"}}}`,
		"contact.user_id a string": `{"update_id": 7, "message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "contact": {"phone_number": "+15551230001", "user_id": "x"}}}`,
		"trailing garbage":         `{"update_id": 8} {}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			expectError(t, e.post(body), http.StatusBadRequest, "invalid_request")
		})
	}
	if n := e.count(`SELECT count(*) FROM processed_updates`); n != 0 {
		t.Fatalf("%d processed updates after malformed bodies, want 0", n)
	}
	if n := len(e.replies()); n != 0 {
		t.Fatalf("%d replies to malformed bodies, want 0", n)
	}
}

func TestBodySizeLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pad := func(total int) string {
		head := `{"update_id": 77, "edited_message": {"message_id": 1, "chat": {"id": 1, "type": "private"}, "text": "`
		tail := `"}}`
		return head + strings.Repeat("a", total-len(head)-len(tail)) + tail
	}
	expectOK(t, e.post(pad(updates.MaxBodyBytes)))                                                           // exactly 1 MiB: accepted
	expectError(t, e.post(pad(updates.MaxBodyBytes+1)), http.StatusRequestEntityTooLarge, "invalid_request") // one byte more
	expectError(t, e.post(pad(4*updates.MaxBodyBytes)), http.StatusRequestEntityTooLarge, "invalid_request")
}

func TestIgnoredUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	tok := e.token("acme", "u1", "Acme", "")
	chat := func(id int64, typ string) map[string]any { return map[string]any{"id": id, "type": typ, "title": "G"} }
	cases := map[string]map[string]any{
		"edited message": {"update_id": e.updateID(), "edited_message": map[string]any{
			"message_id": 1, "date": 1, "from": sender(5), "chat": privateChat(5), "text": "/start " + tok}},
		"callback query":  {"update_id": e.updateID(), "callback_query": map[string]any{"id": "1", "from": sender(5), "data": "x"}},
		"my_chat_member":  {"update_id": e.updateID(), "my_chat_member": map[string]any{"chat": privateChat(5), "from": sender(5)}},
		"chat_member":     {"update_id": e.updateID(), "chat_member": map[string]any{"chat": chat(-5, "group"), "from": sender(5)}},
		"unmodelled kind": {"update_id": e.updateID(), "poll": map[string]any{"id": "p"}},
		"no payload":      {"update_id": e.updateID()},
		"group /start": {"update_id": e.updateID(), "message": map[string]any{
			"message_id": 1, "date": 1, "from": sender(5), "chat": chat(-100, "group"), "text": "/start " + tok}},
		"supergroup contact": {"update_id": e.updateID(), "message": map[string]any{
			"message_id": 1, "date": 1, "from": sender(5), "chat": chat(-1001, "supergroup"),
			"contact": map[string]any{"phone_number": "+15551230001", "user_id": 5}}},
		"channel post as message": {"update_id": e.updateID(), "message": map[string]any{
			"message_id": 1, "date": 1, "chat": chat(-1002, "channel"), "text": "/dev_help"}},
		"sticker": {"update_id": e.updateID(), "message": map[string]any{
			"message_id": 1, "date": 1, "from": sender(5), "chat": privateChat(5), "sticker": map[string]any{"file_id": "x"}}},
		"from a bot": {"update_id": e.updateID(), "message": map[string]any{
			"message_id": 1, "date": 1, "from": map[string]any{"id": 6, "is_bot": true, "first_name": "B"}, "chat": privateChat(6), "text": "/start " + tok}},
	}
	for name, u := range cases {
		t.Run(name, func(t *testing.T) { expectOK(t, e.post(u)) })
	}
	if n := len(e.replies()); n != 0 {
		t.Fatalf("%d replies to ignored updates, want 0", n)
	}
	if n := e.count(`SELECT count(*) FROM links`); n != 0 {
		t.Fatalf("an ignored update linked an account")
	}
	if n := e.count(`SELECT count(*) FROM link_tokens WHERE used_at IS NOT NULL`); n != 0 {
		t.Fatalf("an ignored update consumed the token")
	}
}

func TestMetricsCountUpdatesByKindAndOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expectOK(t, e.post(map[string]any{"update_id": e.updateID(), "callback_query": map[string]any{"id": "1"}}))
	expectOK(t, e.post(textUpdate(e.updateID(), 5, "/start")))
	expectError(t, e.post(`{}`), http.StatusBadRequest, "invalid_request")
	expectError(t, e.post(`{}`, updates.SecretHeader, "x"), http.StatusUnauthorized, "unauthorized")
	res, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, series := range []string{
		`herald_webhook_updates_total{kind="callback_query",outcome="ignored"}`,
		`herald_webhook_updates_total{kind="start",outcome="replied"}`,
		`herald_webhook_updates_total{kind="none",outcome="invalid"}`,
		`herald_webhook_updates_total{kind="none",outcome="unauthorized"}`,
	} {
		if !bytes.Contains(b, []byte(series)) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// A reply that cannot be published takes nothing back: the update takes effect (once), its reply is
// stored and handed to the relay (published_at cleared), and the platform is answered 200 so that it does
// not send the update again. The worker's relay publishes the reply when the broker is back
// (internal/delivery: TestRelayPublishesWhatFailedToPublish).
func TestPublishFailureLeavesTheReplyToTheRelay(t *testing.T) {
	t.Parallel()
	st, _ := pgtest.NewStore(t)
	b, err := kafkatest.Start(prefix, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := b.Producer(t, prefix)
	b.Close() // the broker is gone before the first produce
	ob := outbox.New(st, p, outbox.Options{ProduceTimeout: 300 * time.Millisecond, Logger: discardLogger()})
	t.Cleanup(ob.Close)
	rc := updates.New(st, ob, updates.Options{Secret: secret, PhoneHashKey: []byte(phoneHashKey)})
	t.Cleanup(rc.Close)
	r := server.NewRouter(discardLogger())
	rc.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, fx: fixture.New(st), srv: srv, router: r}
	e.tenant("acme", "Acme Dev")
	tok := e.token("acme", "u1", "Acme", "")

	resp := e.post(textUpdate(4242, 5, "/start "+tok))
	if resp.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", resp.status, resp.body)
	}
	if n := e.count(`SELECT count(*) FROM processed_updates WHERE update_id = 4242`); n != 1 {
		t.Fatal("the update was not claimed")
	}
	if n := e.count(`SELECT count(*) FROM links WHERE tenant_id = 'acme' AND user_id = 'u1'`); n != 1 {
		t.Fatal("the account was not linked")
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE kind = 'system' AND status = 'queued' AND published_at IS NULL`); n != 1 {
		t.Fatalf("want the reply stored for the relay (queued, published_at NULL); got %d such rows", n)
	}
	// The platform's retry of the same update changes nothing.
	if resp := e.post(textUpdate(4242, 5, "/start "+tok)); resp.status != http.StatusOK {
		t.Fatalf("repeat: status = %d, want 200; body %s", resp.status, resp.body)
	}
	if n := e.count(`SELECT count(*) FROM notifications`); n != 1 {
		t.Fatalf("the repeated update queued another reply: %d rows", n)
	}
}
