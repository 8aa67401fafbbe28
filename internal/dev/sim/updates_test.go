package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

func TestGetUpdatesOffsetsConfirm(t *testing.T) {
	e := newEnv(t, sim.Options{})
	var ids []int64
	for _, text := range []string{"a", "b", "c"} {
		id, err := e.sim.SendText(1, text)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	u := e.poll(t, 0)
	if len(u) != 3 || u[0].UpdateID != ids[0] || u[2].Message.Text != "c" {
		t.Fatalf("first fetch = %+v", u)
	}
	if again := e.poll(t, 0); len(again) != 3 {
		t.Errorf("without confirming, the same updates come again: %d", len(again))
	}
	u = e.poll(t, ids[1]) // confirms ids[0]
	if len(u) != 2 || u[0].UpdateID != ids[1] {
		t.Errorf("offset %d = %+v", ids[1], u)
	}
	if u = e.poll(t, ids[2]+1); len(u) != 0 {
		t.Errorf("all confirmed, got %+v", u)
	}
	if st := e.sim.Stats(); st.UpdatesPending != 0 || st.UpdatesGenerated != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestGetUpdatesNegativeOffsetAndLimit(t *testing.T) {
	e := newEnv(t, sim.Options{})
	for range 5 {
		e.sendText(t, 1, "x")
	}
	resp, err := http.Post(e.srv.URL+"/bot"+e.sim.Token()+"/getUpdates", "application/json", strings.NewReader(`{"limit":2}`))
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Result []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(r.Result) != 2 {
		t.Errorf("limit 2 returned %d", len(r.Result))
	}
	if u := e.poll(t, -2); len(u) != 2 {
		t.Errorf("offset -2 returned %d", len(u))
	}
	if len(e.sim.PendingUpdates()) != 2 {
		t.Errorf("a negative offset forgets all but the last updates: %d pending", len(e.sim.PendingUpdates()))
	}
}

func TestGetUpdatesLongPolls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	time.AfterFunc(150*time.Millisecond, func() { _, _ = e.sim.StartUser(1, "late") }) // an error shows as no update
	start := time.Now()
	u, err := e.client.GetUpdates(t.Context(), 0, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); len(u) != 1 || d < 100*time.Millisecond || d > 3*time.Second {
		t.Fatalf("long poll returned %d updates after %v; want the late update as soon as it exists", len(u), d)
	}
	start = time.Now()
	u, err = e.client.GetUpdates(t.Context(), u[0].UpdateID+1, 1, nil)
	if err != nil || len(u) != 0 {
		t.Fatalf("an empty long poll: %+v %v", u, err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("an empty long poll with timeout 1 returned after %v", d)
	}
}

func TestANewerPollEndsAnOlderOne(t *testing.T) {
	e := newEnv(t, sim.Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := e.client.GetUpdates(context.Background(), 0, 10, nil)
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	newer := make(chan error, 1)
	go func() {
		_, err := e.client.GetUpdates(t.Context(), 0, 1, nil)
		newer <- err
	}()
	defer func() {
		if err := <-newer; err != nil {
			t.Errorf("the newer poll: %v", err)
		}
	}()
	select {
	case err := <-errc:
		var apiErr *messenger.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 409 {
			t.Fatalf("the older poll ended with %v, want 409 Conflict", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the older poll was not ended")
	}
}

func TestAllowedUpdatesFilter(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	if _, err := e.client.GetUpdates(t.Context(), 0, 0, []string{"message"}); err != nil {
		t.Fatal(err)
	}
	noError(t, e.sim.Block(1)) // my_chat_member: filtered out
	id, _ := e.sim.StartUser(1, "x")
	u := e.poll(t, 0)
	if len(u) != 1 || u[0].UpdateID != id {
		t.Fatalf("with allowed_updates [message] only the message arrives: %+v", u)
	}
	if id, err := e.sim.InjectUpdate(json.RawMessage(`{"callback_query":{}}`)); err != nil || id != 0 {
		t.Errorf("a filtered update returns id 0: %d %v", id, err)
	}
}

// receiver is a webhook endpoint that records what it receives, answering with status() each time. When
// set, onUpdate handles each update it accepts before it answers, as a bot does.
type receiver struct {
	mu       sync.Mutex
	bodies   []messenger.Update
	secrets  []string
	status   func(n int) int
	onUpdate func(messenger.Update)
	srv      *httptest.Server
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	rc := &receiver{status: status}
	calls := 0
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		calls++
		code := rc.status(calls)
		var u messenger.Update
		if code == 200 {
			var err error
			u, err = messenger.ParseUpdate(body)
			if err != nil || r.Header.Get("Content-Type") != "application/json" || r.Method != http.MethodPost {
				t.Errorf("webhook got %s %s (%s): %v", r.Method, body, r.Header.Get("Content-Type"), err)
			}
			rc.bodies = append(rc.bodies, u)
			rc.secrets = append(rc.secrets, r.Header.Get("X-Telegram-Bot-Api-Secret-Token"))
		}
		handle := rc.onUpdate
		rc.mu.Unlock()
		if code == 200 && handle != nil {
			handle(u)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) received() ([]messenger.Update, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]messenger.Update(nil), rc.bodies...), append([]string(nil), rc.secrets...)
}

func TestWebhookDeliversInOrderWithTheSecret(t *testing.T) {
	e := newEnv(t, sim.Options{})
	pendingBefore, _ := e.sim.StartUser(1, "before") // queued before the webhook: delivered too
	rc := newReceiver(t, func(int) int { return 200 })
	if err := e.client.SetWebhook(t.Context(), rc.srv.URL+"/messenger/webhook", "s3cr3t_-X", []string{"message"}); err != nil {
		t.Fatal(err)
	}
	want := []int64{pendingBefore}
	for _, text := range []string{"/start tok", "hello", "/dev_help"} {
		id, err := e.sim.SendText(1, text)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	waitFor(t, "4 webhook deliveries", func() bool { b, _ := rc.received(); return len(b) == 4 })
	got, secrets := rc.received()
	for i, u := range got {
		if u.UpdateID != want[i] {
			t.Errorf("delivery %d: update %d, want %d (in order)", i, u.UpdateID, want[i])
		}
		if secrets[i] != "s3cr3t_-X" {
			t.Errorf("delivery %d: secret header %q", i, secrets[i])
		}
	}
	if got[1].Message.Text != "/start tok" {
		t.Errorf("second delivery = %+v", got[1].Message)
	}
	// The receiver has the last update slightly before the simulator sees the 200.
	waitFor(t, "no pending updates", func() bool { return e.sim.Stats().UpdatesPending == 0 })
	info, err := e.client.GetWebhookInfo(t.Context())
	if err != nil || info.URL != rc.srv.URL+"/messenger/webhook" || info.PendingUpdateCount != 0 {
		t.Errorf("webhook info = %+v, %v", info, err)
	}
	if st := e.sim.Stats(); st.WebhookDeliveries != 4 || st.WebhookFailures != 0 {
		t.Errorf("stats = %+v", st)
	}
	// Polling is refused while a webhook is set.
	if _, err := e.client.GetUpdates(t.Context(), 0, 0, nil); messenger.ErrorCode(err) != 409 {
		t.Errorf("getUpdates with a webhook: %v, want 409", err)
	}
}

func TestWebhookRetriesRefusedUpdatesInOrder(t *testing.T) {
	e := newEnv(t, sim.Options{})
	// The first two attempts fail: the first update is retried, the second waits for it.
	rc := newReceiver(t, func(n int) int {
		if n <= 2 {
			return 503
		}
		return 200
	})
	if err := e.client.SetWebhook(t.Context(), rc.srv.URL, "", nil); err != nil {
		t.Fatal(err)
	}
	a, _ := e.sim.SendText(1, "a")
	b, _ := e.sim.SendText(1, "b")
	waitFor(t, "2 deliveries", func() bool { u, _ := rc.received(); return len(u) == 2 })
	got, secrets := rc.received()
	if got[0].UpdateID != a || got[1].UpdateID != b {
		t.Errorf("order after retries: %d, %d; want %d, %d", got[0].UpdateID, got[1].UpdateID, a, b)
	}
	if secrets[0] != "" {
		t.Errorf("no secret set, yet the header was %q", secrets[0])
	}
	// The simulator counts a delivery when the receiver's answer is back: a moment after the receiver has
	// recorded the update (a cold CI run read the stats in between and saw one delivery).
	waitFor(t, "the simulator to count the second delivery", func() bool { return e.sim.Stats().WebhookDeliveries >= 2 })
	st := e.sim.Stats()
	if st.WebhookFailures != 2 || st.WebhookDeliveries != 2 || st.WebhookDropped != 0 {
		t.Errorf("stats = %+v", st)
	}
	if info := e.sim.WebhookInfo(); info.LastErrorMessage == "" || info.LastErrorDate == 0 {
		t.Errorf("the last webhook error must be reported: %+v", info)
	}
}

func TestWebhookDropsAnUpdateRefusedTooOften(t *testing.T) {
	e := newEnv(t, sim.Options{WebhookAttempts: 3})
	rc := newReceiver(t, func(n int) int {
		if n <= 3 {
			return 500
		}
		return 200
	})
	noError(t, e.client.SetWebhook(t.Context(), rc.srv.URL, "s", nil))
	e.sendText(t, 1, "poison")
	second, _ := e.sim.SendText(1, "fine")
	waitFor(t, "the second update", func() bool { u, _ := rc.received(); return len(u) == 1 })
	got, _ := rc.received()
	if got[0].UpdateID != second {
		t.Errorf("delivered %d, want %d", got[0].UpdateID, second)
	}
	if st := e.sim.Stats(); st.WebhookDropped != 1 || st.WebhookFailures != 3 {
		t.Errorf("stats = %+v", st)
	}
}

func TestDeleteWebhookReturnsToPolling(t *testing.T) {
	e := newEnv(t, sim.Options{})
	noError(t, e.client.SetWebhook(t.Context(), "http://127.0.0.1:1/unreachable", "s", nil))
	if err := e.client.DeleteWebhook(t.Context()); err != nil {
		t.Fatal(err)
	}
	id, _ := e.sim.SendText(1, "after delete")
	u := e.poll(t, 0)
	if len(u) != 1 || u[0].UpdateID != id {
		t.Fatalf("after deleteWebhook, getUpdates gets the update: %+v", u)
	}
	if info := e.sim.WebhookInfo(); info.URL != "" {
		t.Errorf("webhook still set: %+v", info)
	}
}

func TestSetWebhookValidatesAndDropsPending(t *testing.T) {
	e := newEnv(t, sim.Options{})
	for _, tc := range []struct{ url, secret string }{{"ftp://x", "s"}, {"http://x", "bad secret!"}} {
		if err := e.client.SetWebhook(t.Context(), tc.url, tc.secret, nil); messenger.ErrorCode(err) != 400 {
			t.Errorf("setWebhook(%q, %q) = %v, want 400", tc.url, tc.secret, err)
		}
	}
	e.sendText(t, 1, "old")
	e.sendText(t, 1, "older")
	// An unreachable URL keeps the updates pending, then drop_pending_updates discards them.
	err := e.client.SetWebhookWith(t.Context(), messenger.SetWebhookRequest{URL: "http://127.0.0.1:1/", DropPendingUpdates: true})
	if err != nil {
		t.Fatal(err)
	}
	noError(t, e.client.DeleteWebhook(t.Context()))
	if u := e.poll(t, 0); len(u) != 0 {
		t.Errorf("drop_pending_updates left %d updates", len(u))
	}
}

// membership is a ChatMemberUpdated as the webhook receives it.
type membership struct {
	Chat messenger.Chat `json:"chat"`
	From messenger.User `json:"from"`
	Date int64          `json:"date"`
	Old  chatMember     `json:"old_chat_member"`
	New  chatMember     `json:"new_chat_member"`
}

type chatMember struct {
	Status    string         `json:"status"`
	User      messenger.User `json:"user"`
	UntilDate *int64         `json:"until_date"`
}

// blockResult is the control API's answer to a block or an unblock: the user, and the update it sent.
type blockResult struct {
	actionResult
	Blocked bool `json:"blocked"`
	Changed bool `json:"changed"`
}

// A user blocking or unblocking the bot reaches its webhook as a my_chat_member update, as on the platform: a
// ChatMemberUpdated with the private chat, the user, the date, and the bot's old and new membership (kicked,
// banned for good: until_date 0; member). The control route answers once the webhook has answered it, so
// that a test's next step finds the block handled.
func TestBlockAndUnblockReachTheWebhookAsMyChatMember(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001, FirstName: "Ann", Username: "ann"})
	rc := newReceiver(t, func(int) int { return 200 })
	e.mustBotAPI(t, "setWebhook", map[string]any{"url": rc.srv.URL, "allowed_updates": []string{"message", "my_chat_member", "callback_query"}}, nil)

	var blocked, again, unblocked blockResult
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, &blocked)
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, &again)
	e.mustControl(t, "POST", "/sim/users/1001/unblock", nil, &unblocked)
	if !blocked.Blocked || !blocked.Changed || blocked.UpdateID == 0 || blocked.Webhook.State != sim.WebhookAnswered {
		t.Errorf("block answered %+v", blocked)
	}
	if !again.Blocked || again.Changed || again.UpdateID != 0 {
		t.Errorf("blocking again answered %+v, want no change and no update", again)
	}
	if unblocked.Blocked || !unblocked.Changed || unblocked.UpdateID == 0 || unblocked.Webhook.State != sim.WebhookAnswered {
		t.Errorf("unblock answered %+v", unblocked)
	}

	got, _ := rc.received()
	if len(got) != 2 || got[0].UpdateID != blocked.UpdateID || got[1].UpdateID != unblocked.UpdateID {
		t.Fatalf("the webhook got %+v, want the block's and the unblock's updates", got)
	}
	var ms []membership
	for _, u := range got {
		var m membership
		if u.Kind() != messenger.KindMyChatMember || json.Unmarshal(u.MyChatMember, &m) != nil {
			t.Fatalf("a %s update: %s", u.Kind(), u.MyChatMember)
		}
		ms = append(ms, m)
	}
	me := e.sim.Bot()
	for i, m := range ms {
		if m.Chat.ID != 1001 || m.Chat.Type != "private" || m.Chat.FirstName != "Ann" || m.Date == 0 ||
			m.From.ID != 1001 || m.From.IsBot || m.From.FirstName != "Ann" || m.From.Username != "ann" {
			t.Errorf("update %d: chat %+v, from %+v, date %d", i, m.Chat, m.From, m.Date)
		}
		if m.Old.User != me || m.New.User != me {
			t.Errorf("update %d: the member is %+v / %+v, want the bot %+v", i, m.Old.User, m.New.User, me)
		}
	}
	kicked := func(c chatMember) bool { return c.Status == "kicked" && c.UntilDate != nil && *c.UntilDate == 0 }
	if ms[0].Old.Status != "member" || !kicked(ms[0].New) {
		t.Errorf("the block: %+v -> %+v (until %v), want member -> kicked until 0", ms[0].Old, ms[0].New, ms[0].New.UntilDate)
	}
	if !kicked(ms[1].Old) || ms[1].New.Status != "member" {
		t.Errorf("the unblock: %+v -> %+v, want kicked -> member", ms[1].Old, ms[1].New)
	}
}

// my_chat_member goes only to a bot that asked for it: allowed_updates without it leaves blocks out, for a
// webhook and for getUpdates alike; the platform's default (an empty list, or none ever given) includes it
// and leaves chat_member out. A list given once holds until another is given.
func TestMyChatMemberOnlyWhenAllowed(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	rc := newReceiver(t, func(int) int { return 200 })
	e.mustBotAPI(t, "setWebhook", map[string]any{"url": rc.srv.URL, "allowed_updates": []string{"message"}}, nil)
	var res blockResult
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, &res)
	if !res.Changed || res.UpdateID != 0 || res.Webhook.State != sim.WebhookFiltered {
		t.Errorf("a block the bot did not ask for answered %+v, want it filtered", res)
	}
	e.mustBotAPI(t, "setWebhook", map[string]any{"url": rc.srv.URL, "allowed_updates": []string{}}, nil)
	e.mustControl(t, "POST", "/sim/users/1001/unblock", nil, &res)
	if res.Webhook.State != sim.WebhookAnswered {
		t.Errorf("an unblock under the default subscription answered %+v", res)
	}
	if got, _ := rc.received(); len(got) != 1 || got[0].Kind() != messenger.KindMyChatMember {
		t.Errorf("the webhook got %+v, want the unblock only", got)
	}

	e.mustBotAPI(t, "deleteWebhook", map[string]any{}, nil)
	e.mustBotAPI(t, "getUpdates", map[string]any{"allowed_updates": []string{"message", "callback_query"}}, nil)
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, &res)
	e.mustBotAPI(t, "getUpdates", map[string]any{"allowed_updates": []string{"my_chat_member"}}, nil)
	e.mustControl(t, "POST", "/sim/users/1001/unblock", nil, &res)
	if _, err := e.sim.InjectUpdate(json.RawMessage(`{"chat_member":{}}`)); err != nil {
		t.Fatal(err)
	}
	var polled []messenger.Update
	e.mustBotAPI(t, "getUpdates", map[string]any{}, &polled) // the list given last still holds
	if len(polled) != 1 || polled[0].UpdateID != res.UpdateID || !strings.Contains(string(polled[0].MyChatMember), `"new_chat_member":{"status":"member"`) {
		t.Errorf("polled %+v, want the unblock only", polled)
	}
	e.mustBotAPI(t, "getUpdates", map[string]any{"offset": res.UpdateID + 1, "allowed_updates": []string{}}, nil)
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, &res)
	if _, err := e.sim.InjectUpdate(json.RawMessage(`{"chat_member":{}}`)); err != nil {
		t.Fatal(err)
	}
	e.mustBotAPI(t, "getUpdates", map[string]any{}, &polled)
	if len(polled) != 1 || polled[0].Kind() != messenger.KindMyChatMember {
		t.Errorf("the default subscription polled %+v, want the block and no chat_member", polled)
	}
}

