package sim

// Inline keyboards, as on the platform: a bot's message may carry an inline keyboard of url and callback
// buttons; a user's tap on a callback button reaches the bot as a callback_query, which the bot answers once
// (answerCallbackQuery) with the notice the user sees; editMessageText replaces a message's text and
// keyboard. Herald's /stop and /resume keyboards are tested end to end with them.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/messenger"
)

// The platform's limits.
const (
	maxCallbackData = 64  // bytes of a button's callback_data
	maxAnswerText   = 200 // characters of answerCallbackQuery's text
)

// keptQueries bounds the callback queries a bot keeps, the latest ones.
const keptQueries = 10_000

var (
	errButtonData      = &botError{code: 400, description: "Bad Request: BUTTON_DATA_INVALID"}
	errButtonURL       = &botError{code: 400, description: "Bad Request: BUTTON_URL_INVALID"}
	errTextButton      = &botError{code: 400, description: "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"}
	errInlineExpected  = &botError{code: 400, description: "Bad Request: inline keyboard expected"}
	errQueryInvalid    = &botError{code: 400, description: "Bad Request: query is too old and response timeout expired or query ID is invalid"}
	errNotModified     = &botError{code: 400, description: "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}
	errEditNotFound    = &botError{code: 400, description: "Bad Request: message to edit not found"}
	errCantEdit        = &botError{code: 400, description: "Bad Request: message can't be edited"}
	errNoMessageID     = &botError{code: 400, description: "Bad Request: message identifier is not specified"}
	errInlineMessageID = &botError{code: 400, description: "Bad Request: MESSAGE_ID_INVALID"}
)

// inlineButton is a button of an inline keyboard as the simulator keeps it. It plays the two kinds Herald
// sends: a url button opens its link, a callback button sends its data to the bot.
type inlineButton struct {
	Text         string `json:"text"`
	URL          string `json:"url,omitempty"`
	CallbackData string `json:"callback_data,omitempty"`
}

type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

// otherButtonKinds are the platform's other kinds of inline buttons, which the simulator does not play.
var otherButtonKinds = []string{"web_app", "login_url", "switch_inline_query", "switch_inline_query_current_chat",
	"switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay"}

// parseInlineKeyboard checks an InlineKeyboardMarkup as the platform does and returns it in the simulator's
// form; a keyboard without buttons is none (nil), as the platform shows it.
func parseInlineKeyboard(raw json.RawMessage) (json.RawMessage, error) {
	var in struct {
		InlineKeyboard [][]map[string]json.RawMessage `json:"inline_keyboard"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest(`can't parse inline keyboard button: Field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays of InlineKeyboardButton`)
	}
	var kb inlineKeyboard
	for _, row := range in.InlineKeyboard {
		var out []inlineButton
		for _, fields := range row {
			b, err := parseInlineButton(fields)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		if len(out) > 0 {
			kb.InlineKeyboard = append(kb.InlineKeyboard, out)
		}
	}
	if len(kb.InlineKeyboard) == 0 {
		return nil, nil
	}
	return json.Marshal(kb)
}

func parseInlineButton(fields map[string]json.RawMessage) (inlineButton, error) {
	var b inlineButton
	if err := json.Unmarshal(fields["text"], &b.Text); err != nil || b.Text == "" {
		return b, badRequest(`can't parse inline keyboard button: Field "text" must be a non-empty String`)
	}
	for _, kind := range otherButtonKinds {
		if _, ok := fields[kind]; ok {
			return b, badRequest("the simulator plays url and callback_data buttons only, not %s", kind)
		}
	}
	rawURL, hasURL := fields["url"]
	rawData, hasData := fields["callback_data"]
	switch {
	case !hasURL && !hasData:
		return b, errTextButton
	case hasURL && hasData:
		return b, badRequest("can't parse inline keyboard button: a button has exactly one of url and callback_data")
	case hasURL:
		if err := json.Unmarshal(rawURL, &b.URL); err != nil || !buttonURLOK(b.URL) {
			return b, errButtonURL
		}
	default:
		if err := json.Unmarshal(rawData, &b.CallbackData); err != nil || !callbackDataOK(b.CallbackData) {
			return b, errButtonData
		}
	}
	return b, nil
}

// callbackDataOK: 1 to 64 bytes, as the platform counts them.
func callbackDataOK(data string) bool { return data != "" && len(data) <= maxCallbackData }

// buttonURLOK: a link the platform's apps open, http(s) to a host, or tg (tg://resolve?… or tg:…).
func buttonURLOK(link string) bool {
	u, err := url.Parse(link)
	switch {
	case err != nil:
		return false
	case u.Scheme == "http" || u.Scheme == "https":
		return u.Host != ""
	case u.Scheme == "tg":
		return u.Host != "" || u.Opaque != ""
	}
	return false
}

// keyboardOf is the inline keyboard of a stored reply_markup, nil for none or another kind of markup.
func keyboardOf(markup json.RawMessage) [][]inlineButton {
	var kb inlineKeyboard
	if len(markup) == 0 || json.Unmarshal(markup, &kb) != nil {
		return nil
	}
	return kb.InlineKeyboard
}

// inlineMarkupOnly checks the reply_markup of an edit, which only an inline keyboard may be.
func inlineMarkupOnly(raw json.RawMessage) (json.RawMessage, error) {
	raw, err := unquoteMarkup(raw)
	if err != nil || raw == nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, errBadMarkup
	}
	if _, ok := m["inline_keyboard"]; !ok {
		return nil, errInlineExpected
	}
	return parseInlineKeyboard(raw)
}

// parseEntities checks a message's entities and returns them compacted (nil for none), so that an edit can
// tell whether they changed.
func parseEntities(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var es []struct {
		Type   string `json:"type"`
		Offset int    `json:"offset"`
		Length int    `json:"length"`
	}
	if err := json.Unmarshal(raw, &es); err != nil {
		return nil, badRequest("can't parse entities: %v", err)
	}
	for _, e := range es {
		if e.Type == "" || e.Offset < 0 || e.Length <= 0 {
			return nil, badRequest("can't parse entities: an entity has a type, an offset and a positive length")
		}
	}
	if len(es) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, badRequest("can't parse entities: %v", err)
	}
	return b.Bytes(), nil
}

