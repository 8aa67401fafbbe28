package sim

// Deleting messages (spec v1-extensions §13), as the platform does: a bot deletes its own message within
// 48 hours of sending it (deleteMessage); a user deletes a bot's message from the private chat at any time
// (BotHandle.DeleteAsUser, POST /sim/users/{id}/delete-message). A deleted message is gone for both sides:
// it leaves the chat's messages and transcript, and an edit of it is "message to edit not found".

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
)

// BotDeleteWindow is how long after sending a message a bot may delete it.
const BotDeleteWindow = 48 * time.Hour

var (
	errDeleteNotFound = &botError{code: 400, description: "Bad Request: message to delete not found"}
	errCantDelete     = &botError{code: 400, description: "Bad Request: message can't be deleted for everyone"}
)

type deleteMessageParams struct {
	ChatID    chatID `json:"chat_id"`
	MessageID int64  `json:"message_id"`
}

// deleteMessage deletes a message the bot sent less than BotDeleteWindow ago. It counts against the bot's
// and the chat's limits as a send does.
func (s *Server) deleteMessage(b *bot, body []byte) (any, error) {
	var p deleteMessageParams
	if err := decodeParams(body, &p); err != nil {
		return nil, err
	}
	switch {
	case !p.ChatID.set:
		return nil, errEmptyChatID
	case p.MessageID == 0:
		return nil, errNoMessageID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.reachableChatLocked(b, p.ChatID.id)
	if err != nil {
		return nil, err
	}
	if err := s.admitThenWaitLocked(b, c); err != nil {
		return nil, err
	}
	now := s.now()
	i := slices.IndexFunc(c.messages, func(m SentMessage) bool { return m.MessageID == p.MessageID })
	switch {
	case i < 0 && p.MessageID > 0 && p.MessageID <= c.nextMsgID && !c.deleted[p.MessageID]:
		return nil, errCantDelete // the user's message: a bot deletes others' messages only in groups it administers
	case i < 0:
		return nil, errDeleteNotFound
	case now.Sub(c.messages[i].Time) >= BotDeleteWindow:
		return nil, errCantDelete
	}
	s.removeLocked(c, p.MessageID)
	s.count(b, func(st *Stats) { st.Deletes++ })
	s.log.Info("bot deleted a message", "bot_id", b.id, "chat_id", c.id, "message_id", p.MessageID)
	return true, nil
}

// removeLocked takes a bot's message out of the chat: it is gone for both sides. Callers hold s.mu.
func (s *Server) removeLocked(c *chat, messageID int64) {
	c.messages = slices.DeleteFunc(c.messages, func(m SentMessage) bool { return m.MessageID == messageID })
	c.transcript = slices.DeleteFunc(c.transcript, func(l Line) bool { return l.From == "bot" && l.MessageID == messageID })
	if c.deleted == nil {
		c.deleted = map[int64]bool{}
	}
	c.deleted[messageID] = true
	s.broadcastLocked()
}

// ErrNoSuchMessage means the chat has no message of the bot with that id (never sent, or deleted already).
var ErrNoSuchMessage = errors.New("no such message of the bot in the chat")

// DeleteAsUser deletes the bot's message messageID from the user's private chat with the bot, as the user
// can at any time: the bot's later edit of it is "message to edit not found", its deletion "message to
// delete not found".
func (h *BotHandle) DeleteAsUser(userID, messageID int64) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	c := h.b.chats[userID]
	if c == nil || !slices.ContainsFunc(c.messages, func(m SentMessage) bool { return m.MessageID == messageID }) {
		return fmt.Errorf("message %d of chat %d: %w", messageID, userID, ErrNoSuchMessage)
	}
	h.s.removeLocked(c, messageID)
	h.s.log.Info("user deleted a bot's message", "bot_id", h.b.id, "chat_id", c.id, "message_id", messageID)
	return nil
}

// Backdate moves the bot's message messageID of chat chatID by back into the past, as if it had been sent
// that much earlier: the tests' way to a message past the 48 hours.
func (h *BotHandle) Backdate(chatID, messageID int64, by time.Duration) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	c := h.b.chats[chatID]
	if c == nil {
		return fmt.Errorf("message %d of chat %d: %w", messageID, chatID, ErrNoSuchMessage)
	}
	i := slices.IndexFunc(c.messages, func(m SentMessage) bool { return m.MessageID == messageID })
	if i < 0 {
		return fmt.Errorf("message %d of chat %d: %w", messageID, chatID, ErrNoSuchMessage)
	}
	c.messages[i].Time = c.messages[i].Time.Add(-by)
	return nil
}

// handleDeleteAsUser is POST /sim/users/{id}/delete-message {"message_id"}: the user deletes a bot's message.
func (s *Server) handleDeleteAsUser(w http.ResponseWriter, r *http.Request) {
	id, h, ok := s.userAndBot(w, r)
	var in struct {
		MessageID int64 `json:"message_id"`
	}
	if !ok || !readJSON(w, r, &in) {
		return
	}
	if err := h.DeleteAsUser(id, in.MessageID); err != nil {
		writeError(w, http.StatusNotFound, "not_found", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// reachableChatLocked is the bot's chat id, as a call that changes a message already sent finds it: chat
// not found, or the private chat of a user who deleted the account or blocked the bot (403). Callers hold
// s.mu.
func (s *Server) reachableChatLocked(b *bot, id int64) (*chat, error) {
	c := b.chats[id]
	if c == nil {
		return nil, errChatNotFound
	}
	if u := s.users[c.id]; c.typ == messenger.ChatPrivate && u != nil {
		switch {
		case u.Deleted:
			return nil, errDeactivated
		case u.blocked[b.id]:
			return nil, errBlocked
		}
	}
	return c, nil
}

// admitThenWaitLocked admits one call that changes a message already sent (an edit, a deletion) under the
// bot's and the chat's limits, as a send, then waits out the latency with s.mu released, so that the
// answer comes after it as a send's does and the change applies to the chat as it is then. Callers hold
// s.mu, and hold it again on return.
func (s *Server) admitThenWaitLocked(b *bot, c *chat) error {
	if err := s.admitLocked(b, s.now(), c, false); err != nil {
		return err
	}
	if latency := s.latencyLocked(b); latency > 0 {
		s.mu.Unlock()
		s.sleep(latency)
		s.mu.Lock()
	}
	return nil
}
