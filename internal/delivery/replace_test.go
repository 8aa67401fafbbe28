package delivery_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// Replace and delete after send (spec v1-extensions §13), end to end: the API, the outbox, Kafka, the
// workers and the simulator.

// sendKeyed posts /v1/send with a replace_key (and the extra fields), expects 202 and returns the tracking id.
func (e *env) sendKeyed(user, message, key string, extra map[string]any) string {
	e.t.Helper()
	body := map[string]any{"user_id": user, "message": message, "replace_key": key}
	for k, v := range extra {
		body[k] = v
	}
	status, out := e.call("POST", "/v1/send", body)
	if status != http.StatusAccepted {
		e.t.Fatalf("POST /v1/send: %d %v", status, out)
	}
	return out["tracking_id"].(string)
}

// status reads the notification as the tenant sees it.
func (e *env) status(id string) map[string]any {
	e.t.Helper()
	status, out := e.call("GET", "/v1/status/"+id, nil)
	if status != http.StatusOK {
		e.t.Fatalf("GET /v1/status/%s: %d %v", id, status, out)
	}
	return out
}

// delivered waits until the notification is delivered and returns how (delivered_as) and its message id.
func (e *env) delivered(id string) (as string, msgID string) {
	e.t.Helper()
	e.waitStatus(id, "delivered", 20*time.Second)
	st := e.status(id)
	as, _ = st["delivered_as"].(string)
	msgID, _ = st["messenger_message_id"].(string)
	return as, msgID
}

func msgIDOf(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("messenger_message_id %q: %v", s, err)
	}
	return id
}

// A status message that updates: the second and third notifications of a key edit the first one's message
// (text, formatting and buttons; no buttons takes the keyboard away), the same text again is "not
// modified" and delivered, another key is a new message — and the edits keep the chat's pace (the
// simulator counts edits against its limits: no violation).
func TestAReplaceKeyEditsItsMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("ann", 3701, true)
	e.start(e.fastOptions())

	track := map[string]any{"buttons": []any{[]any{map[string]any{"text": "Track", "url": "https://shop.example/42"}}}}
	packed := e.sendKeyed("ann", "Order 42: packed", "order-42", track)
	as, first := e.delivered(packed)
	if as != notification.DeliveredSent {
		t.Fatalf("the key's first notification was delivered as %q, want sent", as)
	}
	shipped := e.sendKeyed("ann", "Order 42: <b>shipped</b>", "order-42", map[string]any{"format": "html"})
	as, msg := e.delivered(shipped)
	if as != notification.DeliveredEdited || msg != first {
		t.Fatalf("the second was delivered as %q in message %s, want edited in %s", as, msg, first)
	}
	m := e.sim.Messages(3701)
	if len(m) != 1 || m[0].Text != brand("Order 42: shipped") || m[0].EditedAt == nil || len(m[0].Entities) == 0 || m[0].ReplyMarkup != nil {
		t.Fatalf("the chat after the edit: %+v; want one message, edited, bold, without its keyboard", m)
	}
	again := e.sendKeyed("ann", "Order 42: <b>shipped</b>", "order-42", map[string]any{"format": "html"})
	if as, msg := e.delivered(again); as != notification.DeliveredEdited || msg != first {
		t.Errorf("the same status again (not modified) was delivered as %q in %s, want edited in %s", as, msg, first)
	}
	if st := e.status(again); st["last_error_code"].(float64) != 0 || st["replace_key"] != "order-42" {
		t.Errorf("the unmodified edit's status %v", st)
	}
	other := e.sendKeyed("ann", "Order 43: packed", "order-43", nil)
	if as, msg := e.delivered(other); as != notification.DeliveredSent || msg == first {
		t.Errorf("another key was delivered as %q in %s, want a new message", as, msg)
	}
	if got := e.texts(3701); len(got) != 2 || got[0] != brand("Order 42: shipped") || got[1] != brand("Order 43: packed") {
		t.Errorf("the chat shows %q", got)
	}
	if st := e.sim.Stats(); st.Edits != 1 {
		t.Errorf("the simulator counted %d edits, want 1 (the third changed nothing)", st.Edits)
	}
	// Usage (§15): the four were accepted and delivered, two of them by editing the key's message.
	if u := e.usageToday(); u.Accepted != 4 || u.Delivered != 4 || u.Edited != 2 {
		t.Errorf("usage %+v, want 4 accepted, 4 delivered, 2 of them edited", u)
	}
	e.assertNoViolations()
}