// wireMessage is a bot's message as the Bot API answers it (sendMessage, editMessageText) and as a
// callback_query carries it: messenger.Message and what Herald does not read.
type wireMessage struct {
	MessageID int64           `json:"message_id"`
	From      *messenger.User `json:"from,omitempty"`
	Chat      messenger.Chat  `json:"chat"`
	Date      int64           `json:"date"`
	EditDate  int64           `json:"edit_date,omitempty"`
	Text      string          `json:"text"`
	Entities  json.RawMessage `json:"entities,omitempty"`
	// ReplyMarkup is the message's inline keyboard; the platform shows no other kind of markup here.
	ReplyMarkup json.RawMessage `json:"reply_markup,omitempty"`
}

// wireLocked is the bot's message m of chat c as the Bot API shows it. Callers hold s.mu.
func (s *Server) wireLocked(b *bot, c *chat, m SentMessage) wireMessage {
	me := b.user()
	var member *user
	if c.typ == messenger.ChatPrivate {
		member = s.users[c.id]
	}
	w := wireMessage{MessageID: m.MessageID, From: &me, Chat: s.chatView(c, member), Date: m.Time.Unix(), Text: m.Text, Entities: m.Entities}
	if m.EditedAt != nil {
		w.EditDate = m.EditedAt.Unix()
	}
	if keyboardOf(m.ReplyMarkup) != nil {
		w.ReplyMarkup = m.ReplyMarkup
	}
	return w
}

type editMessageTextParams struct {
	ChatID             chatID                        `json:"chat_id"`
	MessageID          int64                         `json:"message_id"`
	InlineMessageID    string                        `json:"inline_message_id"`
	Text               string                        `json:"text"`
	Entities           json.RawMessage               `json:"entities"`
	ReplyMarkup        json.RawMessage               `json:"reply_markup"`
	LinkPreviewOptions *messenger.LinkPreviewOptions `json:"link_preview_options"`
}

