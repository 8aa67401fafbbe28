package sim_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// botAPI calls a Bot API method of the default bot over HTTP, as any client does, and returns the HTTP status
// and the answer.
func (e *env) botAPI(t *testing.T, method string, params any) (int, messenger.Response) {
	t.Helper()
	status, body := e.raw(t, "POST", "/bot"+e.sim.Token()+"/"+method, mustJSON(t, params), "Content-Type", "application/json")
	var res messenger.Response
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("%s answered %d %s: %v", method, status, body, err)
	}
	return status, res
}

// mustBotAPI is botAPI that expects the method to succeed, and decodes its result into out (if not nil).
func (e *env) mustBotAPI(t *testing.T, method string, params, out any) {
	t.Helper()
	status, res := e.botAPI(t, method, params)
	if status != 200 || !res.OK {
		t.Fatalf("%s: %d %s", method, status, res.Description)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result, out); err != nil {
			t.Fatalf("%s: decoding %s: %v", method, res.Result, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// compact is the JSON without its indentation (the control API indents its answers).
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b.String()
}

// wireMessage is a message as the Bot API answers it, with the fields messenger.Message leaves out.
type wireMessage struct {
	MessageID   int64           `json:"message_id"`
	Chat        messenger.Chat  `json:"chat"`
	Date        int64           `json:"date"`
	EditDate    int64           `json:"edit_date"`
	Text        string          `json:"text"`
	Entities    json.RawMessage `json:"entities"`
	ReplyMarkup *inlineMarkup   `json:"reply_markup"`
}

type inlineMarkup struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

type inlineButton struct {
	Text         string `json:"text"`
	URL          string `json:"url,omitempty"`
	CallbackData string `json:"callback_data,omitempty"`
}

// stopKeyboard is a keyboard such as Herald's /stop answer: callback buttons and a url button.
func stopKeyboard() inlineMarkup {
	return inlineMarkup{InlineKeyboard: [][]inlineButton{
		{{Text: "Acme", CallbackData: "p1:0"}, {Text: "Acme: marketing", CallbackData: "p1:1"}},
		{{Text: "All of them", CallbackData: "p1:2"}},
		{{Text: "Why am I getting this?", URL: "https://example.com/why"}},
	}}
}

// sendKeyboard has the default bot send text with an inline keyboard to the chat and returns the message.
func (e *env) sendKeyboard(t *testing.T, chatID int64, text string, kb inlineMarkup) wireMessage {
	t.Helper()
	var m wireMessage
	e.mustBotAPI(t, "sendMessage", map[string]any{"chat_id": chatID, "text": text, "reply_markup": kb}, &m)
	return m
}

// tapResult is the control API's answer to a tap.
type tapResult struct {
	actionResult
	CallbackQueryID string     `json:"callback_query_id"`
	Answer          *tapAnswer `json:"answer"`
}

// tapAnswer and tapRecord are the answer to a tap and a tap as the control API shows them.
type tapAnswer struct {
	Text      string    `json:"text"`
	ShowAlert bool      `json:"show_alert"`
	Time      time.Time `json:"time"`
}

type tapRecord struct {
	ID        string     `json:"id"`
	UserID    int64      `json:"user_id"`
	MessageID int64      `json:"message_id"`
	Data      string     `json:"data"`
	Answer    *tapAnswer `json:"answer"`
}

// chatLine is a message of the chat's messages or transcript.
type chatLine struct {
	MessageID   int64           `json:"message_id"`
	From        string          `json:"from"`
	Text        string          `json:"text"`
	ReplyMarkup json.RawMessage `json:"reply_markup"`
	EditedAt    *time.Time      `json:"edited_at"`
}

// An inline keyboard a bot sends is kept with its message and shown in the chat's messages and transcript,
// and the answer to sendMessage carries it, as the platform's does.
func TestInlineKeyboardsAreStoredAndShown(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	sent := e.sendKeyboard(t, 1001, "What do you want to stop?", stopKeyboard())
	if sent.ReplyMarkup == nil || len(sent.ReplyMarkup.InlineKeyboard) != 3 || sent.ReplyMarkup.InlineKeyboard[2][0].URL != "https://example.com/why" {
		t.Errorf("sendMessage answered %+v, want the keyboard with it", sent)
	}

	var msgs struct {
		Messages []struct {
			MessageID   int64         `json:"message_id"`
			Text        string        `json:"text"`
			ReplyMarkup *inlineMarkup `json:"reply_markup"`
		} `json:"messages"`
	}
	e.mustControl(t, "GET", "/sim/chats/1001/messages", nil, &msgs)
	if len(msgs.Messages) != 1 || msgs.Messages[0].ReplyMarkup == nil || mustJSON(t, *msgs.Messages[0].ReplyMarkup) != mustJSON(t, stopKeyboard()) {
		t.Fatalf("GET /sim/chats/1001/messages: %+v", msgs)
	}
	var tr struct {
		Lines []sim.Line `json:"lines"`
	}
	e.mustControl(t, "GET", "/sim/chats/1001/transcript", nil, &tr)
	if len(tr.Lines) != 1 || compact(t, tr.Lines[0].ReplyMarkup) != mustJSON(t, stopKeyboard()) {
		t.Errorf("the transcript: %+v", tr.Lines)
	}
}

// callback_data is 1 to 64 bytes (bytes, not characters), a url button's link is http(s) or tg, and a button
// does something: the platform refuses the message otherwise, and so does the simulator.
func TestInlineKeyboardsAreValidatedAsThePlatformDoes(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	button := func(b map[string]any) map[string]any {
		return map[string]any{"inline_keyboard": [][]map[string]any{{b}}}
	}
	for name, c := range map[string]struct {
		markup any
		want   string // the description's start; "" for success
	}{
		"64 bytes of data":              {button(map[string]any{"text": "ok", "callback_data": strings.Repeat("x", 64)}), ""},
		"32 two-byte characters":        {button(map[string]any{"text": "ok", "callback_data": strings.Repeat("é", 32)}), ""},
		"65 bytes of data":              {button(map[string]any{"text": "no", "callback_data": strings.Repeat("x", 65)}), "Bad Request: BUTTON_DATA_INVALID"},
		"33 two-byte characters":        {button(map[string]any{"text": "no", "callback_data": strings.Repeat("é", 33)}), "Bad Request: BUTTON_DATA_INVALID"},
		"empty data":                    {button(map[string]any{"text": "no", "callback_data": ""}), "Bad Request: BUTTON_DATA_INVALID"},
		"a text button":                 {button(map[string]any{"text": "no"}), "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"},
		"a javascript link":             {button(map[string]any{"text": "no", "url": "javascript:alert(1)"}), "Bad Request: BUTTON_URL_INVALID"},
		"a link without a host":         {button(map[string]any{"text": "no", "url": "https://"}), "Bad Request: BUTTON_URL_INVALID"},
		"a tg link":                     {button(map[string]any{"text": "ok", "url": "tg://resolve?domain=herald_sim_bot"}), ""},
		"a tg link without slashes":     {button(map[string]any{"text": "ok", "url": "tg:resolve?domain=herald_sim_bot"}), ""},
		"an ftp link":                   {button(map[string]any{"text": "no", "url": "ftp://example.com/x"}), "Bad Request: BUTTON_URL_INVALID"},
		"rows that are not arrays":      {map[string]any{"inline_keyboard": []any{map[string]any{"text": "no", "callback_data": "x"}}}, "Bad Request: can't parse"},
		"as a JSON string (form style)": {mustJSON(t, button(map[string]any{"text": "ok", "callback_data": "x"})), ""},
	} {
		status, res := e.botAPI(t, "sendMessage", map[string]any{"chat_id": 1001, "text": "choose", "reply_markup": c.markup})
		switch {
		case c.want == "" && (status != 200 || !res.OK):
			t.Errorf("%s: %d %s, want it sent", name, status, res.Description)
		case c.want != "" && (status != 400 || !strings.HasPrefix(res.Description, c.want)):
			t.Errorf("%s: %d %q, want 400 %q", name, status, res.Description, c.want)
		}
	}
}

// A tap on a callback button reaches the bot as a callback_query: its id, the user who tapped, the message
// with its keyboard, the chat's chat_instance and the button's data.
func TestATapBecomesACallbackQuery(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001, FirstName: "Ann", Username: "ann"})
	e.user(t, sim.User{ID: 1002})
	rc := newReceiver(t, func(int) int { return 200 })
	e.mustBotAPI(t, "setWebhook", map[string]any{"url": rc.srv.URL, "allowed_updates": []string{"message", "my_chat_member", "callback_query"}}, nil)
	kb := e.sendKeyboard(t, 1001, "What do you want to stop?", stopKeyboard())
	other := e.sendKeyboard(t, 1002, "What do you want to stop?", stopKeyboard())

	var byText, byData, latest, elsewhere tapResult
	e.mustControl(t, "POST", "/sim/users/1001/tap", map[string]any{"message_id": kb.MessageID, "button": "Acme: marketing"}, &byText)
	e.mustControl(t, "POST", "/sim/users/1001/tap", map[string]any{"message_id": kb.MessageID, "callback_data": "p1:2"}, &byData)
	e.mustControl(t, "POST", "/sim/users/1001/tap", map[string]any{"button": "Acme"}, &latest) // the latest message with it
	e.mustControl(t, "POST", "/sim/users/1002/tap", map[string]any{"message_id": other.MessageID, "button": "Acme"}, &elsewhere)
	for _, r := range []tapResult{byText, byData, latest, elsewhere} {
		if !r.OK || r.UpdateID == 0 || r.CallbackQueryID == "" || r.Webhook.State != sim.WebhookAnswered {
			t.Fatalf("a tap answered %+v", r)
		}
	}
	got, _ := rc.received()
	if len(got) != 4 {
		t.Fatalf("the webhook got %d updates, want 4", len(got))
	}
	type query struct {
		ID           string          `json:"id"`
		From         messenger.User  `json:"from"`
		Message      wireMessage     `json:"message"`
		ChatInstance string          `json:"chat_instance"`
		Data         string          `json:"data"`
		Extra        json.RawMessage `json:"inline_message_id"`
	}
	var qs []query
	for i, u := range got {
		var q query
		if u.Kind() != messenger.KindCallbackQuery || json.Unmarshal(u.CallbackQuery, &q) != nil {
			t.Fatalf("update %d: %s %s", i, u.Kind(), u.CallbackQuery)
		}
		qs = append(qs, q)
	}
	q := qs[0]
	if q.ID != byText.CallbackQueryID || got[0].UpdateID != byText.UpdateID || q.Data != "p1:1" {
		t.Errorf("the tap by text: %+v (update %d), want id %s, data p1:1", q, got[0].UpdateID, byText.CallbackQueryID)
	}
	if q.From.ID != 1001 || q.From.IsBot || q.From.FirstName != "Ann" || q.From.Username != "ann" {
		t.Errorf("from: %+v", q.From)
	}
	m := q.Message
	if m.MessageID != kb.MessageID || m.Chat.ID != 1001 || m.Chat.Type != "private" || m.Text != "What do you want to stop?" ||
		m.Date == 0 || m.ReplyMarkup == nil || mustJSON(t, *m.ReplyMarkup) != mustJSON(t, stopKeyboard()) {
		t.Errorf("the query's message: %+v", m)
	}
	if qs[1].Data != "p1:2" || qs[2].Data != "p1:0" || qs[2].Message.MessageID != kb.MessageID || qs[3].Data != "p1:0" {
		t.Errorf("by data, the latest and another user's: %+v / %+v / %+v", qs[1], qs[2], qs[3])
	}
	if q.ChatInstance == "" || qs[1].ChatInstance != q.ChatInstance || qs[3].ChatInstance == q.ChatInstance {
		t.Errorf("chat_instance is one per chat: %q, %q, and another chat's %q", q.ChatInstance, qs[1].ChatInstance, qs[3].ChatInstance)
	}
	if ids := map[string]bool{qs[0].ID: true, qs[1].ID: true, qs[2].ID: true, qs[3].ID: true}; len(ids) != 4 {
		t.Errorf("query ids repeat: %+v", ids)
	}
	if len(q.Extra) != 0 {
		t.Errorf("a message in a chat has no inline_message_id: %s", q.Extra)
	}

	// What a user cannot tap: a url button (it opens its link), a button the message has not, a message that
	// is not there. A modified client can send any data for a message it has, and so can a test.
	for name, body := range map[string]map[string]any{
		"a url button":           {"message_id": kb.MessageID, "button": "Why am I getting this?"},
		"data the message lacks": {"message_id": kb.MessageID, "callback_data": "p9:9"},
		"text the message lacks": {"message_id": kb.MessageID, "button": "Globex"},
		"no button":              {"message_id": kb.MessageID},
		"both":                   {"message_id": kb.MessageID, "button": "Acme", "callback_data": "p1:0"},
		"an unknown message":     {"message_id": kb.MessageID + 100, "button": "Acme"},
		"forged data too long":   {"message_id": kb.MessageID, "callback_data": strings.Repeat("x", 65), "forged": true},
	} {
		var res actionResult
		if status := e.control(t, "POST", "/sim/users/1001/tap", body, &res); status != 400 || res.Error != "invalid_request" {
			t.Errorf("tapping %s: %d %+v, want 400", name, status, res)
		}
	}
	var forged tapResult
	e.mustControl(t, "POST", "/sim/users/1001/tap", map[string]any{"message_id": kb.MessageID, "callback_data": "forged:0", "forged": true}, &forged)
	got, _ = rc.received()
	if len(got) != 5 || !strings.Contains(string(got[4].CallbackQuery), `"data":"forged:0"`) {
		t.Errorf("a forged tap: %+v", got[len(got)-1])
	}
	if status := e.control(t, "POST", "/sim/users/1001/tap?bot=nobody_bot", map[string]any{"button": "Acme"}, nil); status != 404 {
		t.Errorf("a tap in an unknown bot's chat: %d, want 404", status)
	}
}

