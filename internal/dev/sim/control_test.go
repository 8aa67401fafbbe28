package sim_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

type actionResult struct {
	OK       bool               `json:"ok"`
	UpdateID int64              `json:"update_id"`
	Webhook  sim.WebhookOutcome `json:"webhook"`
	Error    string             `json:"error"`
	Message  string             `json:"message"`
}

func TestUsersAreCreatedAndUpdated(t *testing.T) {
	e := newEnv(t, sim.Options{})
	var u sim.User
	e.mustControl(t, "POST", "/sim/users", sim.User{ID: 1001, FirstName: "Ann", Username: "ann", PhoneNumber: "+15551230001"}, &u)
	if u.ID != 1001 || u.FirstName != "Ann" || u.PhoneNumber != "+15551230001" || u.Blocked || u.Deleted {
		t.Errorf("created user = %+v", u)
	}
	e.mustControl(t, "POST", "/sim/users", map[string]any{"id": 1001, "last_name": "Lee"}, &u)
	if u.FirstName != "Ann" || u.LastName != "Lee" {
		t.Errorf("ensuring again must keep fields and update given ones: %+v", u)
	}
	e.mustControl(t, "GET", "/sim/users/1001", nil, &u)
	if u.LastName != "Lee" {
		t.Errorf("GET user = %+v", u)
	}
	if status := e.control(t, "GET", "/sim/users/2", nil, nil); status != 404 {
		t.Errorf("unknown user: %d, want 404", status)
	}
	if status := e.control(t, "POST", "/sim/users", map[string]any{"id": -5}, nil); status != 400 {
		t.Errorf("a non-positive id: %d, want 400", status)
	}
	if status := e.control(t, "POST", "/sim/users", "not an object", nil); status != 400 {
		t.Errorf("malformed body: %d, want 400", status)
	}
	var list struct{ Users []sim.User }
	e.mustControl(t, "GET", "/sim/users", nil, &list)
	if len(list.Users) != 1 || list.Users[0].ID != 1001 {
		t.Errorf("user list = %+v", list)
	}
	// Each user has a private chat with chat id == user id: the bot can write to it at once.
	if _, err := e.send(t, 1001, "hello"); err != nil {
		t.Errorf("sending to a new user's chat: %v", err)
	}
}

func TestStartSendsTheDeepLinkPayload(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001, FirstName: "Ann", Username: "ann"})
	var res actionResult
	e.mustControl(t, "POST", "/sim/users/1001/start", map[string]string{"payload": "tok_ABC-123"}, &res)
	if !res.OK || res.UpdateID == 0 {
		t.Fatalf("start answered %+v", res)
	}
	e.mustControl(t, "POST", "/sim/users/1001/start", nil, nil) // plain /start

	u := e.poll(t, 0)
	if len(u) != 2 {
		t.Fatalf("got %d updates, want 2", len(u))
	}
	m := u[0].Message
	if u[0].UpdateID != res.UpdateID || u[0].Kind() != "message" || m.Text != "/start tok_ABC-123" {
		t.Fatalf("update = %+v, message %+v", u[0], m)
	}
	if m.From == nil || m.From.ID != 1001 || m.From.IsBot || m.From.FirstName != "Ann" || m.Chat.ID != 1001 || m.Chat.Type != "private" {
		t.Errorf("sender and chat = %+v / %+v", m.From, m.Chat)
	}
	if len(m.Entities) != 1 || m.Entities[0] != (messenger.MessageEntity{Type: "bot_command", Offset: 0, Length: 6}) {
		t.Errorf("entities = %+v, want the /start bot_command", m.Entities)
	}
	if m.Date == 0 || m.MessageID == 0 {
		t.Errorf("date and message id must be set: %+v", m)
	}
	if u[1].Message.Text != "/start" {
		t.Errorf("plain start = %q", u[1].Message.Text)
	}
}

func TestStartCreatesUnknownUsers(t *testing.T) {
	e := newEnv(t, sim.Options{})
	if _, err := e.sim.StartUser(77, "t"); err != nil {
		t.Fatal(err)
	}
	if u, ok := e.sim.GetUser(77); !ok || u.FirstName == "" {
		t.Errorf("user 77 = %+v, %v; want created with a default name", u, ok)
	}
}