// editMessageText replaces the text, entities and inline keyboard of a message the bot sent; a keyboard left
// out is taken away, as on the platform. An edit that changes nothing is refused ("message is not
// modified"); one of a message deleted ("message to edit not found") or not the bot's ("message can't be
// edited") too. Edits are faulted, delayed and count against the bot's and the chat's limits as sends do
// (rollFaultLocked, latencyLocked, admitLocked): an edit storm meets the same 429s.
func (s *Server) editMessageText(r *http.Request, b *bot, body []byte) (any, error) {
	var p editMessageTextParams
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	switch {
	case p.InlineMessageID != "":
		return nil, errInlineMessageID // the simulator plays no inline mode
	case !p.ChatID.set:
		return nil, errEmptyChatID
	case p.MessageID == 0:
		return nil, errNoMessageID
	case strings.TrimSpace(p.Text) == "":
		return nil, errEmptyText
	case utf8.RuneCountInString(p.Text) > maxTextLength:
		return nil, errTooLong
	}
	entities, err := checkEntities(p.Text, p.Entities)
	if err != nil {
		return nil, err
	}
	markup, err := inlineMarkupOnly(p.ReplyMarkup)
	if err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.reachableChatLocked(b, p.ChatID.id)
	if err != nil {
		return nil, err
	}
	switch fault, retryAfter := s.rollFaultLocked(b); fault {
	case faultTimeout:
		s.count(b, func(st *Stats) { st.InjectedTimeouts++ })
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		s.mu.Lock() // the deferred unlock
		return nil, errHangUp
	case fault429:
		s.count(b, func(st *Stats) { st.Injected429++; st.Answered429++ })
		return nil, tooManyRequests(retryAfter)
	case fault5xx:
		s.count(b, func(st *Stats) { st.Injected5xx++ })
		return nil, errInternal
	}
	// The edit applies to the message as it is after the latency.
	if err := s.admitThenWaitLocked(b, c); err != nil {
		return nil, err
	}
	now := s.now()
	i := slices.IndexFunc(c.messages, func(m SentMessage) bool { return m.MessageID == p.MessageID })
	switch {
	case i < 0 && c.deleted[p.MessageID]:
		return nil, errEditNotFound
	case i < 0 && p.MessageID > 0 && p.MessageID <= c.nextMsgID:
		return nil, errCantEdit // the user's message
	case i < 0:
		return nil, errEditNotFound
	}
	m := &c.messages[i]
	if m.Text == p.Text && bytes.Equal(m.Entities, entities) && bytes.Equal(m.ReplyMarkup, markup) {
		return nil, errNotModified
	}
	s.count(b, func(st *Stats) { st.Edits++ })
	m.Text, m.Entities, m.ReplyMarkup, m.EditedAt, m.LinkPreviewOptions = p.Text, entities, markup, &now, p.LinkPreviewOptions
	for j := range c.transcript {
		if l := &c.transcript[j]; l.From == "bot" && l.MessageID == m.MessageID {
			l.Text, l.HTML, l.ReplyMarkup, l.EditedAt = m.Text, lineHTML(m.Text, m.Entities), m.ReplyMarkup, m.EditedAt
		}
	}
	s.broadcastLocked()
	s.log.Info("bot edited a message", "bot_id", b.id, "chat_id", c.id, "message_id", m.MessageID, "text_length", len(m.Text),
		"inline_keyboard", markup != nil)
	return s.wireLocked(b, c, *m), nil
}

// Tap is a user's tap on a button of an inline keyboard (BotHandle.Tap, POST /sim/users/{id}/tap): the
// button is named by its text or by its callback_data.
type Tap struct {
	// MessageID is the bot's message the button is on; 0: the latest message of the chat that has it.
	MessageID    int64  `json:"message_id"`
	Button       string `json:"button"`
	CallbackData string `json:"callback_data"`
	// Forged sends CallbackData though no button of the message carries it, as a modified client can: the
	// platform forwards any data for a message of the bot's.
	Forged bool `json:"forged"`
	// ChatID is the chat of the message: 0 for the user's private chat with the bot.
	ChatID int64 `json:"chat_id"`
}

// CallbackQuery is a tap as the simulator keeps it: what the bot received, and its answer.
type CallbackQuery struct {
	ID        string `json:"id"`
	UpdateID  int64  `json:"update_id"` // 0 when the bot's allowed_updates leave callback_query out
	UserID    int64  `json:"user_id"`
	ChatID    int64  `json:"chat_id"`
	MessageID int64  `json:"message_id"`
	Data      string `json:"data"`
	Forged    bool   `json:"forged,omitempty"`
	// Time is when the user tapped.
	Time time.Time `json:"time"`
	// Answer is what answerCallbackQuery gave, the notice the user saw; nil until the bot answers.
	Answer *CallbackAnswer `json:"answer"`
}

