package sim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

func TestGetMeDescribesTheBot(t *testing.T) {
	e := newEnv(t, sim.Options{})
	me, err := e.client.GetMe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := messenger.User{ID: 123456, IsBot: true, FirstName: "Herald", Username: "herald_sim_bot"}
	if me != want {
		t.Errorf("getMe = %+v, want %+v", me, want)
	}
	if e.sim.Token() != "123456:sim-token" || e.sim.BotUsername() != "herald_sim_bot" {
		t.Errorf("defaults: token %q, username %q", e.sim.Token(), e.sim.BotUsername())
	}

	custom := newEnv(t, sim.Options{Token: "987:abc", BotUsername: "acme_bot"})
	me, err = custom.client.GetMe(t.Context())
	if err != nil || me.ID != 987 || me.Username != "acme_bot" {
		t.Errorf("the bot id comes from the token: %+v, %v", me, err)
	}
}

func TestWrongTokenIsUnauthorized(t *testing.T) {
	e := newEnv(t, sim.Options{})
	c := messenger.New(e.srv.URL, "123456:wrong", nil)
	_, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
	var apiErr *messenger.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 401 || apiErr.Description != "Unauthorized" {
		t.Fatalf("error = %v, want 401 Unauthorized", err)
	}
	resp, err := http.Get(e.srv.URL + "/bot123456:wrong/getMe")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("HTTP status = %d, want 401", resp.StatusCode)
	}
	if got := e.sim.Stats().Unauthorized; got != 2 {
		t.Errorf("unauthorized calls counted = %d, want 2", got)
	}
}

func TestUnknownMethodIsNotFound(t *testing.T) {
	e := newEnv(t, sim.Options{})
	resp, err := http.Post(e.srv.URL+"/bot"+e.sim.Token()+"/sendSticker", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r messenger.Response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 404 || r.OK || r.ErrorCode != 404 {
		t.Errorf("unknown method answered %d %+v, want 404", resp.StatusCode, r)
	}
}

func TestMethodNamesAreCaseInsensitive(t *testing.T) {
	e := newEnv(t, sim.Options{})
	resp, err := http.Get(e.srv.URL + "/bot" + e.sim.Token() + "/GETME")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /GETME = %d, want 200", resp.StatusCode)
	}
}

func TestSendMessageReachesTheChat(t *testing.T) {
	e := newEnv(t, sim.Options{})
	if _, err := e.sim.EnsureUser(sim.User{ID: 1001, FirstName: "Ann"}); err != nil {
		t.Fatal(err)
	}
	prompt := messenger.ContactRequestKeyboard("Share my phone number")
	id1, err := e.client.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1001, Text: "A message from Acme\nplease verify", ReplyMarkup: prompt})
	if err != nil {
		t.Fatal(err)
	}
	id2, err := e.client.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1001, Text: "verified ✓", ReplyMarkup: messenger.RemoveKeyboard()})
	if err != nil {
		t.Fatal(err)
	}
	if id2 <= id1 {
		t.Errorf("message ids must increase within a chat: %d then %d", id1, id2)
	}

	msgs := e.sim.Messages(1001)
	if len(msgs) != 2 {
		t.Fatalf("chat has %d messages, want 2", len(msgs))
	}
	if msgs[0].MessageID != id1 || msgs[0].Text != "A message from Acme\nplease verify" || string(msgs[0].ReplyMarkup) != string(prompt) {
		t.Errorf("first message = %+v", msgs[0])
	}
	if string(msgs[1].ReplyMarkup) != `{"remove_keyboard":true}` || msgs[1].Text != "verified ✓" {
		t.Errorf("second message = %+v", msgs[1])
	}
	if msgs[0].Time.IsZero() || msgs[0].ChatID != 1001 {
		t.Errorf("message time and chat must be set: %+v", msgs[0])
	}

	// The same, through the control API.
	var got struct {
		ChatID   int64             `json:"chat_id"`
		Messages []sim.SentMessage `json:"messages"`
	}
	e.mustControl(t, "GET", "/sim/chats/1001/messages", nil, &got)
	if got.ChatID != 1001 || len(got.Messages) != 2 || got.Messages[1].MessageID != id2 {
		t.Errorf("GET /sim/chats/1001/messages = %+v", got)
	}
	e.mustControl(t, "GET", "/sim/chats/555/messages", nil, &got)
	if got.Messages == nil || len(got.Messages) != 0 {
		t.Errorf("an unknown chat lists no messages (an empty array): %+v", got)
	}

	st := e.sim.Stats()
	if st.Sends != 2 || st.Delivered != 2 || st.LimitViolations != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestSendMessageErrorsAreThePlatformsAndClassify(t *testing.T) {
	e := newEnv(t, sim.Options{})
	for _, id := range []int64{1, 2, 3} {
		e.user(t, sim.User{ID: id})
	}
	if err := e.sim.Block(2); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.DeleteUser(3); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		req     messenger.SendMessageRequest
		code    int
		desc    string
		outcome messenger.Outcome
	}{
		{"unknown chat", messenger.SendMessageRequest{ChatID: 999, Text: "x"}, 400, "Bad Request: chat not found", messenger.Unlinked},
		{"blocked", messenger.SendMessageRequest{ChatID: 2, Text: "x"}, 403, "Forbidden: bot was blocked by the user", messenger.Blocked},
		{"deactivated", messenger.SendMessageRequest{ChatID: 3, Text: "x"}, 403, "Forbidden: user is deactivated", messenger.Blocked},
		{"empty text", messenger.SendMessageRequest{ChatID: 1, Text: " "}, 400, "Bad Request: message text is empty", messenger.Failed},
		{"too long", messenger.SendMessageRequest{ChatID: 1, Text: strings.Repeat("é", 4097)}, 400, "Bad Request: message is too long", messenger.Failed},
		{"bad markup", messenger.SendMessageRequest{ChatID: 1, Text: "x", ReplyMarkup: json.RawMessage(`{"nonsense":1}`)}, 400, "Bad Request: can't parse reply keyboard markup JSON object", messenger.Failed},
		{"no chat id", messenger.SendMessageRequest{Text: "x"}, 400, "Bad Request: chat not found", messenger.Unlinked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.client.SendMessage(t.Context(), tt.req)
			var apiErr *messenger.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("error = %v, want an APIError", err)
			}
			if apiErr.Code != tt.code || apiErr.Description != tt.desc {
				t.Errorf("answer = %d %q, want %d %q", apiErr.Code, apiErr.Description, tt.code, tt.desc)
			}
			if got := messenger.Classify(err); got != tt.outcome {
				t.Errorf("Classify = %v, want %v", got, tt.outcome)
			}
		})
	}
	if _, err := e.send(t, 1, strings.Repeat("é", 4096)); err != nil {
		t.Errorf("4096 characters are allowed: %v", err)
	}
	if st := e.sim.Stats(); st.Rejected != int64(len(tests)) || st.Delivered != 1 {
		t.Errorf("stats = %+v, want %d rejected and 1 delivered", st, len(tests))
	}
	if n := len(e.sim.Messages(2)) + len(e.sim.Messages(3)); n != 0 {
		t.Errorf("blocked and deleted chats must receive nothing, got %d messages", n)
	}
}