func TestOpenLinkParsesDeepLinks(t *testing.T) {
	e := newEnv(t, sim.Options{})
	for _, link := range []string{
		"https://t.me/herald_sim_bot?start=abc_DEF-1",
		"tg://resolve?domain=herald_sim_bot&start=abc_DEF-1",
		"http://localhost:8080/t.me/herald_sim_bot?start=abc_DEF-1",
	} {
		var res actionResult
		e.mustControl(t, "POST", "/sim/users/5/open-link", map[string]string{"url": link}, &res)
		u := e.poll(t, res.UpdateID)
		if len(u) != 1 || u[0].Message.Text != "/start abc_DEF-1" {
			t.Errorf("%s produced %+v", link, u)
		}
	}
	for _, link := range []string{"https://t.me/other_bot?start=x", "https://t.me/herald_sim_bot", "::"} {
		var res actionResult
		if status := e.control(t, "POST", "/sim/users/5/open-link", map[string]string{"url": link}, &res); status != 400 {
			t.Errorf("%q: status %d, want 400", link, status)
		}
	}
}

func TestMessageSendsArbitraryText(t *testing.T) {
	e := newEnv(t, sim.Options{})
	var res actionResult
	e.mustControl(t, "POST", "/sim/users/9/message", map[string]string{"text": "/dev_status 0190f3a1"}, &res)
	u := e.poll(t, 0)
	if len(u) != 1 || u[0].Message.Text != "/dev_status 0190f3a1" || u[0].Message.Entities[0].Length != len("/dev_status") {
		t.Fatalf("updates = %+v", u)
	}
	e.mustControl(t, "POST", "/sim/users/9/message", map[string]any{"text": "hi all", "chat_id": -42}, &res)
	u = e.poll(t, res.UpdateID)
	if len(u) != 1 || u[0].Message.Chat.ID != -42 || u[0].Message.Chat.Type != "group" || u[0].Message.Entities != nil {
		t.Errorf("group message = %+v", u[0].Message)
	}
	if status := e.control(t, "POST", "/sim/users/9/message", map[string]string{}, nil); status != 400 {
		t.Errorf("a message without text: %d, want 400", status)
	}
	if status := e.control(t, "POST", "/sim/users/abc/message", map[string]string{"text": "x"}, nil); status != 400 {
		t.Errorf("a non-numeric id: %d, want 400", status)
	}
}

func TestShareContact(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001, FirstName: "Ann", PhoneNumber: "15551230001"})
	e.user(t, sim.User{ID: 2002, FirstName: "Bob", PhoneNumber: "+15551230002"})
	tests := []struct {
		name  string
		body  map[string]any
		want  messenger.Contact
		group bool
	}{
		{"own contact by default", map[string]any{},
			messenger.Contact{PhoneNumber: "15551230001", FirstName: "Ann", UserID: 1001}, false},
		{"own contact, number given", map[string]any{"phone_number": "+44 20 7946 0958"},
			messenger.Contact{PhoneNumber: "+44 20 7946 0958", FirstName: "Ann", UserID: 1001}, false},
		{"someone else's contact", map[string]any{"contact_user_id": 2002},
			messenger.Contact{PhoneNumber: "+15551230002", FirstName: "Bob", UserID: 2002}, false},
		{"a contact without user_id", map[string]any{"contact_user_id": 0, "phone_number": "+15550000000"},
			messenger.Contact{PhoneNumber: "+15550000000", FirstName: "Ann"}, false},
		{"own contact in a group", map[string]any{"chat_id": -77},
			messenger.Contact{PhoneNumber: "15551230001", FirstName: "Ann", UserID: 1001}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var res actionResult
			e.mustControl(t, "POST", "/sim/users/1001/share-contact", tt.body, &res)
			u := e.poll(t, res.UpdateID)
			if len(u) == 0 || u[0].Message.Contact == nil {
				t.Fatalf("no contact update: %+v", u)
			}
			m := u[0].Message
			if *m.Contact != tt.want {
				t.Errorf("contact = %+v, want %+v", *m.Contact, tt.want)
			}
			if m.From.ID != 1001 || (m.Chat.Type == "private") == tt.group {
				t.Errorf("from %d in chat %+v", m.From.ID, m.Chat)
			}
		})
	}
	// The raw JSON has no user_id at all when there is none.
	if _, err := e.sim.ShareContact(1001, "+1", new(int64(0))); err != nil {
		t.Fatal(err)
	}
	pending := e.sim.PendingUpdates()
	if last := string(pending[len(pending)-1]); strings.Contains(last, "user_id") {
		t.Errorf("a contact without user_id must omit the field: %s", last)
	}
	if _, err := e.sim.ShareContact(3003, "", nil); err == nil {
		t.Error("sharing the own contact of a user without a number must fail")
	}
}

