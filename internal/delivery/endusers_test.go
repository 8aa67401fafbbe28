package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/updates"
)

// End users in control (spec v1-extensions §9) through the whole pipeline: the simulated platform, the
// webhook, the tenant API and the workers. A blocked user's notifications end blocked without a call; a
// 403 marks the block; /stop in the chat refuses the tenant's next send, and a tap that races sends lets
// none reach the chat after it is acknowledged.

// chatWebhook serves a webhook receiver that can answer taps (the shared bot's client), registered with
// the simulator.
func (e *env) chatWebhook() {
	e.t.Helper()
	const secret = "webhook-secret"
	bots := bot.NewRegistry(bot.RegistryOptions{Store: e.st, APIURL: e.simSrv.URL, Shared: e.client, Logger: e.logger})
	rc := updates.New(e.st, e.outbox, updates.Options{Secret: secret, PhoneHashKey: []byte("0123456789abcdef-key"), Bots: bots, Logger: e.logger})
	r := server.NewRouter(e.logger)
	rc.Routes(r)
	srv := httptest.NewServer(r)
	e.t.Cleanup(func() { srv.Close(); rc.Close() })
	if err := updates.SetWebhookURL(context.Background(), e.client, srv.URL+updates.Path, secret); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) linkBlocked(tenant, user string) bool {
	e.t.Helper()
	l, ok := fixture.New(e.st).LinkOf(e.t, tenant, user)
	if !ok {
		e.t.Fatalf("%s/%s is not linked", tenant, user)
	}
	return l.Blocked
}

// answered waits for the webhook's answer to the update.
func (e *env) answered(updateID int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o := e.sim.WaitWebhook(ctx, updateID); o.State != sim.WebhookAnswered || o.Status != http.StatusOK {
		e.t.Fatalf("update %d: webhook outcome %+v", updateID, o)
	}
}

// say sends text in the user's chat and waits for the webhook's answer.
func (e *env) say(user int64, text string) {
	e.t.Helper()
	id, err := e.sim.SendText(user, text)
	if err != nil {
		e.t.Fatal(err)
	}
	e.answered(id)
}

// keyboardShown waits until the chat's latest message carries an inline keyboard.
func (e *env) keyboardShown(chat int64) {
	e.t.Helper()
	wait.Until(e.t, 10*time.Second, "the keyboard in the chat", func() bool {
		ms := e.sim.Messages(chat)
		return len(ms) > 0 && len(ms[len(ms)-1].ReplyMarkup) > 0
	})
}

// tap taps a button and waits for the webhook's answer; it returns the query with the bot's answer.
func (e *env) tap(user int64, button string) sim.CallbackQuery {
	e.t.Helper()
	q, err := e.sim.Tap(user, sim.Tap{Button: button})
	if err != nil {
		e.t.Fatal(err)
	}
	e.answered(q.UpdateID)
	q, _ = e.sim.DefaultBot().CallbackQuery(q.ID)
	return q
}

// A user who blocked the bot in the chat: the send is accepted and ends blocked (1105) without a call to
// the platform; once unblocked, the next is delivered.
func TestASendToABlockedUserEndsBlockedWithoutACall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, simOptions(nil))
	e.chatWebhook()
	e.user("ann", 701, true)
	e.start(e.fastOptions())
	if err := e.sim.Block(701); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the block to be marked", func() bool { return e.linkBlocked("acme", "ann") })

	sends := e.sim.Stats().Sends
	id, _ := e.send("ann", "hello", 5)
	r := e.waitTerminal(id, 10*time.Second)
	if r.Status != "blocked" || r.ErrCode != notification.CodeBlocked || r.ErrMsg == nil || *r.ErrMsg != notification.BlockedMessage || r.MsgID != nil {
		t.Fatalf("the send to a blocked user: %s %d %v, want blocked 1105 %q", r.Status, r.ErrCode, r.ErrMsg, notification.BlockedMessage)
	}
	if n := e.sim.Stats().Sends - sends; n != 0 {
		t.Fatalf("%d sendMessage calls for a blocked user, want none", n)
	}

	if err := e.sim.Unblock(701); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the block to be cleared", func() bool { return !e.linkBlocked("acme", "ann") })
	id, _ = e.send("ann", "welcome back", 5)
	e.waitStatus(id, "delivered", 10*time.Second)
}