// answerCallbackQuery takes each query once: a second answer, or an answer to a query that never was, gets
// the platform's 400. The notice the user saw is kept with the tap.
func TestAnswerCallbackQueryOnce(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	kb := e.sendKeyboard(t, 1001, "What do you want to stop?", stopKeyboard())
	var tap tapResult
	e.mustControl(t, "POST", "/sim/users/1001/tap", map[string]any{"message_id": kb.MessageID, "button": "Acme"}, &tap)
	if tap.Answer != nil {
		t.Errorf("a tap nobody answered carries an answer: %+v", tap.Answer)
	}
	var ok bool
	e.mustBotAPI(t, "answerCallbackQuery", map[string]any{"callback_query_id": tap.CallbackQueryID, "text": "Acme is stopped", "show_alert": true}, &ok)
	if !ok {
		t.Error("answerCallbackQuery answered false")
	}
	const tooOld = "Bad Request: query is too old and response timeout expired or query ID is invalid"
	for name, id := range map[string]string{"a second answer": tap.CallbackQueryID, "an unknown query": "4242", "no query": ""} {
		if status, res := e.botAPI(t, "answerCallbackQuery", map[string]any{"callback_query_id": id, "text": "again"}); status != 400 || res.Description != tooOld {
			t.Errorf("%s: %d %q, want 400 %q", name, status, res.Description, tooOld)
		}
	}
	if status, res := e.botAPI(t, "answerCallbackQuery", map[string]any{"callback_query_id": tap.CallbackQueryID, "text": strings.Repeat("x", 201)}); status != 400 {
		t.Errorf("a notice over 200 characters: %d %q, want 400", status, res.Description)
	}

	var taps struct {
		Taps []tapRecord `json:"taps"`
	}
	e.mustControl(t, "GET", "/sim/chats/1001/taps", nil, &taps)
	if len(taps.Taps) != 1 {
		t.Fatalf("GET /sim/chats/1001/taps: %+v", taps)
	}
	q := taps.Taps[0]
	if q.ID != tap.CallbackQueryID || q.UserID != 1001 || q.MessageID != kb.MessageID || q.Data != "p1:0" ||
		q.Answer == nil || q.Answer.Text != "Acme is stopped" || !q.Answer.ShowAlert || q.Answer.Time.IsZero() {
		t.Errorf("the tap as recorded: %+v (answer %+v)", q, q.Answer)
	}

	// A bot that answers while handling the update: the tap's answer holds the notice.
	rc := newReceiver(t, func(int) int { return 200 })
	rc.mu.Lock()
	rc.onUpdate = func(u messenger.Update) {
		var q struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(u.CallbackQuery, &q)
		if status, res := e.botAPI(t, "answerCallbackQuery", map[string]any{"callback_query_id": q.ID, "text": "Done"}); status != 200 {
			t.Errorf("answering from the webhook: %d %s", status, res.Description)
		}
	}
	rc.mu.Unlock()
	e.mustBotAPI(t, "setWebhook", map[string]any{"url": rc.srv.URL, "drop_pending_updates": true}, nil) // the first tap's update
	e.mustControl(t, "POST", "/sim/users/1001/tap", map[string]any{"message_id": kb.MessageID, "button": "All of them"}, &tap)
	if tap.Webhook.State != sim.WebhookAnswered || tap.Answer == nil || tap.Answer.Text != "Done" || tap.Answer.ShowAlert {
		t.Errorf("a tap the webhook answered: %+v, answer %+v", tap, tap.Answer)
	}
}