func TestBlockDeleteAndTheirUpdates(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001, FirstName: "Ann"})
	var u sim.User
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, &u)
	if !u.Blocked {
		t.Errorf("after block: %+v", u)
	}
	updates := e.poll(t, 0)
	if len(updates) != 1 || updates[0].Kind() != "my_chat_member" || !strings.Contains(string(updates[0].MyChatMember), `"kicked"`) {
		t.Fatalf("blocking must produce a my_chat_member update with status kicked: %+v", updates)
	}
	e.mustControl(t, "POST", "/sim/users/1001/block", nil, nil) // idempotent, no second update
	e.mustControl(t, "POST", "/sim/users/1001/unblock", nil, &u)
	updates = e.poll(t, updates[0].UpdateID+1)
	if len(updates) != 1 || !strings.Contains(string(updates[0].MyChatMember), `"new_chat_member":{"status":"member"`) {
		t.Fatalf("unblocking must produce one my_chat_member update with status member: %s", e.sim.PendingUpdates())
	}

	e.mustControl(t, "POST", "/sim/users/1001/delete", nil, &u)
	if !u.Deleted {
		t.Errorf("after delete: %+v", u)
	}
	var res actionResult
	if status := e.control(t, "POST", "/sim/users/1001/start", map[string]string{"payload": "x"}, &res); status != 409 || res.Error != "user_deleted" {
		t.Errorf("a deleted user cannot act: %d %+v", status, res)
	}
	if _, err := e.sim.StartUser(1001, "x"); !errors.Is(err, sim.ErrUserDeleted) {
		t.Errorf("StartUser of a deleted user = %v", err)
	}
	if status := e.control(t, "POST", "/sim/users/1001/unblock", nil, nil); status != 409 {
		t.Errorf("unblocking a deleted user: %d, want 409", status)
	}
	if status := e.control(t, "POST", "/sim/users/4242/block", nil, nil); status != 404 {
		t.Errorf("blocking an unknown user: %d, want 404", status)
	}
}

func TestInjectUpdateOfAnyKind(t *testing.T) {
	e := newEnv(t, sim.Options{})
	var res actionResult
	e.mustControl(t, "POST", "/sim/updates", json.RawMessage(`{"update_id":1,"edited_message":{"message_id":3,"chat":{"id":5,"type":"private"},"date":1,"text":"edited"}}`), &res)
	e.mustControl(t, "POST", "/sim/updates", json.RawMessage(`{"callback_query":{"id":"1","data":"x"}}`), nil)
	u := e.poll(t, 0)
	if len(u) != 2 || u[0].UpdateID != res.UpdateID || u[0].Kind() != "edited_message" || u[0].EditedMessage.Text != "edited" || u[1].Kind() != "callback_query" {
		t.Fatalf("injected updates = %+v", u)
	}
	for _, bad := range []string{`[]`, `{}`, `{"message":{},"edited_message":{}}`} {
		if status := e.control(t, "POST", "/sim/updates", json.RawMessage(bad), nil); status != 400 {
			t.Errorf("injecting %s: %d, want 400", bad, status)
		}
	}
	var pending struct{ Updates []json.RawMessage }
	e.mustControl(t, "GET", "/sim/updates", nil, &pending)
	if len(pending.Updates) != 2 {
		t.Errorf("GET /sim/updates lists %d pending, want 2", len(pending.Updates))
	}
}

func TestUpdateIDsStrictlyIncreaseAcrossReset(t *testing.T) {
	e := newEnv(t, sim.Options{})
	var last int64
	check := func(id int64, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("update id %d after %d", id, last)
		}
		last = id
	}
	check(e.sim.StartUser(1, "a"))
	check(e.sim.SendText(2, "b"))
	check(e.sim.ShareContact(1, "+1", nil))
	check(e.sim.InjectUpdate(json.RawMessage(`{"poll":{}}`)))
	e.mustControl(t, "POST", "/sim/reset", nil, nil)
	check(e.sim.StartUser(1, "c"))

	fixed := sim.New(sim.Options{FirstUpdateID: 500, Logger: slog.New(slog.DiscardHandler)})
	defer fixed.Close()
	if id, err := fixed.StartUser(1, "x"); err != nil || id != 500 {
		t.Errorf("with FirstUpdateID 500 the first update id = %d, %v", id, err)
	}
}