// A block Herald was not told of (the update never came): the platform's 403 ends the notification blocked
// and marks the link, with a user.blocked event; the next send then makes no call.
func TestA403MarksTheChatBlocked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, simOptions(nil))
	key, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	fixture.New(e.st).CallbackEndpoint(t, key, "acme", "https://hooks.example.com/acme", "user.blocked")
	e.user("ann", 701, true)
	if err := e.sim.Block(701); err != nil { // no webhook: the update stays with the platform
		t.Fatal(err)
	}
	e.start(e.fastOptions())

	id, _ := e.send("ann", "hello", 5)
	r := e.waitTerminal(id, 10*time.Second)
	if r.Status != "blocked" || r.ErrCode != http.StatusForbidden {
		t.Fatalf("the first send: %s %d, want blocked by the platform's 403", r.Status, r.ErrCode)
	}
	wait.Until(t, 10*time.Second, "the 403 to mark the link", func() bool { return e.linkBlocked("acme", "ann") })
	events := 0
	for _, ev := range fixture.New(e.st).CallbackInbox(t) {
		if ev.TenantID == "acme" && ev.Type == "user.blocked" && ev.UserID == "ann" {
			events++
		}
	}
	if events != 1 {
		t.Fatalf("%d user.blocked events, want 1", events)
	}

	rejected := e.sim.Stats().Rejected
	id, _ = e.send("ann", "again", 5)
	if r := e.waitTerminal(id, 10*time.Second); r.Status != "blocked" || r.ErrCode != notification.CodeBlocked {
		t.Fatalf("the next send: %s %d, want blocked 1105 without a call", r.Status, r.ErrCode)
	}
	if n := e.sim.Stats().Rejected - rejected; n != 0 {
		t.Fatalf("%d more calls refused by the platform, want none", n)
	}
}

// /stop in the chat with two tenants → a keyboard; a tap opts out of acme: answered, the message edited,
// acme's next send refused 409 user_opted_out, and acme cannot lift it (409 opted_out_by_user). /resume
// lifts it at once (the only thing stopped), and the next send is delivered.
func TestStopInTheChatRefusesTheTenantsNextSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, simOptions(nil))
	e.chatWebhook()
	e.user("ann", 701, true)
	fixture.New(e.st).Tenant(t, "globex", fixture.DeveloperName("Globex"))
	fixture.New(e.st).VerifiedUser(t, "globex", "ann-g", 701)
	e.start(e.fastOptions())

	e.say(701, "/stop")
	e.keyboardShown(701)
	q := e.tap(701, "Acme Developer")
	if q.Answer == nil || q.Answer.Text != "Stopped." {
		t.Fatalf("the tap's answer = %+v, want the notice \"Stopped.\"", q.Answer)
	}
	ms := e.sim.Messages(701)
	if m := ms[len(ms)-1]; m.EditedAt == nil || !strings.HasPrefix(m.Text, "A message from Acme Developer\nStopped: Acme Developer.") || len(m.ReplyMarkup) != 0 {
		t.Fatalf("the keyboard's message is %q (edited %v, markup %s), want it edited to say acme is stopped", m.Text, m.EditedAt, m.ReplyMarkup)
	}

	status, body, _ := e.post("ann", "a sale!", 5)
	if status != http.StatusConflict || !strings.Contains(string(body), `"user_opted_out"`) {
		t.Fatalf("a send after /stop: %d %s, want 409 user_opted_out", status, body)
	}
	if status, m := e.call("DELETE", "/v1/users/ann/opt-out", map[string]any{}); status != http.StatusConflict || m["error"] != "opted_out_by_user" {
		t.Fatalf("the tenant lifting the user's own /stop: %d %v, want 409 opted_out_by_user", status, m)
	}

	e.say(701, "/resume")
	wait.Until(t, 10*time.Second, "the /resume reply", func() bool {
		ms := e.sim.Messages(701)
		return strings.Contains(ms[len(ms)-1].Text, "Resumed: Acme Developer.")
	})
	id, _ := e.send("ann", "welcome back", 5)
	e.waitStatus(id, "delivered", 10*time.Second)
}

