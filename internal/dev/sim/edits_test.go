package sim_test

import (
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// deleteMessage deletes a message the bot sent less than 48 hours ago, for both sides, and refuses what the
// platform refuses: a message not there (never sent, deleted already), one older than 48 hours, one that
// is not the bot's, a request without its message.
func TestDeleteMessageDeletesTheBotsMessageWithin48Hours(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	first, err := e.send(t, 1001, "Your order is packed")
	noError(t, err)
	kept, err := e.send(t, 1001, "Your invoice")
	noError(t, err)

	if err := e.client.DeleteMessage(t.Context(), messenger.DeleteMessageRequest{ChatID: 1001, MessageID: first}); err != nil {
		t.Fatalf("deleting a message sent now: %v", err)
	}
	if m := e.sim.Messages(1001); len(m) != 1 || m[0].MessageID != kept {
		t.Errorf("the chat's messages after the deletion: %+v, want only %d", m, kept)
	}
	for _, l := range e.sim.Transcript(1001) {
		if l.MessageID == first {
			t.Errorf("the deleted message is still in the transcript: %+v", l)
		}
	}
	if st := e.sim.Stats(); st.Deletes != 1 {
		t.Errorf("stats count %d deletions, want 1", st.Deletes)
	}

	describe := func(status int, res messenger.Response) string {
		t.Helper()
		if status != 400 || res.OK {
			t.Errorf("answered %d ok=%v, want 400", status, res.OK)
		}
		return res.Description
	}
	if d := describe(e.botAPI(t, "deleteMessage", map[string]any{"chat_id": 1001, "message_id": first})); d != "Bad Request: message to delete not found" {
		t.Errorf("deleting it again: %q", d)
	}
	if d := describe(e.botAPI(t, "deleteMessage", map[string]any{"chat_id": 1001, "message_id": 999})); d != "Bad Request: message to delete not found" {
		t.Errorf("deleting a message never sent: %q", d)
	}
	if d := describe(e.botAPI(t, "editMessageText", map[string]any{"chat_id": 1001, "message_id": first, "text": "shipped"})); d != "Bad Request: message to edit not found" {
		t.Errorf("editing the deleted message: %q", d)
	}
	if d := describe(e.botAPI(t, "deleteMessage", map[string]any{"chat_id": 1001})); d != "Bad Request: message identifier is not specified" {
		t.Errorf("no message_id: %q", d)
	}

	// Past 48 hours the bot may not delete it any more (and may still edit it).
	noError(t, e.sim.DefaultBot().Backdate(1001, kept, sim.BotDeleteWindow))
	if d := describe(e.botAPI(t, "deleteMessage", map[string]any{"chat_id": 1001, "message_id": kept})); d != "Bad Request: message can't be deleted for everyone" {
		t.Errorf("deleting a message sent 48 hours ago: %q", d)
	}
	e.mustBotAPI(t, "editMessageText", map[string]any{"chat_id": 1001, "message_id": kept, "text": "Your invoice, corrected"}, nil)

	// The user's own message is not the bot's to delete.
	e.sendText(t, 1001, "thanks")
	tr := e.sim.Transcript(1001)
	mine := tr[len(tr)-1]
	if mine.From != "user" {
		t.Fatalf("the transcript's last line %+v, want the user's", mine)
	}
	if d := describe(e.botAPI(t, "deleteMessage", map[string]any{"chat_id": 1001, "message_id": mine.MessageID})); d != "Bad Request: message can't be deleted for everyone" {
		t.Errorf("deleting the user's message: %q", d)
	}
}

// A user deletes a bot's message from the chat (the control API): it is gone for both sides, and the bot's
// edit and deletion of it find nothing.
func TestAUserDeletesABotsMessage(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1001})
	id, err := e.send(t, 1001, "Build running")
	noError(t, err)
	e.mustControl(t, "POST", "/sim/users/1001/delete-message", map[string]any{"message_id": id}, nil)
	if m := e.sim.Messages(1001); len(m) != 0 {
		t.Errorf("the chat still has %+v", m)
	}
	if status := e.control(t, "POST", "/sim/users/1001/delete-message", map[string]any{"message_id": id}, nil); status != 404 {
		t.Errorf("deleting it again as the user: %d, want 404", status)
	}
	err = e.client.EditMessageText(t.Context(), messenger.EditMessageTextRequest{ChatID: 1001, MessageID: id, Text: "Build passed"})
	if !messenger.Uneditable(err) {
		t.Errorf("editing a message the user deleted: %v, want message to edit not found", err)
	}
	err = e.client.DeleteMessage(t.Context(), messenger.DeleteMessageRequest{ChatID: 1001, MessageID: id})
	if !messenger.MessageGone(err) {
		t.Errorf("deleting a message the user deleted: %v, want message to delete not found", err)
	}
}

// Edits and deletions count against the per-chat limit as sends do: an edit right after a send to a chat
// allowed one message a second is answered 429 and counted as a violation, and so is a deletion; spaced
// by the interval, both pass. Entities, keyboard and link preview of an edit are kept.
func TestEditsAndDeletionsCountAgainstTheLimits(t *testing.T) {
	e := newEnv(t, sim.Options{PerChatRate: 1, PerChatBurst: 1})
	e.user(t, sim.User{ID: 1001})
	id, err := e.send(t, 1001, "Build running")
	noError(t, err)
	err = e.client.EditMessageText(t.Context(), messenger.EditMessageTextRequest{ChatID: 1001, MessageID: id, Text: "Build passed"})
	if messenger.RetryAfter(err) <= 0 {
		t.Fatalf("an edit right after a send: %v, want 429 with retry_after", err)
	}
	st := e.sim.Stats()
	if st.ChatLimitViolations != 1 || st.Edits != 0 {
		t.Errorf("stats %+v, want one chat limit violation and no edit", st)
	}

	time.Sleep(1100 * time.Millisecond)
	preview := &messenger.LinkPreviewOptions{IsDisabled: true}
	err = e.client.EditMessageText(t.Context(), messenger.EditMessageTextRequest{ChatID: 1001, MessageID: id, Text: "Build passed",
		Entities:           []byte(`[{"type":"bold","offset":6,"length":6}]`),
		ReplyMarkup:        []byte(`{"inline_keyboard":[[{"text":"Logs","url":"https://ci.example/7"}]]}`),
		LinkPreviewOptions: preview})
	noError(t, err)
	m := e.sim.Messages(1001)
	if len(m) != 1 || m[0].Text != "Build passed" || m[0].EditedAt == nil || len(m[0].Entities) == 0 || m[0].ReplyMarkup == nil ||
		m[0].LinkPreviewOptions == nil || !m[0].LinkPreviewOptions.IsDisabled {
		t.Errorf("the edited message: %+v", m)
	}
	err = e.client.DeleteMessage(t.Context(), messenger.DeleteMessageRequest{ChatID: 1001, MessageID: id})
	if messenger.RetryAfter(err) <= 0 {
		t.Fatalf("a deletion right after an edit: %v, want 429 with retry_after", err)
	}
	time.Sleep(1100 * time.Millisecond)
	noError(t, e.client.DeleteMessage(t.Context(), messenger.DeleteMessageRequest{ChatID: 1001, MessageID: id}))
	if st := e.sim.Stats(); st.Edits != 1 || st.Deletes != 1 || st.ChatLimitViolations != 2 {
		t.Errorf("stats %+v, want one edit, one deletion and two chat limit violations", st)
	}
}