// editMessageText replaces a message's text and keyboard (a keyboard left out is taken away, as on the
// platform) and refuses what the platform refuses: an edit that changes nothing, a message that is not
// there or is not the bot's, a reply keyboard.
func TestEditMessageTextReplacesTextAndKeyboard(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	kb := e.sendKeyboard(t, 1001, "What do you want to stop?", stopKeyboard())
	done := inlineMarkup{InlineKeyboard: [][]inlineButton{{{Text: "Resume", CallbackData: "p2:0"}}}}
	var edited wireMessage
	e.mustBotAPI(t, "editMessageText", map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "Acme is stopped.", "reply_markup": done}, &edited)
	if edited.MessageID != kb.MessageID || edited.Text != "Acme is stopped." || edited.EditDate == 0 || edited.Date != kb.Date ||
		edited.ReplyMarkup == nil || mustJSON(t, *edited.ReplyMarkup) != mustJSON(t, done) {
		t.Errorf("editMessageText answered %+v", edited)
	}
	var msgs struct {
		Messages []chatLine `json:"messages"`
	}
	e.mustControl(t, "GET", "/sim/chats/1001/messages", nil, &msgs)
	if len(msgs.Messages) != 1 || msgs.Messages[0].Text != "Acme is stopped." || msgs.Messages[0].EditedAt == nil ||
		compact(t, msgs.Messages[0].ReplyMarkup) != mustJSON(t, done) {
		t.Fatalf("the chat's messages after the edit: %+v", msgs.Messages)
	}
	var tr struct {
		Lines []chatLine `json:"lines"`
	}
	e.mustControl(t, "GET", "/sim/chats/1001/transcript", nil, &tr)
	if len(tr.Lines) != 1 || tr.Lines[0].Text != "Acme is stopped." || tr.Lines[0].EditedAt == nil || compact(t, tr.Lines[0].ReplyMarkup) != mustJSON(t, done) {
		t.Errorf("the transcript after the edit: %+v", tr.Lines)
	}

	const notModified = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"
	edit := func(params map[string]any) (int, string) {
		t.Helper()
		status, res := e.botAPI(t, "editMessageText", params)
		return status, res.Description
	}
	if status, desc := edit(map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "Acme is stopped.", "reply_markup": done}); status != 400 || desc != notModified {
		t.Errorf("the same text and keyboard: %d %q", status, desc)
	}
	// The same text without the keyboard takes the keyboard away: a change. Once more, it is none.
	if status, desc := edit(map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "Acme is stopped."}); status != 200 {
		t.Errorf("the same text without the keyboard: %d %q", status, desc)
	}
	if m := e.sim.Messages(1001); len(m) != 1 || m[0].ReplyMarkup != nil {
		t.Errorf("the keyboard left out stays: %+v", m)
	}
	if status, desc := edit(map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "Acme is stopped."}); status != 400 || desc != notModified {
		t.Errorf("the same text again: %d %q", status, desc)
	}
	// Entities are content: the same text, now bold, is a change.
	if status, desc := edit(map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "Acme is stopped.",
		"entities": []map[string]any{{"type": "bold", "offset": 0, "length": 4}}}); status != 200 {
		t.Errorf("the same text with entities: %d %q", status, desc)
	}

	e.sendText(t, 1001, "/stop")
	userMessageID := int64(0)
	for _, l := range e.sim.Transcript(1001) {
		if l.From == "user" {
			userMessageID = l.MessageID
		}
	}
	for name, c := range map[string]struct {
		params map[string]any
		want   string
	}{
		"a message that is not there": {map[string]any{"chat_id": 1001, "message_id": 999, "text": "x"}, "Bad Request: message to edit not found"},
		"the user's message":          {map[string]any{"chat_id": 1001, "message_id": userMessageID, "text": "x"}, "Bad Request: message can't be edited"},
		"a chat that is not there":    {map[string]any{"chat_id": 4242, "message_id": kb.MessageID, "text": "x"}, "Bad Request: chat not found"},
		"no message id":               {map[string]any{"chat_id": 1001, "text": "x"}, "Bad Request: message identifier is not specified"},
		"an empty text":               {map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": " "}, "Bad Request: message text is empty"},
		"a reply keyboard":            {map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "x", "reply_markup": map[string]any{"keyboard": [][]map[string]any{{{"text": "a"}}}}}, "Bad Request: inline keyboard expected"},
		"bad callback data":           {map[string]any{"chat_id": 1001, "message_id": kb.MessageID, "text": "x", "reply_markup": map[string]any{"inline_keyboard": [][]map[string]any{{{"text": "a", "callback_data": strings.Repeat("x", 65)}}}}}, "Bad Request: BUTTON_DATA_INVALID"},
	} {
		if status, desc := edit(c.params); status != 400 || desc != c.want {
			t.Errorf("%s: %d %q, want 400 %q", name, status, desc, c.want)
		}
	}
	if m := e.sim.Messages(1001); len(m) != 1 || m[0].Text != "Acme is stopped." {
		t.Errorf("a refused edit changed the message: %+v", m)
	}
}