// A tap racing sends: every send is either refused (409 user_opted_out) or accepted and then delivered or
// ended blocked "opted out" — and none that was still waiting when the opt-out committed reaches the chat
// after the tap was acknowledged; every send made after the acknowledgement is refused. A notification a
// worker had already claimed may still land a moment after the acknowledgement (its call was under way:
// docs/end-users.md, "No delivery after the acknowledgement"): the test reads which were claimed or
// delivered right after the acknowledgement, and only those may arrive after it.
func TestATapRacingSendsLetsNoneThroughAfterTheAcknowledgement(t *testing.T) {
	t.Parallel()
	opts := simOptions(nil)
	opts.PerChatRate = -1 // the sends come as fast as the worker takes them
	e := newEnv(t, opts)
	e.chatWebhook()
	e.user("ann", 701, true)
	fixture.New(e.st).Tenant(t, "globex", fixture.DeveloperName("Globex"))
	fixture.New(e.st).VerifiedUser(t, "globex", "ann-g", 701)
	w := e.fastOptions()
	w.PerChatInterval = time.Millisecond
	e.start(w)
	e.say(701, "/stop")
	e.keyboardShown(701)

	type attempt struct {
		text    string
		started time.Time
		status  int
		body    []byte
	}
	var (
		mu       sync.Mutex
		attempts []attempt
		ackAt    time.Time // zero until the tap is acknowledged
		wg       sync.WaitGroup
	)
	afterAck := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range attempts {
			if !ackAt.IsZero() && a.started.After(ackAt) {
				n++
			}
		}
		return n
	}
	done := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			a := attempt{text: fmt.Sprintf("race %d", i), started: time.Now()}
			a.status, a.body, _ = e.post("ann", a.text, 5)
			mu.Lock()
			attempts = append(attempts, a)
			mu.Unlock()
		}
	})
	wait.Until(t, 10*time.Second, "sends before the tap", func() bool { mu.Lock(); defer mu.Unlock(); return len(attempts) >= 10 })
	q, err := e.sim.Tap(701, sim.Tap{Button: "Acme Developer"})
	if err != nil {
		t.Fatal(err)
	}
	e.answered(q.UpdateID)
	mu.Lock()
	ackAt = time.Now()
	mu.Unlock()
	// The notifications claimed before the opt-out committed: delivering or delivered now. Every other one
	// of ann's was waiting at the commit and must not be sent at all (a claim after the commit that let one
	// through would also show as queued ones delivered below).
	rows, err := e.st.Pool().Query(context.Background(), `SELECT tracking_id::text FROM notifications
		WHERE tenant_id = 'acme' AND user_id = 'ann' AND status IN ('delivering', 'delivered')`)
	if err != nil {
		t.Fatal(err)
	}
	claimedAtAck, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "sends after the acknowledgement", func() bool { return afterAck() >= 10 })
	close(done)
	wg.Wait()

	var accepted []string
	texts := map[string]string{} // tracking id → text
	for _, a := range attempts {
		switch {
		case a.status == http.StatusAccepted && a.started.After(ackAt):
			t.Fatalf("a send made after the acknowledgement was accepted: %s", a.body)
		case a.status == http.StatusAccepted:
			var out struct {
				TrackingID string `json:"tracking_id"`
			}
			_ = json.Unmarshal(a.body, &out)
			accepted = append(accepted, out.TrackingID)
			texts[out.TrackingID] = a.text
		case a.status != http.StatusConflict || !strings.Contains(string(a.body), `"user_opted_out"`):
			t.Fatalf("a send answered %d %s, want 202 or 409 user_opted_out", a.status, a.body)
		}
	}
	statuses := e.waitAllTerminal(accepted, 20*time.Second)
	count := map[string]int{}
	for _, s := range statuses {
		count[s]++
	}
	t.Logf("%d sends: %d accepted (%v), the rest refused", len(attempts), len(accepted), count)
	delivered := map[string]time.Time{}
	for _, m := range e.sim.Messages(701) {
		delivered[m.Text] = m.Time
	}
	for id, s := range statuses {
		text := "A message from Acme Shop\n" + texts[id]
		switch s {
		case "delivered":
			at, ok := delivered[text]
			if !ok {
				t.Fatalf("%q ended delivered and is not in the chat", texts[id])
			}
			if at.After(ackAt) && !slices.Contains(claimedAtAck, id) {
				t.Fatalf("%q reached the chat at %v, after the tap's acknowledgement at %v, and was not claimed when the opt-out committed", texts[id], at, ackAt)
			}
			if at.After(ackAt) {
				t.Logf("%q, claimed before the opt-out committed, reached the chat %v after the acknowledgement", texts[id], at.Sub(ackAt))
			}
		case "blocked":
			if r := e.row(id); r.ErrCode != notification.CodeOptedOut {
				t.Fatalf("%q ended blocked with %d, want 1106 (opted out)", texts[id], r.ErrCode)
			}
			if _, ok := delivered[text]; ok {
				t.Fatalf("%q ended blocked but reached the chat", texts[id])
			}
		default:
			t.Fatalf("%q ended %s, want delivered or blocked", texts[id], s)
		}
	}
}
