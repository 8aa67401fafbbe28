package callback_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/openapitest"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/updates"
)

// gateway is the whole of Herald for one test: the tenant API and the webhook on one server, the messenger
// simulator (which also plays acme's callback receiver), a delivery worker and a callback sender, over a
// fresh database and broker.
type gateway struct {
	*env
	api  *httptest.Server
	sim  *sim.Server
	simS *httptest.Server
	keys map[string]string // tenant → API key
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	e := newEnv(t)
	logger := testLogger()
	const prefix = "cb"
	b := kafkatest.New(t, prefix)
	p := b.Producer(t, prefix)
	ob := outbox.New(e.st, p, outbox.Options{Logger: logger})
	t.Cleanup(ob.Close)

	opts := e.options()
	api := ingress.New(e.st, ob, logger, ingress.Options{DeepLinkBase: "https://t.me", BotUsername: sim.DefaultBotUsername,
		CallbackKey: e.key, CallbackPolicy: opts.Policy})
	const secret = "webhook-secret"
	rc := updates.New(e.st, ob, updates.Options{Secret: secret, PhoneHashKey: []byte("0123456789abcdef-key"), Logger: logger})
	t.Cleanup(rc.Close)
	r := server.NewRouter(logger)
	api.Routes(r)
	rc.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	s := sim.New(sim.Options{Logger: logger, GlobalRate: 1000, PerChatRate: 100, PerChatBurst: 100})
	simSrv := httptest.NewServer(s)
	t.Cleanup(func() { simSrv.Close(); s.Close() })
	client := messenger.New(simSrv.URL, s.Token(), nil)
	if err := updates.SetWebhookURL(context.Background(), client, srv.URL+updates.Path, secret); err != nil {
		t.Fatal(err)
	}
	w, err := delivery.New(delivery.Options{
		Store: e.st, Sender: client, Brokers: b.Addrs(), TopicPrefix: prefix, GroupID: "workers", Outbox: ob, Logger: logger,
		RateLimit: 1000, PerChatInterval: 10 * time.Millisecond, MaxAttempts: 2, Lease: 3 * time.Second,
		Backoff:     notification.Backoff{Base: 50 * time.Millisecond, Max: 100 * time.Millisecond},
		SendTimeout: 2 * time.Second, SchedulerInterval: 50 * time.Millisecond, RedriveInterval: 500 * time.Millisecond,
		GracePeriod: 2 * time.Second, CommitInterval: 100 * time.Millisecond, SessionTimeout: 6 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.start(opts)

	g := &gateway{env: e, api: srv, sim: s, simS: simSrv, keys: map[string]string{}}
	for _, tenant := range []string{"acme", "other"} {
		g.keys[tenant] = e.fx.APIKey(t, tenant)
	}
	return g
}

// call makes a /v1 request as tenant and decodes a JSON answer into out (when not nil).
func (g *gateway) call(tenant, method, path string, body any, want int, out any) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, g.api.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+g.keys[tenant])
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		g.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			g.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// sendAndWait sends a notification to user and waits for the terminal state want.
func (g *gateway) sendAndWait(user, want string) string {
	g.t.Helper()
	var sent struct {
		TrackingID string `json:"tracking_id"`
	}
	g.call("acme", "POST", "/v1/send", map[string]any{"user_id": user, "message": "hello " + want}, http.StatusAccepted, &sent)
	wait.Until(g.t, 20*time.Second, "a "+want+" notification", func() bool {
		var st map[string]any
		g.call("acme", "GET", "/v1/status/"+sent.TrackingID, nil, http.StatusOK, &st)
		return st["status"] == want
	})
	return sent.TrackingID
}

// settle waits until every message, the system replies included, has reached its final state, so that
// the faults a test sets next meet only its own notification.
func (g *gateway) settle() {
	g.t.Helper()
	wait.Until(g.t, 10*time.Second, "every message settled", func() bool {
		return g.count(`SELECT count(*) FROM notifications WHERE status NOT IN ('delivered', 'blocked', 'failed', 'unlinked')`) == 0
	})
}

// Each event type arrives once per change, through the real components: the link and the verification
// through the messenger webhook, the four terminal states of delivery through the worker, the ping through
// the API. Every signature verifies; every body matches the callback webhook of docs/openapi.yaml, and
// notification events carry exactly what GET /v1/status shows; another tenant's endpoint receives none of
// it.
func TestEveryEventTypeArrivesOnceThroughTheRealComponents(t *testing.T) {
	g := newGateway(t)
	var created struct {
		ID     string   `json:"id"`
		Secret string   `json:"secret"`
		Events []string `json:"events"`
	}
	g.call("acme", "POST", "/v1/callbacks", map[string]any{"url": g.simS.URL + "/sim/callbacks"}, http.StatusCreated, &created)
	// The simulator's receiver verifies with the secret, as the tenant would.
	res, err := http.Post(g.simS.URL+"/sim/callbacks/secrets", "application/json", bytes.NewReader([]byte(`{"secret":"`+created.Secret+`"}`)))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("registering the secret: %v %v", res, err)
	}
	res.Body.Close()
	stranger := newReceiver(t, nil)
	g.call("other", "POST", "/v1/callbacks", map[string]any{"url": stranger.srv.URL}, http.StatusCreated, nil)

	// user.linked: alice opens her deep link in the messenger.
	var link struct {
		DeepLink string `json:"deep_link"`
	}
	g.call("acme", "POST", "/v1/link-token", map[string]any{"user_id": "alice"}, http.StatusCreated, &link)
	if _, err := g.sim.OpenLink(1001, link.DeepLink); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the link", func() bool { return g.count(`SELECT count(*) FROM links WHERE user_id = 'alice'`) == 1 })
	// user.verified: she shares her contact.
	g.call("acme", "POST", "/v1/phone-verification/start", map[string]any{"user_id": "alice"}, http.StatusAccepted, nil)
	if _, err := g.sim.ShareContact(1001, "+15551234567", nil); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the verification", func() bool {
		var v map[string]any
		g.call("acme", "GET", "/v1/phone-verification/status/alice", nil, http.StatusOK, &v)
		return v["status"] == "verified"
	})
	// The four terminal states of delivery.
	terminal := map[string]string{}
	terminal["notification.delivered"] = g.sendAndWait("alice", "delivered")
	g.settle()
	if err := g.sim.Block(1001); err != nil {
		t.Fatal(err)
	}
	terminal["notification.blocked"] = g.sendAndWait("alice", "blocked")
	if err := g.sim.Unblock(1001); err != nil {
		t.Fatal(err)
	}
	g.settle()
	if err := g.sim.SetFaults(sim.Faults{Next5xx: 2}); err != nil { // both attempts fail: failed
		t.Fatal(err)
	}
	terminal["notification.failed"] = g.sendAndWait("alice", "failed")
	// bob's chat is unknown to the platform: unlinked.
	g.fx.VerifiedUser(t, "acme", "bob", 4242)
	terminal["notification.unlinked"] = g.sendAndWait("bob", "unlinked")
	// ping.
	g.call("acme", "POST", "/v1/callbacks/"+created.ID+"/test", nil, http.StatusAccepted, nil)

	// Blocking and unblocking the bot in the chat (the simulator's my_chat_member) are changes too (§9).
	want := []string{"user.linked", "user.verified", "notification.delivered", "user.blocked", "notification.blocked",
		"user.unblocked", "notification.failed", "notification.unlinked", "ping"}
	wait.Until(t, 20*time.Second, "every event", func() bool { return len(g.sim.Callbacks()) >= len(want) })
	time.Sleep(300 * time.Millisecond) // anything extra would have arrived by now
	got := g.sim.Callbacks()
	if len(got) != len(want) {
		t.Errorf("%d callbacks, want %d (one per change)", len(got), len(want))
	}
	seen := map[string]int{}
	ids := map[string]bool{}
	doc := openapitest.Load(t)
	for _, c := range got {
		if err := doc.ValidateWebhook("callback", c.Payload); err != nil {
			t.Error(err)
		}
		seen[c.Type]++
		ids[c.WebhookID] = true
		if c.Verified == nil || !*c.Verified {
			t.Errorf("%s did not verify: %s", c.Type, c.VerificationError)
		}
		typ, _, data := payloadOf(t, c.Payload)
		switch {
		case typ == "ping":
			if len(data) != 0 {
				t.Errorf("ping data %v", data)
			}
		case typ == "user.linked" || typ == "user.verified" || typ == "user.blocked" || typ == "user.unblocked":
			if !reflect.DeepEqual(data, map[string]any{"user_id": "alice"}) {
				t.Errorf("%s data %v", typ, data)
			}
		default:
			var status map[string]any
			g.call("acme", "GET", "/v1/status/"+terminal[typ], nil, http.StatusOK, &status)
			if !reflect.DeepEqual(data, status) {
				t.Errorf("%s data\n%v\nGET /v1/status shows\n%v", typ, data, status)
			}
		}
	}
	for _, typ := range want {
		if seen[typ] != 1 {
			t.Errorf("%s arrived %d times, want once", typ, seen[typ])
		}
	}
	if len(ids) != len(got) {
		t.Errorf("%d webhook-ids for %d events", len(ids), len(got))
	}
	if n := len(stranger.requests()); n != 0 {
		t.Errorf("another tenant's endpoint received %d of acme's events", n)
	}
	// GET /v1/callbacks shows when the endpoint last succeeded.
	var list struct {
		Data []map[string]any `json:"data"`
	}
	g.call("acme", "GET", "/v1/callbacks", nil, http.StatusOK, &list)
	if len(list.Data) != 1 || list.Data[0]["last_success_at"] == nil || list.Data[0]["last_failure_at"] != nil {
		t.Errorf("GET /v1/callbacks: %v", list.Data)
	}
}