func TestUnblockRestoresDelivery(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 7})
	e.mustControl(t, "POST", "/sim/users/7/block", nil, nil)
	if _, err := e.send(t, 7, "x"); messenger.Classify(err) != messenger.Blocked {
		t.Fatalf("after block: %v", err)
	}
	e.mustControl(t, "POST", "/sim/users/7/unblock", nil, nil)
	if _, err := e.send(t, 7, "x"); err != nil {
		t.Fatalf("after unblock: %v", err)
	}

	// Writing to the bot unblocks it, as on the platform.
	noError(t, e.sim.Block(7))
	if _, err := e.sim.SendText(7, "/start"); err != nil {
		t.Fatal(err)
	}
	if u, _ := e.sim.GetUser(7); u.Blocked {
		t.Error("a user who writes to the bot has unblocked it")
	}
	if _, err := e.send(t, 7, "x"); err != nil {
		t.Fatalf("after the user wrote again: %v", err)
	}
}

func TestChatIDAsNumericString(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 42})
	resp, err := http.Post(e.srv.URL+"/bot"+e.sim.Token()+"/sendMessage", "application/json",
		strings.NewReader(`{"chat_id":"42","text":"hi","reply_markup":"{\"remove_keyboard\":true}"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat_id as a string and reply_markup as a JSON string: status %d", resp.StatusCode)
	}
	if m := e.sim.Messages(42); len(m) != 1 || string(m[0].ReplyMarkup) != `{"remove_keyboard":true}` {
		t.Errorf("messages = %+v", m)
	}
}

func TestSendToAGroupChat(t *testing.T) {
	e := newEnv(t, sim.Options{})
	if _, err := e.sim.Send(5, sim.Incoming{Text: "/dev_help", ChatID: -100200, ChatType: messenger.ChatSupergroup}); err != nil {
		t.Fatal(err)
	}
	u := e.poll(t, 0)
	if len(u) != 1 || u[0].Message.Chat.ID != -100200 || u[0].Message.Chat.Type != "supergroup" || u[0].Message.From.ID != 5 {
		t.Fatalf("update = %+v", u)
	}
	if _, err := e.send(t, -100200, "reply"); err != nil {
		t.Fatalf("the bot can answer in a group it was written from: %v", err)
	}
	if m := e.sim.Messages(-100200); len(m) != 1 {
		t.Errorf("group messages = %+v", m)
	}
}

func TestLatencyDelaysTheAnswer(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	e.mustControl(t, "POST", "/sim/faults", map[string]any{"latency_ms": 60}, nil)
	start := time.Now()
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("answer after %v, want at least the 60 ms latency", d)
	}
}