// With WebhookPlainHTTP the simulator posts to an https:// webhook over plain http, as a load balancer
// terminating TLS would pass it on; without it, the same URL is tried over TLS and fails.
func TestWebhookPlainHTTPPostsAnHTTPSURLOverHTTP(t *testing.T) {
	for _, plain := range []bool{true, false} {
		e := newEnv(t, sim.Options{WebhookPlainHTTP: plain, WebhookAttempts: 1})
		rc := newReceiver(t, func(int) int { return 200 })
		hook := strings.Replace(rc.srv.URL, "http://", "https://", 1) + "/messenger/webhook"
		if err := e.client.SetWebhook(t.Context(), hook, "s3cr3t", []string{"message"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.sim.SendText(1, "hello"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the update delivered or dropped", func() bool { return e.sim.Stats().UpdatesPending == 0 })
		got, _ := rc.received()
		if st := e.sim.Stats(); plain && (len(got) != 1 || st.WebhookDeliveries != 1) {
			t.Errorf("plain http: the receiver got %d updates, %d deliveries counted; want 1", len(got), st.WebhookDeliveries)
		} else if !plain && (len(got) != 0 || st.WebhookFailures == 0) {
			t.Errorf("over TLS to a plain server: the receiver got %d updates, %d failures counted; want 0 and some", len(got), st.WebhookFailures)
		}
	}
}
