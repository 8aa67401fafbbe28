package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/messenger"
)

// help lists the control API for a person with curl.
var help = map[string]any{
	"bot_api": "POST /bot{token}/{getMe|sendMessage|editMessageText|answerCallbackQuery|setWebhook|deleteWebhook|getWebhookInfo|getUpdates}: every token <id>:<secret> is a bot of its own from its first POST",
	"control": []string{
		`Every POST and DELETE (here and to the Bot API) must be Content-Type: application/json, body or not, and not from another origin's page`,
		`?bot=<id or username> makes a route act on that bot (a user's actions, chats, updates, webhook, stats, faults); without it, the default bot`,
		`GET  /sim/bots, GET /sim/bots/{id or username}`,
		`POST /sim/bots {"username":"acme_bot","rate_limit":30,"burst":3,"paid_broadcast":true}  (optional "token":"<id>:<secret>" or "id", "first_name", "first_update_id"; the answer holds the token; again with the id: changes it)`,
		`POST /sim/bots/{id}/revoke {"token":"<id>:<secret>"}  (a new token, random without one; the old one answers 401)`,
		`POST /sim/users {"id":1001,"first_name":"Ann","phone_number":"+15551230001"}`,
		`GET  /sim/users, GET /sim/users/{id}`,
		`User actions (start, open-link, message, share-contact, POST /sim/updates) answer once the webhook has answered the update: "webhook":{"state":"answered","status":200} (or dropped, pending after ?wait= (default 10s), no_webhook)`,
		`POST /sim/users/{id}/start {"payload":"<link token>"}`,
		`POST /sim/users/{id}/open-link {"url":"https://t.me/<bot>?start=<link token>"}  (in the bot the link names)`,
		`POST /sim/users/{id}/message {"text":"/dev_help"}  (optional "chat_id","chat_type" for a group)`,
		`POST /sim/users/{id}/share-contact {"phone_number":"+15551230001","contact_user_id":1001}  (omit contact_user_id: own contact; 0: no user_id)`,
		`POST /sim/users/{id}/block | /unblock (per bot: the bot gets my_chat_member, kicked or member; the answer waits for its webhook) | /delete (the account)`,
		`POST /sim/users/{id}/tap {"message_id":3,"button":"Acme"}  (or "callback_data":"…"; no message_id: the latest message with it; "forged":true sends any callback_data): the bot gets a callback_query`,
		`GET  /sim/chats/{id}/messages (what the bot sent, as edited, with inline keyboards), GET /sim/chats/{id}/transcript (both sides, in order)`,
		`POST /sim/users/{id}/delete-message {"message_id":3}  (the user deletes a bot's message: gone for both sides; the bot's edit of it is "message to edit not found")`,
		`GET  /sim/chats/{id}/taps (the taps in the chat, with the bot's answerCallbackQuery: the notice the user saw)`,
		`GET  /sim/updates (pending), POST /sim/updates {"edited_message":{...}} (inject)`,
		`GET  /sim/webhook, GET /sim/stats (the totals, and "bots": each bot's; ?bot=: one bot's), POST /sim/reset`,
		`GET|POST|DELETE /sim/faults {"latency_ms":50,"error_rate_5xx":0.1,"timeout_rate":0,"rate_429":0,"retry_after":1,"next_429":{"count":3,"retry_after":2},"next_5xx":1,"next_timeout":1}`,
		`GET|POST|DELETE /sim/faults?bot=... : that bot's own faults, in place of the simulator's`,
		`GET|POST /sim/limits {"global_rate":30,"global_burst":3,"per_chat_rate":1,"per_chat_burst":3,"tolerance":0.05}  (global: every bot without a rate of its own)`,
		`POST /sim/callbacks (a callback endpoint: register it with POST /v1/callbacks), GET|DELETE /sim/callbacks (what arrived, signatures verified)`,
		`POST /sim/callbacks/secrets {"secret":"whsec_..."} (verify with it too), POST /sim/callbacks/fail {"count":3,"status":503}`,
	},
}

func (s *Server) handleHelp(w http.ResponseWriter, _ *http.Request) {
	def := s.DefaultBot().Info()
	writeJSON(w, 200, map[string]any{"bot_username": def.Username, "bot_id": def.ID, "routes": help})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // people read these: the texts' HTML as sent (apierror.EncodeJSON)
	_ = enc.Encode(v)
}