// The user deleted the key's message: the next notification of the key cannot edit it ("message to edit
// not found") and is sent as a new message, which the key then follows.
func TestAKeysMessageTheUserDeletedIsSentAnew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("bob", 3702, true)
	e.start(e.fastOptions())
	_, first := e.delivered(e.sendKeyed("bob", "Build 7: running", "build-7", nil))
	must(t, e.sim.DefaultBot().DeleteAsUser(3702, msgIDOf(t, first)))

	as, second := e.delivered(e.sendKeyed("bob", "Build 7: passed", "build-7", nil))
	if as != notification.DeliveredSent || second == first {
		t.Fatalf("after the user deleted the message: delivered as %q in %s, want sent in a new message", as, second)
	}
	as, third := e.delivered(e.sendKeyed("bob", "Build 7: deployed", "build-7", nil))
	if as != notification.DeliveredEdited || third != second {
		t.Errorf("the next one: delivered as %q in %s, want an edit of the new message %s", as, third, second)
	}
	if got := e.texts(3702); len(got) != 1 || got[0] != brand("Build 7: deployed") {
		t.Errorf("the chat shows %q", got)
	}
	e.assertNoViolations()
}

// A key's message older than 48 hours is not edited: a new message goes.
func TestAKeysMessageOlderThan48HoursIsNotEdited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("cy", 3703, true)
	e.start(e.fastOptions())
	old := e.sendKeyed("cy", "Ticket 9: open", "ticket-9", nil)
	_, first := e.delivered(old)
	e.exec(`UPDATE notifications SET message_sent_at = now() - interval '48 hours 1 minute' WHERE tracking_id = $1`, old)
	as, second := e.delivered(e.sendKeyed("cy", "Ticket 9: closed", "ticket-9", nil))
	if as != notification.DeliveredSent || second == first {
		t.Errorf("past 48 hours: delivered as %q in %s, want a new message", as, second)
	}
}

// Notifications of one key go in the order accepted, edits included, whatever their priorities: a batch of
// five (two of them high-priority, on the other topic) ends with the last one's text, the first sent and
// the others edits, delivered one after the other.
func TestOneKeysNotificationsAreDeliveredInTheOrderAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("dee", 3704, true)
	prios := []int{5, 9, 2, 8, 5}
	items := make([]any, len(prios))
	for i, p := range prios {
		items[i] = map[string]any{"user_id": "dee", "message": "step " + strconv.Itoa(i+1), "priority": p, "replace_key": "job-1"}
	}
	status, out := e.call("POST", "/v1/send/batch", map[string]any{"notifications": items})
	if status != http.StatusOK {
		t.Fatalf("batch: %d %v", status, out)
	}
	var ids []string
	for _, r := range out["results"].([]any) {
		ids = append(ids, r.(map[string]any)["tracking_id"].(string))
	}
	e.start(e.fastOptions())
	var last time.Time
	var message string
	for i, id := range ids {
		as, msg := e.delivered(id)
		want := notification.DeliveredEdited
		if i == 0 {
			want, message = notification.DeliveredSent, msg
		}
		if as != want || msg != message {
			t.Errorf("step %d: delivered as %q in %s, want %s in %s", i+1, as, msg, want, message)
		}
		at, err := time.Parse(time.RFC3339Nano, e.status(id)["delivered_at"].(string))
		must(t, err)
		if at.Before(last) {
			t.Errorf("step %d was delivered at %v, before step %d (%v)", i+1, at, i, last)
		}
		last = at
	}
	if got := e.texts(3704); len(got) != 1 || got[0] != brand("step 5") {
		t.Errorf("the chat shows %q, want the last step only", got)
	}
	e.assertNoViolations()
}