// A user action answers once the webhook has answered its update, so the caller's next step (a tenant
// starting verification right after the link was opened) finds the update handled; the answer says what
// the webhook said, and how long to wait is bounded.
func TestUserActionsAnswerAfterTheWebhookAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{WebhookAttempts: 2, ActionWait: 3 * time.Second})
	var mu sync.Mutex
	handled := map[int64]bool{}
	refuse := false
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := messenger.ParseUpdate(must(io.ReadAll(r.Body)))
		time.Sleep(100 * time.Millisecond) // the handler's work: the action must not answer before it ends
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		handled[u.UpdateID] = true
	}))
	t.Cleanup(hook.Close)

	// Without a webhook the update waits for getUpdates: nothing to wait for.
	var res actionResult
	e.mustControl(t, "POST", "/sim/users/7/message", map[string]string{"text": "hi"}, &res)
	if res.Webhook.State != sim.WebhookNone {
		t.Errorf("without a webhook: %+v, want state %q", res.Webhook, sim.WebhookNone)
	}
	e.poll(t, res.UpdateID+1)

	if err := e.client.SetWebhook(t.Context(), hook.URL, "", nil); err != nil {
		t.Fatal(err)
	}
	for _, action := range []struct{ path, body string }{
		{"/sim/users/7/open-link", `{"url":"https://t.me/herald_sim_bot?start=tok"}`},
		{"/sim/users/7/share-contact", `{"phone_number":"+15551230007"}`},
		{"/sim/users/7/start", `{"payload":"x"}`},
		{"/sim/users/7/message", `{"text":"/dev_help"}`},
	} {
		var res actionResult
		e.mustControl(t, "POST", action.path, json.RawMessage(action.body), &res)
		mu.Lock()
		done := handled[res.UpdateID]
		mu.Unlock()
		if !done || res.Webhook.State != sim.WebhookAnswered || res.Webhook.Status != 200 || res.Webhook.Attempts != 1 {
			t.Errorf("%s answered %+v before the webhook had handled update %d (handled: %v)", action.path, res.Webhook, res.UpdateID, done)
		}
	}

	// A webhook that refuses every attempt: the action says so.
	mu.Lock()
	refuse = true
	mu.Unlock()
	e.mustControl(t, "POST", "/sim/users/7/message", map[string]string{"text": "refused"}, &res)
	if res.Webhook.State != sim.WebhookDropped || res.Webhook.Status != 503 || res.Webhook.Attempts != 2 || res.Webhook.Error == "" {
		t.Errorf("a refused update: %+v, want dropped after 2 attempts with status 503", res.Webhook)
	}
	// ?wait=0 answers at once; the update is still on its way.
	e.mustControl(t, "POST", "/sim/users/7/message?wait=0", map[string]string{"text": "no wait"}, &res)
	if res.Webhook.State != sim.WebhookPending {
		t.Errorf("?wait=0: %+v, want %q", res.Webhook, sim.WebhookPending)
	}
	if status := e.control(t, "POST", "/sim/users/7/message?wait=soon", map[string]string{"text": "x"}, &res); status != 400 {
		t.Errorf("?wait=soon: status %d, want 400", status)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A chat's transcript holds both sides in order, as the chat shows them; every action signals a change.
func TestTranscriptShowsBothSidesInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	changed := e.sim.Changed()
	if _, err := e.sim.StartUser(9, "tok"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Error("a user's action did not signal a change")
	}
	if _, err := e.send(t, 9, "A message from Demo App\nWelcome"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.ShareContact(9, "+15550000009", nil); err != nil {
		t.Fatal(err)
	}
	changed = e.sim.Changed()
	if err := e.sim.Block(9); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Error("blocking the bot did not signal a change")
	}
	var got struct {
		Lines []sim.Line `json:"lines"`
	}
	e.mustControl(t, "GET", "/sim/chats/9/transcript", nil, &got)
	if len(got.Lines) != 3 {
		t.Fatalf("transcript: %+v", got.Lines)
	}
	if l := got.Lines[0]; l.From != "user" || l.UserID != 9 || l.Text != "/start tok" {
		t.Errorf("first line %+v", l)
	}
	if l := got.Lines[1]; l.From != "bot" || l.Text != "A message from Demo App\nWelcome" || l.MessageID == 0 {
		t.Errorf("second line %+v", l)
	}
	if l := got.Lines[2]; l.From != "user" || l.Contact == nil || l.Contact.PhoneNumber != "+15550000009" {
		t.Errorf("third line %+v", l)
	}
	if msgs := e.sim.Messages(9); len(msgs) != 1 {
		t.Errorf("messages (the bot's only): %+v", msgs)
	}
}