// writeError uses Herald's error body, {"error": code, "message": text}.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]string{"error": code, "message": message})
}

// readJSON decodes an optional JSON body; an empty body leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("malformed JSON body: %v", err))
		return false
	}
	return true
}

func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the id in the path must be an integer")
		return 0, false
	}
	return id, true
}

// botOf is the bot a route acts on: ?bot=<id or username>, else the default bot. For an unknown bot it
// answers 404 itself.
func (s *Server) botOf(w http.ResponseWriter, r *http.Request) (*BotHandle, bool) {
	ref := r.URL.Query().Get("bot")
	if ref == "" {
		return s.DefaultBot(), true
	}
	h, ok := s.BotHandle(ref)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no bot %q (GET /sim/bots lists them)", ref))
	}
	return h, ok
}

// answerAction answers a user action with the update it produced and, once the bot's webhook has answered
// it, what the webhook said: a client that acts next (a tenant starting verification right after a link was
// opened) finds the update's effect in place. The wait is bounded by Options.ActionWait; ?wait=0 skips it.
func (s *Server) answerAction(w http.ResponseWriter, r *http.Request, h *BotHandle, updateID int64, err error) {
	if actionFailed(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "update_id": updateID, "webhook": s.waitWebhook(r, h, updateID)})
}

// actionFailed answers a user action that could not be taken, and reports whether it did.
func actionFailed(w http.ResponseWriter, err error) bool {
	switch {
	case errors.Is(err, ErrUserDeleted):
		writeError(w, http.StatusConflict, "user_deleted", err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	}
	return err != nil
}

// waitWebhook waits, within the action's wait, for the webhook's answer to the update.
func (s *Server) waitWebhook(r *http.Request, h *BotHandle, updateID int64) WebhookOutcome {
	wait, _ := s.actionWait(r)
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	return h.WaitWebhook(ctx, updateID)
}

// actionWait is how long an action waits for the webhook: ?wait= (a duration), at most Options.ActionWait.
func (s *Server) actionWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return s.opts.ActionWait, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New("wait must be a duration such as 5s")
	}
	return min(d, s.opts.ActionWait), nil
}

// acting refuses a malformed ?wait= before the action happens.
func (s *Server) acting(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.actionWait(r); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
		h(w, r)
	}
}

func (s *Server) handleListUsers(w http.ResponseWriter, r *http.Request) {
	h, ok := s.botOf(w, r)
	if !ok {
		return
	}
	writeJSON(w, 200, map[string]any{"users": h.Users()})
}

func (s *Server) handleEnsureUser(w http.ResponseWriter, r *http.Request) {
	var in User
	if !readJSON(w, r, &in) {
		return
	}
	u, err := s.EnsureUser(in)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	writeJSON(w, 200, u)
}

func (s *Server) handleGetUser(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	h, ok := s.botOf(w, r)
	if !ok {
		return
	}
	u, found := h.GetUser(id)
	if !found {
		writeError(w, http.StatusNotFound, "not_found", "no such user")
		return
	}
	writeJSON(w, 200, u)
}

// userAndBot reads the path's user id and the ?bot= of a user's action, answering errors itself.
func (s *Server) userAndBot(w http.ResponseWriter, r *http.Request) (int64, *BotHandle, bool) {
	id, ok := pathID(w, r)
	if !ok {
		return 0, nil, false
	}
	h, ok := s.botOf(w, r)
	return id, h, ok
}

func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	var in struct {
		Payload string `json:"payload"`
	}
	if !ok || !readJSON(w, r, &in) {
		return
	}
	updateID, err := h.StartUser(id, in.Payload)
	s.answerAction(w, r, h, updateID, err)
}

func (s *Server) handleOpenLink(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	var in struct {
		URL string `json:"url"`
	}
	if !ok || !readJSON(w, r, &in) {
		return
	}
	var updateID int64
	var err error
	if r.URL.Query().Get("bot") != "" {
		updateID, err = h.OpenLink(id, in.URL) // it must name that bot
	} else {
		h, updateID, err = s.openLink(id, in.URL) // in the bot it names
	}
	s.answerAction(w, r, h, updateID, err)
}