// An edit storm: the platform answers the key's next edit 429 with a long retry_after. The notification
// after it does not wait for that retry (it would queue behind it) and edits the message; the throttled
// one, whose turn comes after a later status was delivered, does not replace it: it fails with 1107.
func TestAnOlderStatusRetriedAfterANewerOneDoesNotReplaceIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("eve", 3705, true)
	e.start(e.fastOptions())
	_, first := e.delivered(e.sendKeyed("eve", "Deploy: started", "deploy", nil))
	must(t, e.sim.SetFaults(sim.Faults{Next429: &sim.Next429{Count: 1, RetryAfter: 3}}))
	throttled := e.sendKeyed("eve", "Deploy: 50%", "deploy", nil)
	e.waitStatus(throttled, "retrying", 10*time.Second)
	newer := e.sendKeyed("eve", "Deploy: done", "deploy", nil)
	if as, msg := e.delivered(newer); as != notification.DeliveredEdited || msg != first {
		t.Errorf("the newer status: delivered as %q in %s, want an edit of %s", as, msg, first)
	}
	r := e.waitTerminal(throttled, 20*time.Second)
	if r.Status != "failed" || r.ErrCode != notification.CodeSuperseded {
		t.Errorf("the throttled older status ended %s (%d), want failed with %d", r.Status, r.ErrCode, notification.CodeSuperseded)
	}
	if got := e.texts(3705); len(got) != 1 || got[0] != brand("Deploy: done") {
		t.Errorf("the chat shows %q, want the newest status", got)
	}
	e.assertNoViolations()
}

// DELETE /v1/notifications/{id}/message end to end: 202, then the workers delete the message within
// seconds, set message_deleted_at on the key's notifications that showed it and record
// notification.message_deleted; the key's next notification is a new message; a second DELETE is 409.
// The request survives the process that answered it: it is recorded before the 202, and a worker started
// afterwards carries it out.
func TestDeleteMessageDeletesItWithinSeconds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	key, err := signing.ParseKey(signing.GenerateKey())
	must(t, err)
	fixture.New(e.st).CallbackEndpoint(t, key, "acme", "https://hooks.example.com/acme", "notification.message_deleted")
	e.user("fay", 3706, true)
	w := e.start(e.fastOptions())
	first := e.sendKeyed("fay", "Order 7: packed", "order-7", nil)
	e.delivered(first)
	edit := e.sendKeyed("fay", "Order 7: shipped", "order-7", nil)
	if as, _ := e.delivered(edit); as != notification.DeliveredEdited {
		t.Fatalf("the key's second notification was delivered as %q", as)
	}
	w.Stop(t) // no worker: the request waits in PostgreSQL

	status, out := e.call("DELETE", "/v1/notifications/"+first+"/message", nil)
	if status != http.StatusAccepted || out["message_deleted_at"] != nil {
		t.Fatalf("DELETE: %d %v", status, out)
	}
	time.Sleep(500 * time.Millisecond)
	if len(e.sim.Messages(3706)) != 1 {
		t.Fatal("the message went without a worker")
	}
	e.start(e.fastOptions())
	deadline := time.Now().Add(10 * time.Second)
	for e.status(first)["message_deleted_at"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("message_deleted_at not set within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m := e.sim.Messages(3706); len(m) != 0 {
		t.Errorf("the chat still shows %+v", m)
	}
	if e.status(edit)["message_deleted_at"] == nil {
		t.Error("the edit that showed the same message is not marked deleted")
	}
	events := 0
	for _, ev := range fixture.New(e.st).CallbackInbox(t) {
		if ev.TenantID == "acme" && ev.Type == "notification.message_deleted" && ev.TrackingID == first {
			events++
		}
	}
	if events != 1 {
		t.Errorf("%d notification.message_deleted events, want 1", events)
	}
	if status, out := e.call("DELETE", "/v1/notifications/"+first+"/message", nil); status != http.StatusConflict || out["error"] != "not_deletable" ||
		out["message"] != notification.NotDeletableDeleted {
		t.Errorf("a second DELETE: %d %v", status, out)
	}
	if as, _ := e.delivered(e.sendKeyed("fay", "Order 7: delivered", "order-7", nil)); as != notification.DeliveredSent {
		t.Errorf("after the deletion the key's next notification was delivered as %q, want sent", as)
	}
	e.assertNoViolations()
}