// CallbackAnswer is a bot's answer to a callback query.
type CallbackAnswer struct {
	Text      string    `json:"text,omitempty"`
	ShowAlert bool      `json:"show_alert"` // an alert the user dismisses, rather than a notice that fades
	URL       string    `json:"url,omitempty"`
	Time      time.Time `json:"time"`
}

func (q *CallbackQuery) clone() CallbackQuery {
	out := *q
	if q.Answer != nil {
		a := *q.Answer
		out.Answer = &a
	}
	return out
}

// queries are the callback queries of a bot, by id, the latest keptQueries.
type queries struct {
	byID  map[string]*CallbackQuery
	order []string
}

func (qs *queries) add(q *CallbackQuery) {
	if len(qs.order) >= keptQueries {
		delete(qs.byID, qs.order[0])
		qs.order = qs.order[1:]
	}
	qs.byID[q.ID] = q
	qs.order = append(qs.order, q.ID)
}

// chatInstance is the platform's chat_instance: one opaque identifier per chat, the same for every query
// from it.
func chatInstance(botID, chatID int64) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d:%d", botID, chatID)
	return strconv.FormatInt(int64(h.Sum64()), 10)
}

// Tap makes the user tap a button in their private chat with the default bot (see BotHandle.Tap).
func (s *Server) Tap(userID int64, t Tap) (CallbackQuery, error) {
	return s.DefaultBot().Tap(userID, t)
}

// Tap makes the user tap a callback button of one of this bot's messages: the bot receives a callback_query
// (id, from, message, chat_instance, data) unless its allowed_updates leave them out. A url button opens its
// link and sends nothing, so it cannot be tapped here; nor can a button the message does not show, unless
// the tap is forged.
func (h *BotHandle) Tap(userID int64, t Tap) (CallbackQuery, error) {
	switch {
	case userID <= 0:
		return CallbackQuery{}, errors.New("a user id must be positive")
	case (t.Button == "") == (t.CallbackData == ""):
		return CallbackQuery{}, errors.New("name the button by its text (button) or by its callback_data, one of them")
	case t.Forged && !callbackDataOK(t.CallbackData):
		return CallbackQuery{}, errors.New("a forged tap carries callback_data of 1 to 64 bytes, as the platform takes")
	}
	s, b := h.s, h.b
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	switch {
	case u == nil:
		return CallbackQuery{}, fmt.Errorf("no user %d", userID)
	case u.Deleted:
		return CallbackQuery{}, ErrUserDeleted
	}
	chatID := cmp.Or(t.ChatID, userID)
	c := b.chats[chatID]
	if c == nil {
		return CallbackQuery{}, fmt.Errorf("user %d has no chat %d with @%s", userID, chatID, b.username)
	}
	m, data, err := findButton(c, t)
	if err != nil {
		return CallbackQuery{}, err
	}
	q := &CallbackQuery{ID: strconv.FormatInt(s.nextQueryID, 10), UserID: userID, ChatID: c.id, MessageID: m.MessageID,
		Data: data, Forged: t.Forged, Time: s.now()}
	s.nextQueryID++
	from := messenger.User{ID: u.ID, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username, LanguageCode: "en"}
	q.UpdateID, err = s.enqueueLocked(b, messenger.KindCallbackQuery, map[string]any{
		"id":            q.ID,
		"from":          from,
		"message":       s.wireLocked(b, c, m),
		"chat_instance": chatInstance(b.id, c.id),
		"data":          q.Data,
	})
	if err != nil {
		return CallbackQuery{}, err
	}
	b.queries.add(q)
	s.broadcastLocked()
	// Never the data: Herald's is a reference to a server-side prompt.
	s.log.Info("user tapped a button", "user_id", userID, "bot_id", b.id, "chat_id", c.id, "message_id", m.MessageID,
		"callback_query_id", q.ID, "update_id", q.UpdateID, "forged", t.Forged)
	return q.clone(), nil
}