func (s *Server) handleMessage(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	var in struct {
		Text     string `json:"text"`
		ChatID   int64  `json:"chat_id"`
		ChatType string `json:"chat_type"`
	}
	if !ok || !readJSON(w, r, &in) {
		return
	}
	if in.Text == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "text is required")
		return
	}
	updateID, err := h.Send(id, Incoming{Text: in.Text, ChatID: in.ChatID, ChatType: in.ChatType})
	s.answerAction(w, r, h, updateID, err)
}

func (s *Server) handleShareContact(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	var in struct {
		PhoneNumber   string `json:"phone_number"`
		ContactUserID *int64 `json:"contact_user_id"`
		ChatID        int64  `json:"chat_id"`
		ChatType      string `json:"chat_type"`
	}
	if !ok || !readJSON(w, r, &in) {
		return
	}
	if in.ChatID == 0 || in.ChatID == id {
		updateID, err := h.ShareContact(id, in.PhoneNumber, in.ContactUserID)
		s.answerAction(w, r, h, updateID, err)
		return
	}
	// A contact shared in a group: built here, since ShareContact is for the private chat.
	contact := &messenger.Contact{PhoneNumber: in.PhoneNumber, UserID: id}
	if in.ContactUserID != nil {
		contact.UserID = *in.ContactUserID
	}
	u, _ := s.EnsureUser(User{ID: id})
	contact.FirstName = u.FirstName
	if contact.PhoneNumber == "" {
		contact.PhoneNumber = u.PhoneNumber
	}
	updateID, err := h.Send(id, Incoming{Contact: contact, ChatID: in.ChatID, ChatType: in.ChatType})
	s.answerAction(w, r, h, updateID, err)
}

func (s *Server) handleUserAction(action func(h *BotHandle, userID int64) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, h, ok := s.userAndBot(w, r)
		if !ok {
			return
		}
		err := action(h, id)
		switch {
		case errors.Is(err, ErrUserDeleted):
			writeError(w, http.StatusConflict, "user_deleted", err.Error())
		case err != nil:
			writeError(w, http.StatusNotFound, "not_found", err.Error())
		default:
			u, _ := h.GetUser(id)
			writeJSON(w, 200, u)
		}
	}
}

// handleSetBlocked blocks or unblocks the bot as the user, and answers once the bot's webhook has answered
// the my_chat_member update (as a user's actions do): the user, whether it changed, and the update.
func (s *Server) handleSetBlocked(blocked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, h, ok := s.userAndBot(w, r)
		if !ok {
			return
		}
		updateID, changed, err := h.SetBlocked(id, blocked)
		switch {
		case errors.Is(err, ErrUserDeleted):
			writeError(w, http.StatusConflict, "user_deleted", err.Error())
			return
		case err != nil:
			writeError(w, http.StatusNotFound, "not_found", err.Error())
			return
		}
		var outcome *WebhookOutcome
		if changed {
			wait, _ := s.actionWait(r)
			ctx, cancel := context.WithTimeout(r.Context(), wait)
			defer cancel()
			o := h.WaitWebhook(ctx, updateID)
			outcome = &o
		}
		u, _ := h.GetUser(id)
		writeJSON(w, http.StatusOK, struct {
			User
			OK       bool            `json:"ok"`
			Changed  bool            `json:"changed"`
			UpdateID int64           `json:"update_id"`
			Webhook  *WebhookOutcome `json:"webhook"` // null when nothing changed: no update was sent
		}{u, true, changed, updateID, outcome})
	}
}

// handleTap taps a button as the user and answers once the bot's webhook has answered the callback_query,
// with the bot's answer to the query if it gave one by then.
func (s *Server) handleTap(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	var in Tap
	if !ok || !readJSON(w, r, &in) {
		return
	}
	q, err := h.Tap(id, in)
	if actionFailed(w, err) {
		return
	}
	outcome := s.waitWebhook(r, h, q.UpdateID)
	q, _ = h.CallbackQuery(q.ID)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "update_id": q.UpdateID, "callback_query_id": q.ID,
		"webhook": outcome, "answer": q.Answer})
}

