package sim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/heraldhq/herald/internal/messenger"
)

// queued is an update waiting for getUpdates or the webhook.
type queued struct {
	id   int64
	kind string
	body json.RawMessage
}

type webhookConfig struct {
	url       string
	secret    string
	gen       int64 // bumped on every change, so an in-flight delivery can tell it is stale
	lastError string
	lastAt    time.Time
}

// Kinds the platform leaves out when allowed_updates is empty.
var optInKinds = []string{"chat_member", "message_reaction", "message_reaction_count"}

func (b *bot) allowedLocked(kind string) bool {
	if len(b.allowed) == 0 {
		return !slices.Contains(optInKinds, kind)
	}
	return slices.Contains(b.allowed, kind)
}

// ErrUserDeleted is returned for actions of a user whose account is deactivated.
var ErrUserDeleted = errors.New("the user's account is deactivated")

// enqueueLocked assigns the bot's next update id, builds the update and queues it unless allowed_updates
// filters its kind out. It returns the id, or 0 when filtered. Callers hold s.mu.
func (s *Server) enqueueLocked(b *bot, kind string, payload any) (int64, error) {
	id := b.nextUpdateID
	b.nextUpdateID++
	raw, err := json.Marshal(payload)
	if err != nil {
		return 0, fmt.Errorf("while encoding a %s update: %w", kind, err)
	}
	body := []byte(`{"update_id":` + strconv.FormatInt(id, 10) + `,"` + kind + `":`)
	body = append(append(body, raw...), '}')
	if !b.allowedLocked(kind) {
		return 0, nil
	}
	if len(b.pending) >= s.opts.MaxPendingUpdates {
		b.pending = b.pending[1:]
	}
	b.pending = append(b.pending, queued{id: id, kind: kind, body: body})
	s.count(b, func(st *Stats) { st.UpdatesGenerated++ })
	b.wakeLocked()
	s.broadcastLocked()
	return id, nil
}

// ensureUserLocked returns the user, creating it with defaults if new. A user has a private chat with the
// default bot from the start (every test before bots relies on it); with another bot, from their first
// action towards it (privateChatLocked). Callers hold s.mu.
func (s *Server) ensureUserLocked(id int64) *user {
	u := s.users[id]
	if u == nil {
		u = &user{User: User{ID: id, FirstName: "User " + strconv.FormatInt(id, 10)}, blocked: map[int64]bool{}}
		s.users[id] = u
	}
	s.privateChatLocked(s.def, id)
	return u
}

// privateChatLocked returns the bot's private chat with the user, opening it if new. Callers hold s.mu.
func (s *Server) privateChatLocked(b *bot, userID int64) *chat {
	c := b.chats[userID]
	if c == nil {
		c = &chat{id: userID, typ: messenger.ChatPrivate}
		b.chats[userID] = c
	}
	return c
}