// A message the user deleted already counts as deleted: the platform's "message to delete not found".
func TestDeletingAMessageTheUserDeletedCountsAsDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("gus", 3707, true)
	e.start(e.fastOptions())
	id, _ := e.send("gus", "Your code is 1234", 5)
	_, msg := e.delivered(id)
	must(t, e.sim.DefaultBot().DeleteAsUser(3707, msgIDOf(t, msg)))
	if status, out := e.call("DELETE", "/v1/notifications/"+id+"/message", nil); status != http.StatusAccepted {
		t.Fatalf("DELETE: %d %v", status, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.status(id)["message_deleted_at"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("message_deleted_at not set within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A worker crash between the platform's answer and the finish: the platform applied the edit (or sent the
// new message) but the row still says delivering, under a lease that ran out. The redrive delivers it again
// and the key follows the message that exists: an edit already applied is "not modified" (delivered, no
// second message); a new message sent in place of one the user deleted is sent again (the duplicate any
// send risks in a crash), and the key follows the one recorded.
func TestACrashAfterThePlatformsAnswerLeavesTheKeyOnAMessageThatExists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("hal", 3708, true)
	w := e.start(e.fastOptions())
	_, first := e.delivered(e.sendKeyed("hal", "Order 9: packed", "order-9", nil))
	w.Stop(t)

	// The dead worker's edit: applied by the platform, never written.
	edited := e.sendKeyed("hal", "Order 9: shipped", "order-9", nil)
	must(t, e.client.EditMessageText(context.Background(), messenger.EditMessageTextRequest{ChatID: 3708, MessageID: msgIDOf(t, first),
		Text: brand("Order 9: shipped")}))
	e.exec(`UPDATE notifications SET status = 'delivering', attempts = 1, lease_expires_at = now() - interval '1 second',
		published_at = NULL WHERE tracking_id = $1`, edited)
	w = e.start(e.fastOptions())
	if as, msg := e.delivered(edited); as != notification.DeliveredEdited || msg != first {
		t.Fatalf("the redriven edit: delivered as %q in %s, want edited in %s", as, msg, first)
	}
	if got := e.texts(3708); len(got) != 1 || got[0] != brand("Order 9: shipped") {
		t.Fatalf("the chat shows %q, want the one message, edited once", got)
	}

	// The user deletes it; the next notification's edit fails ("message to edit not found"), a new message
	// goes, and the worker dies before its write: redriven, the edit fails again and a new message goes
	// again. The key follows the message recorded — one that exists.
	must(t, e.sim.DefaultBot().DeleteAsUser(3708, msgIDOf(t, first)))
	w.Stop(t)
	resent := e.sendKeyed("hal", "Order 9: out for delivery", "order-9", nil)
	lost, err := e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 3708, Text: brand("Order 9: out for delivery")})
	must(t, err)
	e.exec(`UPDATE notifications SET status = 'delivering', attempts = 1, lease_expires_at = now() - interval '1 second',
		published_at = NULL WHERE tracking_id = $1`, resent)
	e.start(e.fastOptions())
	as, msg := e.delivered(resent)
	if as != notification.DeliveredSent || msg == strconv.FormatInt(lost, 10) || msg == first {
		t.Fatalf("the redriven fallback: delivered as %q in %s, want sent in a new message (not %d, not %s)", as, msg, lost, first)
	}
	next := e.sendKeyed("hal", "Order 9: delivered", "order-9", nil)
	if as, m := e.delivered(next); as != notification.DeliveredEdited || m != msg {
		t.Errorf("the key's next notification: delivered as %q in %s, want an edit of the recorded message %s", as, m, msg)
	}
	if got := e.texts(3708); len(got) != 2 || got[0] != brand("Order 9: out for delivery") || got[1] != brand("Order 9: delivered") {
		t.Errorf("the chat shows %q: the dead worker's message, and the key's", got)
	}
}