func (s *Server) handleTaps(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	if !ok {
		return
	}
	taps := h.CallbackQueries(id)
	if taps == nil {
		taps = []CallbackQuery{}
	}
	writeJSON(w, 200, map[string]any{"chat_id": id, "taps": taps})
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	if !ok {
		return
	}
	msgs := h.Messages(id)
	if msgs == nil {
		msgs = []SentMessage{}
	}
	writeJSON(w, 200, map[string]any{"chat_id": id, "messages": msgs})
}

func (s *Server) handleTranscript(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	if !ok {
		return
	}
	lines := h.Transcript(id)
	if lines == nil {
		lines = []Line{}
	}
	writeJSON(w, 200, map[string]any{"chat_id": id, "lines": lines})
}

func (s *Server) handlePendingUpdates(w http.ResponseWriter, r *http.Request) {
	h, ok := s.botOf(w, r)
	if !ok {
		return
	}
	writeJSON(w, 200, map[string]any{"updates": h.PendingUpdates()})
}

func (s *Server) handleInjectUpdate(w http.ResponseWriter, r *http.Request) {
	h, ok := s.botOf(w, r)
	var raw json.RawMessage
	if !ok || !readJSON(w, r, &raw) {
		return
	}
	updateID, err := h.InjectUpdate(raw)
	s.answerAction(w, r, h, updateID, err)
}

func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if !readJSON(w, r, &f) {
		return
	}
	if r.URL.Query().Get("bot") != "" {
		h, ok := s.botOf(w, r)
		if !ok {
			return
		}
		if err := h.SetFaults(f); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
		writeJSON(w, 200, h.Faults())
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	writeJSON(w, 200, s.Faults())
}

func (s *Server) handleWebhookInfo(w http.ResponseWriter, r *http.Request) {
	h, ok := s.botOf(w, r)
	if !ok {
		return
	}
	writeJSON(w, 200, h.WebhookInfo())
}

// handleStats answers the totals with each bot's counters beside them, or with ?bot= one bot's counters in
// the same shape as the totals.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("bot") != "" {
		h, ok := s.botOf(w, r)
		if ok {
			writeJSON(w, 200, h.Stats())
		}
		return
	}
	writeJSON(w, 200, struct {
		Stats
		Bots []BotStats `json:"bots"`
	}{s.Stats(), s.AllBotStats()})
}

// handleFaults answers the simulator's faults, or with ?bot= those the bot's sends meet.
func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("bot") != "" {
		h, ok := s.botOf(w, r)
		if ok {
			writeJSON(w, 200, h.Faults())
		}
		return
	}
	writeJSON(w, 200, s.Faults())
}

// handleClearFaults turns the simulator's faults off, or with ?bot= takes the bot's own away.
func (s *Server) handleClearFaults(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("bot") != "" {
		h, ok := s.botOf(w, r)
		if ok {
			h.ClearFaults()
			writeJSON(w, 200, h.Faults())
		}
		return
	}
	_ = s.SetFaults(Faults{})
	writeJSON(w, 200, s.Faults())
}

func (s *Server) handleListBots(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, map[string]any{"bots": s.Bots()})
}

func (s *Server) handleGetBot(w http.ResponseWriter, r *http.Request) {
	h, ok := s.BotHandle(chi.URLParam(r, "bot"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such bot (GET /sim/bots lists them)")
		return
	}
	writeJSON(w, 200, h.Info())
}

func (s *Server) handleCreateBot(w http.ResponseWriter, r *http.Request) {
	var c BotConfig
	if !readJSON(w, r, &c) {
		return
	}
	info, err := s.CreateBot(c)
	if err != nil {
		writeBotError(w, err)
		return
	}
	writeJSON(w, 200, info)
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Token string `json:"token"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	info, err := s.RevokeToken(chi.URLParam(r, "bot"), in.Token)
	if err != nil {
		writeBotError(w, err)
		return
	}
	writeJSON(w, 200, info)
}

// writeBotError answers an error of CreateBot or RevokeToken.
func writeBotError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNoSuchBot):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, ErrBotConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	}
}

func (s *Server) handleLimits(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, s.Limits())
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	writeJSON(w, 200, map[string]bool{"ok": true})
}

func (s *Server) handleSetLimits(w http.ResponseWriter, r *http.Request) {
	l := s.Limits() // fields left out keep their values
	if !readJSON(w, r, &l) {
		return
	}
	if err := s.SetLimits(l); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	writeJSON(w, 200, s.Limits())
}