// EnsureUser creates the user, or updates the non-empty fields of an existing one, and returns it.
// Blocked and Deleted are not changed here (use Block, Unblock, DeleteUser).
func (s *Server) EnsureUser(in User) (User, error) {
	if in.ID <= 0 {
		return User{}, errors.New("a user id must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.ensureUserLocked(in.ID)
	if in.FirstName != "" {
		u.FirstName = in.FirstName
	}
	if in.LastName != "" {
		u.LastName = in.LastName
	}
	if in.Username != "" {
		u.Username = in.Username
	}
	if in.PhoneNumber != "" {
		u.PhoneNumber = in.PhoneNumber
	}
	s.broadcastLocked()
	return u.view(s.def), nil
}

// GetUser returns a user, Blocked saying whether they blocked the default bot, and whether the user exists.
func (s *Server) GetUser(id int64) (User, bool) { return s.DefaultBot().GetUser(id) }

// Users returns every simulated user, by id, Blocked saying whether they blocked the default bot.
func (s *Server) Users() []User { return s.DefaultBot().Users() }

// Users returns every simulated user, by id, Blocked saying whether they blocked this bot.
func (h *BotHandle) Users() []User {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	out := make([]User, 0, len(h.s.users))
	for _, u := range h.s.users {
		out = append(out, u.view(h.b))
	}
	slices.SortFunc(out, func(a, b User) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Incoming is a message a user sends to the bot.
type Incoming struct {
	Text    string
	Contact *messenger.Contact
	// ChatID is the chat it is sent in: 0 for the user's private chat, or another id (a group, normally
	// negative) of type ChatType ("group" by default).
	ChatID   int64
	ChatType string
}

// Send makes the user send a message to the default bot (see BotHandle.Send).
func (s *Server) Send(userID int64, in Incoming) (int64, error) {
	return s.DefaultBot().Send(userID, in)
}

// Send makes the user send a message to this bot and returns the update id (0 when allowed_updates filters
// messages out). Unknown users are created. A user who blocked the bot unblocks it by writing, as on the
// platform.
func (h *BotHandle) Send(userID int64, in Incoming) (int64, error) {
	if userID <= 0 {
		return 0, errors.New("a user id must be positive")
	}
	s, b := h.s, h.b
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.ensureUserLocked(userID)
	if u.Deleted {
		return 0, ErrUserDeleted
	}
	if u.blocked[b.id] {
		if _, err := s.setBlockedLocked(b, u, false); err != nil {
			return 0, err
		}
	}
	c := s.privateChatLocked(b, userID)
	if in.ChatID != 0 && in.ChatID != userID {
		c = b.chats[in.ChatID]
		if c == nil {
			typ := in.ChatType
			if typ == "" {
				typ = messenger.ChatGroup
			}
			c = &chat{id: in.ChatID, typ: typ, title: "Group " + strconv.FormatInt(in.ChatID, 10)}
			b.chats[in.ChatID] = c
		}
	}
	c.nextMsgID++
	from := messenger.User{ID: u.ID, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username, LanguageCode: "en"}
	msg := messenger.Message{
		MessageID: c.nextMsgID,
		From:      &from,
		Chat:      s.chatView(c, u),
		Date:      s.now().Unix(),
		Text:      in.Text,
		Contact:   in.Contact,
	}
	if cmd, _, _ := strings.Cut(in.Text, " "); strings.HasPrefix(cmd, "/") && len(cmd) > 1 {
		msg.Entities = []messenger.MessageEntity{{Type: "bot_command", Offset: 0, Length: len(utf16.Encode([]rune(cmd)))}}
	}
	id, err := s.enqueueLocked(b, messenger.KindMessage, msg)
	if err == nil {
		c.addLine(Line{From: "user", UserID: u.ID, MessageID: msg.MessageID, Text: msg.Text, Contact: msg.Contact, Time: s.now()})
		s.broadcastLocked()
		// Never the text: a /start payload is a live link token, and the rest is the user's. The command
		// name and the length say enough to follow a test.
		command := ""
		if len(msg.Entities) > 0 {
			command, _, _ = strings.Cut(in.Text, " ")
		}
		s.log.Info("user sent a message", "user_id", userID, "bot_id", b.id, "chat_id", c.id, "update_id", id,
			"command", command, "text_length", len(in.Text), "contact", in.Contact != nil)
	}
	return id, err
}

func (s *Server) chatView(c *chat, u *user) messenger.Chat {
	if c.typ == messenger.ChatPrivate && u == nil { // a Reset forgot the user while a send was under way
		return messenger.Chat{ID: c.id, Type: c.typ}
	}
	if c.typ == messenger.ChatPrivate {
		return messenger.Chat{ID: c.id, Type: c.typ, FirstName: u.FirstName, Username: u.Username}
	}
	return messenger.Chat{ID: c.id, Type: c.typ, Title: c.title}
}

// StartUser makes the user open the default bot with a start payload (see BotHandle.StartUser).
func (s *Server) StartUser(userID int64, payload string) (int64, error) {
	return s.DefaultBot().StartUser(userID, payload)
}

// StartUser makes the user open this bot with a start payload, as a deep link t.me/<bot>?start=<payload>
// does: the message text is "/start <payload>" ("/start" alone for an empty payload).
func (h *BotHandle) StartUser(userID int64, payload string) (int64, error) {
	text := "/start"
	if payload != "" {
		text += " " + payload
	}
	return h.Send(userID, Incoming{Text: text})
}

// SendText makes the user send text in their private chat with the default bot.
func (s *Server) SendText(userID int64, text string) (int64, error) {
	return s.DefaultBot().SendText(userID, text)
}

// SendText makes the user send text in their private chat with this bot.
func (h *BotHandle) SendText(userID int64, text string) (int64, error) {
	return h.Send(userID, Incoming{Text: text})
}

// ShareContact makes the user share a contact in their private chat with the default bot (see
// BotHandle.ShareContact).
func (s *Server) ShareContact(userID int64, phone string, contactUserID *int64) (int64, error) {
	return s.DefaultBot().ShareContact(userID, phone, contactUserID)
}

// ShareContact makes the user share a contact in their private chat with this bot. An empty phone means the
// user's own number. contactUserID nil means the user's own contact (user_id = the sender); a pointer to 0
// means a contact without user_id; any other value, someone else's contact.
func (h *BotHandle) ShareContact(userID int64, phone string, contactUserID *int64) (int64, error) {
	s := h.s
	s.mu.Lock()
	u := s.ensureUserLocked(userID)
	c := messenger.Contact{PhoneNumber: phone, FirstName: u.FirstName, LastName: u.LastName, UserID: userID}
	if phone == "" {
		c.PhoneNumber = u.PhoneNumber
	}
	if contactUserID != nil {
		c.UserID = *contactUserID
		if other := s.users[*contactUserID]; other != nil && other.ID != userID {
			c.FirstName, c.LastName = other.FirstName, other.LastName
			if phone == "" {
				c.PhoneNumber = other.PhoneNumber
			}
		}
	}
	s.mu.Unlock()
	if c.PhoneNumber == "" {
		return 0, errors.New("no phone number given and the user has none")
	}
	return h.Send(userID, Incoming{Contact: &c})
}

// OpenLink makes the user open a deep link such as https://t.me/herald_sim_bot?start=TOKEN (or
// tg://resolve?domain=herald_sim_bot&start=TOKEN), in the bot the link names.
func (s *Server) OpenLink(userID int64, link string) (int64, error) {
	_, id, err := s.openLink(userID, link)
	return id, err
}

// openLink is OpenLink, which also returns the bot the link opened (the default bot when it opened none).
func (s *Server) openLink(userID int64, link string) (*BotHandle, int64, error) {
	name, _, err := parseDeepLink(link)
	if err != nil {
		return s.DefaultBot(), 0, err
	}
	h, ok := s.BotHandle(name)
	if !ok {
		return s.DefaultBot(), 0, fmt.Errorf("the link opens @%s, which is no bot of this simulator (GET /sim/bots lists them)", name)
	}
	id, err := h.OpenLink(userID, link)
	return h, id, err
}

// OpenLink makes the user open a deep link, which must name this bot.
func (h *BotHandle) OpenLink(userID int64, link string) (int64, error) {
	name, payload, err := parseDeepLink(link)
	if err != nil {
		return 0, err
	}
	if username := h.Info().Username; !strings.EqualFold(name, username) {
		return 0, fmt.Errorf("the link opens @%s, not this bot (@%s)", name, username)
	}
	return h.StartUser(userID, payload)
}

// Block makes the user block the default bot (see BotHandle.Block).
func (s *Server) Block(userID int64) error { return s.DefaultBot().Block(userID) }

// Unblock undoes Block.
func (s *Server) Unblock(userID int64) error { return s.DefaultBot().Unblock(userID) }

// Block makes the user block this bot: its sends to the chat then answer 403 "Forbidden: bot was blocked by
// the user"; other bots are not concerned. The bot receives a my_chat_member update, as on the platform.
func (h *BotHandle) Block(userID int64) error {
	_, _, err := h.SetBlocked(userID, true)
	return err
}

// Unblock undoes Block.
func (h *BotHandle) Unblock(userID int64) error {
	_, _, err := h.SetBlocked(userID, false)
	return err
}

// SetBlocked makes the user block (or unblock) this bot and says whether that changed anything, and the id
// of the my_chat_member update the bot receives for it: 0 when nothing changed, or when the bot's
// allowed_updates leave my_chat_member out (the platform's default includes it).
func (h *BotHandle) SetBlocked(userID int64, blocked bool) (updateID int64, changed bool, err error) {
	s := h.s
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil {
		return 0, false, fmt.Errorf("no user %d", userID)
	}
	if u.Deleted {
		return 0, false, ErrUserDeleted
	}
	s.privateChatLocked(h.b, userID) // a user blocks a bot from its chat
	if u.blocked[h.b.id] == blocked {
		return 0, false, nil
	}
	updateID, err = s.setBlockedLocked(h.b, u, blocked)
	return updateID, err == nil, err
}

// setBlockedLocked changes the user's block of the bot and queues the bot's my_chat_member update: a
// ChatMemberUpdated whose members are the bot, "kicked" (banned for good: until_date 0) while blocked and
// "member" otherwise. Callers hold s.mu.
func (s *Server) setBlockedLocked(b *bot, u *user, blocked bool) (int64, error) {
	if u.blocked[b.id] == blocked {
		return 0, nil
	}
	if blocked {
		u.blocked[b.id] = true
	} else {
		delete(u.blocked, b.id)
	}
	s.broadcastLocked()
	oldStatus, newStatus := "member", "kicked"
	if !blocked {
		oldStatus, newStatus = newStatus, oldStatus
	}
	from := messenger.User{ID: u.ID, FirstName: u.FirstName, Username: u.Username}
	me := b.user()
	member := func(status string) map[string]any {
		m := map[string]any{"status": status, "user": me}
		if status == "kicked" {
			m["until_date"] = 0 // ChatMemberBanned: 0 is for good
		}
		return m
	}
	s.log.Info("user changed the bot's membership", "user_id", u.ID, "bot_id", b.id, "blocked", blocked)
	return s.enqueueLocked(b, messenger.KindMyChatMember, map[string]any{
		"chat":            messenger.Chat{ID: u.ID, Type: messenger.ChatPrivate, FirstName: u.FirstName, Username: u.Username},
		"from":            from,
		"date":            s.now().Unix(),
		"old_chat_member": member(oldStatus),
		"new_chat_member": member(newStatus),
	})
}

// DeleteUser deactivates the user's account: every bot's sends to the chat then answer 403 "Forbidden: user
// is deactivated", and the user can no longer act.
func (s *Server) DeleteUser(userID int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[userID]
	if u == nil {
		return fmt.Errorf("no user %d", userID)
	}
	u.Deleted = true
	s.broadcastLocked()
	s.log.Info("user deleted their account", "user_id", userID)
	return nil
}

// InjectUpdate queues an arbitrary update for the default bot (see BotHandle.InjectUpdate).
func (s *Server) InjectUpdate(update json.RawMessage) (int64, error) {
	return s.DefaultBot().InjectUpdate(update)
}

// InjectUpdate queues an arbitrary update for this bot (a JSON object without update_id, e.g.
// {"edited_message": …} or a kind Herald does not handle) and returns the update id assigned to it.
func (h *BotHandle) InjectUpdate(update json.RawMessage) (int64, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(update, &fields); err != nil || fields == nil {
		return 0, errors.New("an update must be a JSON object")
	}
	delete(fields, "update_id")
	if len(fields) != 1 {
		return 0, errors.New("an update must have exactly one field besides update_id, its kind")
	}
	var kind string
	var payload json.RawMessage
	for kind, payload = range fields {
	}
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.enqueueLocked(h.b, kind, payload)
}

// PendingUpdates returns the default bot's updates not yet fetched or delivered, as JSON objects.
func (s *Server) PendingUpdates() []json.RawMessage { return s.DefaultBot().PendingUpdates() }

// PendingUpdates returns this bot's updates not yet fetched or delivered, as JSON objects.
func (h *BotHandle) PendingUpdates() []json.RawMessage {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	out := make([]json.RawMessage, len(h.b.pending))
	for i, q := range h.b.pending {
		out[i] = q.body
	}
	return out
}

// WebhookInfo reports the default bot's webhook as getWebhookInfo does.
func (s *Server) WebhookInfo() messenger.WebhookInfo { return s.DefaultBot().WebhookInfo() }

// WebhookInfo reports this bot's webhook as getWebhookInfo does.
func (h *BotHandle) WebhookInfo() messenger.WebhookInfo {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	b := h.b
	info := messenger.WebhookInfo{URL: b.webhook.url, PendingUpdateCount: len(b.pending), AllowedUpdates: b.allowed}
	if b.webhook.lastError != "" {
		info.LastErrorMessage = b.webhook.lastError
		info.LastErrorDate = b.webhook.lastAt.Unix()
	}
	return info
}

// deliverLoop POSTs the bot's pending updates to its webhook, one at a time and in order (each bot has its
// own loop: a slow webhook of one bot holds no other bot's updates). An update the webhook keeps refusing is
// dropped after WebhookAttempts, so one bad update cannot stall the rest forever. What became of each update
// is recorded for WaitWebhook.
func (s *Server) deliverLoop(b *bot) {
	for {
		s.mu.Lock()
		if b.webhook.url == "" || len(b.pending) == 0 {
			s.mu.Unlock()
			select {
			case <-b.wake:
				continue
			case <-s.done:
				return
			}
		}
		next, hook := b.pending[0], b.webhook
		s.mu.Unlock()

		out := WebhookOutcome{UpdateID: next.id}
		for attempt := 1; attempt <= s.opts.WebhookAttempts && out.State != WebhookAnswered; attempt++ {
			if attempt > 1 {
				select {
				case <-time.After(s.opts.WebhookBackoff << (attempt - 2)):
				case <-s.done:
					return
				}
				if !s.webhookUnchanged(b, hook.gen, next.id) {
					break
				}
			}
			status, err := s.post(hook, next.body)
			out.Attempts, out.Status = attempt, status
			s.mu.Lock()
			if err == nil {
				out.State, out.Error = WebhookAnswered, ""
				s.count(b, func(st *Stats) { st.WebhookDeliveries++ })
			} else {
				out.Error = err.Error()
				s.count(b, func(st *Stats) { st.WebhookFailures++ })
				if b.webhook.gen == hook.gen {
					b.webhook.lastError, b.webhook.lastAt = err.Error(), s.now()
				}
				s.log.Warn("webhook refused an update", "bot_id", b.id, "update_id", next.id, "attempt", attempt, "error", err)
			}
			s.mu.Unlock()
		}

		s.mu.Lock()
		// Pop only if nothing changed meanwhile: a new webhook or drop_pending_updates decides anew.
		if b.webhook.gen == hook.gen && len(b.pending) > 0 && b.pending[0].id == next.id {
			b.pending = b.pending[1:]
			if out.State != WebhookAnswered {
				out.State = WebhookDropped
				s.count(b, func(st *Stats) { st.WebhookDropped++ })
				s.log.Error("dropped an update the webhook kept refusing", "bot_id", b.id, "update_id", next.id)
			}
			b.outcomes.add(out)
			s.broadcastLocked()
		}
		s.mu.Unlock()
	}
}

func (s *Server) webhookUnchanged(b *bot, gen, id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return b.webhook.gen == gen && len(b.pending) > 0 && b.pending[0].id == id
}

// post delivers one update and returns the webhook's HTTP status (0 when it did not answer).
func (s *Server) post(hook webhookConfig, body []byte) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	target := hook.url
	if s.opts.WebhookPlainHTTP {
		if rest, ok := strings.CutPrefix(target, "https://"); ok {
			target = "http://" + rest
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("while building the webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if hook.secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", hook.secret)
	}
	resp, err := s.opts.WebhookClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("while posting to the webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("wrong response from the webhook: %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// The states of a WebhookOutcome.
const (
	WebhookAnswered = "answered" // the webhook answered 2xx: the update has been handled
	WebhookDropped  = "dropped"  // the webhook refused every attempt; the update is gone
	WebhookPending  = "pending"  // no answer yet within the wait; the update is still being delivered
	WebhookNone     = "no_webhook"
	WebhookFiltered = "filtered" // allowed_updates left the update out; it was never queued
)

// WebhookOutcome says what became of an update sent to the webhook.
type WebhookOutcome struct {
	UpdateID int64  `json:"-"`
	State    string `json:"state"`
	Status   int    `json:"status,omitempty"` // the last answer's HTTP status; 0: none
	Attempts int    `json:"attempts,omitempty"`
	Error    string `json:"error,omitempty"` // why the last attempt failed, or why nothing was waited for
}

// outcomes keeps the outcomes of the latest updates, for callers that wait for one.
type outcomes struct {
	byID  map[int64]WebhookOutcome
	order []int64
}

const keptOutcomes = 1024

func (o *outcomes) add(out WebhookOutcome) {
	if len(o.order) >= keptOutcomes {
		delete(o.byID, o.order[0])
		o.order = o.order[1:]
	}
	o.byID[out.UpdateID] = out
	o.order = append(o.order, out.UpdateID)
}

// WaitWebhook waits until the default bot's webhook has answered the update (see BotHandle.WaitWebhook).
func (s *Server) WaitWebhook(ctx context.Context, updateID int64) WebhookOutcome {
	return s.DefaultBot().WaitWebhook(ctx, updateID)
}

// WaitWebhook waits until this bot's webhook has answered the update (or the simulator gave it up) and says
// how; without a webhook it returns at once (the update waits for getUpdates). When ctx ends first, the
// outcome is WebhookPending.
func (h *BotHandle) WaitWebhook(ctx context.Context, updateID int64) WebhookOutcome {
	if updateID == 0 {
		return WebhookOutcome{State: WebhookFiltered, Error: "allowed_updates leaves this kind of update out"}
	}
	s, b := h.s, h.b
	for {
		s.mu.Lock()
		out, done := b.outcomes.byID[updateID]
		queued := slices.ContainsFunc(b.pending, func(q queued) bool { return q.id == updateID })
		url, ch := b.webhook.url, s.changed
		s.mu.Unlock()
		switch {
		case done:
			return out
		case !queued:
			return WebhookOutcome{UpdateID: updateID, State: WebhookNone, Error: "the update is not waiting for the webhook (fetched with getUpdates, or dropped)"}
		case url == "":
			return WebhookOutcome{UpdateID: updateID, State: WebhookNone, Error: "no webhook is set: the update waits for getUpdates"}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return WebhookOutcome{UpdateID: updateID, State: WebhookPending, Error: "the webhook has not answered yet"}
		case <-s.done:
			return WebhookOutcome{UpdateID: updateID, State: WebhookPending, Error: "the simulator is closing"}
		}
	}
}