// findButton finds the message and the data of a tap: the message named, or the latest one with the button.
func findButton(c *chat, t Tap) (SentMessage, string, error) {
	matches := func(b inlineButton) bool {
		return t.Button != "" && b.Text == t.Button || t.CallbackData != "" && b.CallbackData == t.CallbackData
	}
	for i := len(c.messages) - 1; i >= 0; i-- {
		m := c.messages[i]
		if t.MessageID != 0 && m.MessageID != t.MessageID {
			continue
		}
		kb := keyboardOf(m.ReplyMarkup)
		if t.Forged && (kb != nil || t.MessageID != 0) {
			return m, t.CallbackData, nil
		}
		for _, row := range kb {
			for _, b := range row {
				switch {
				case !matches(b):
				case b.URL != "":
					return m, "", fmt.Errorf("the button %q opens %s: a link sends nothing to the bot", b.Text, b.URL)
				default:
					return m, b.CallbackData, nil
				}
			}
		}
		if t.MessageID != 0 {
			return m, "", fmt.Errorf("message %d has no such button (text %q, callback_data %q)", m.MessageID, t.Button, t.CallbackData)
		}
	}
	if t.MessageID != 0 {
		return SentMessage{}, "", fmt.Errorf("the chat has no message %d from the bot", t.MessageID)
	}
	return SentMessage{}, "", fmt.Errorf("no message of the chat has such a button (text %q, callback_data %q)", t.Button, t.CallbackData)
}

// CallbackQuery returns one of the bot's callback queries, with its answer.
func (h *BotHandle) CallbackQuery(id string) (CallbackQuery, bool) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if q := h.b.queries.byID[id]; q != nil {
		return q.clone(), true
	}
	return CallbackQuery{}, false
}

// CallbackQueries returns the taps in the chat with the default bot (see BotHandle.CallbackQueries).
func (s *Server) CallbackQueries(chatID int64) []CallbackQuery {
	return s.DefaultBot().CallbackQueries(chatID)
}

// CallbackQueries returns the taps in the chat with this bot, oldest first, with the bot's answers.
func (h *BotHandle) CallbackQueries(chatID int64) []CallbackQuery {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	var out []CallbackQuery
	for _, id := range h.b.queries.order {
		if q := h.b.queries.byID[id]; q.ChatID == chatID {
			out = append(out, q.clone())
		}
	}
	return out
}

// WaitCallbackAnswer waits until the bot has answered the callback query and returns it with the answer.
func (h *BotHandle) WaitCallbackAnswer(ctx context.Context, id string) (CallbackQuery, error) {
	s := h.s
	for {
		s.mu.Lock()
		q := h.b.queries.byID[id]
		var out CallbackQuery
		if q != nil {
			out = q.clone()
		}
		ch := s.changed
		s.mu.Unlock()
		switch {
		case q == nil:
			return out, fmt.Errorf("bot %d has no callback query %q", h.b.id, id)
		case out.Answer != nil:
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return out, fmt.Errorf("while waiting for the answer to callback query %s: %w", id, ctx.Err())
		case <-s.done:
			return out, errors.New("simulator closed")
		}
	}
}

// queryID takes callback_query_id as a string, or as a number a loose client sends.
type queryID string

func (q *queryID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*q = queryID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*q = queryID(n.String())
	return nil
}

type answerCallbackQueryParams struct {
	CallbackQueryID queryID `json:"callback_query_id"`
	Text            string  `json:"text"`
	ShowAlert       bool    `json:"show_alert"`
	URL             string  `json:"url"`
}

// answerCallbackQuery records the bot's answer to one of its callback queries: once, as the platform takes
// it; a second answer, or one to a query the bot never received, is refused.
func (s *Server) answerCallbackQuery(b *bot, body []byte) (any, error) {
	var p answerCallbackQueryParams
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(p.Text) > maxAnswerText {
		// The simulator's wording: the platform's documents the limit, not its answer.
		return nil, badRequest("the answer's text is at most %d characters", maxAnswerText)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := b.queries.byID[string(p.CallbackQueryID)]
	if q == nil || q.Answer != nil {
		return nil, errQueryInvalid
	}
	q.Answer = &CallbackAnswer{Text: p.Text, ShowAlert: p.ShowAlert, URL: p.URL, Time: s.now()}
	s.broadcastLocked()
	s.log.Info("bot answered a callback query", "bot_id", b.id, "callback_query_id", q.ID, "text_length", len(p.Text), "show_alert", p.ShowAlert)
	return true, nil
}
