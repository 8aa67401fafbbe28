package ingress_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// delivered marks a notification delivered as a worker would (message 77), its message sent ago before
// now.
func (e *env) delivered(id string, ago time.Duration) {
	e.t.Helper()
	at := time.Now().Add(-ago)
	e.fx.SetNotification(e.t, id, fixture.InState(notification.Delivered), fixture.MessageID("77"), fixture.DeliveredAt(at),
		fixture.MessageSentAt(at), fixture.DeliveredAs("sent"))
}

// replace_key (§13) is a string of 1-64 of A-Za-z0-9_.:- or null; anything else is 400 invalid_request,
// for a send and for a batch item (refused in its place), and nothing is stored.
func TestReplaceKeyIsValidatedAtTheDoor(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for name, bad := range map[string]any{
		"empty": "", "too long": strings.Repeat("k", 65), "a space": "order 42", "a slash": "order/42", "non-ASCII": "заказ",
		"a number": 42, "an object": map[string]any{}, "a boolean": true,
	} {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "replace_key": bad})
		expectError(t, r, http.StatusBadRequest, "invalid_request")
		if m := r.json(t)["message"].(string); !strings.Contains(m, "replace_key") {
			t.Errorf("%s: the error %q does not name replace_key", name, m)
		}
		items := e.batchResults(key, map[string]any{"user_id": "u1", "message": "hi", "replace_key": bad},
			map[string]any{"user_id": "u1", "message": "fine", "replace_key": "a"})
		if items[0]["error"] != "invalid_request" || items[1]["status"] != "queued" {
			t.Errorf("%s: batch items %v, want the first refused invalid_request and the second queued", name, items)
		}
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE body LIKE '%hi' AND replace_key IS NULL`); n != 0 {
		t.Errorf("%d refused sends stored", n)
	}

	long := strings.Repeat("k", 64)
	for _, good := range []string{"order-42", "build:main.7_x", long} {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "replace_key": good})
		if r.status != http.StatusAccepted {
			t.Fatalf("replace_key %q: %d %s", good, r.status, r.body)
		}
		st := e.do("GET", "/v1/status/"+r.json(t)["tracking_id"].(string), key, nil).json(t)
		if st["replace_key"] != good || st["delivered_as"] != nil || st["message_deleted_at"] != nil {
			t.Errorf("status %v, want replace_key %q and null delivered_as and message_deleted_at", st, good)
		}
	}
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "plain", "replace_key": nil})
	if st := e.do("GET", "/v1/status/"+r.json(t)["tracking_id"].(string), key, nil).json(t); st["replace_key"] != nil {
		t.Errorf("a null replace_key reads %v, want null", st["replace_key"])
	}
}

// An Idempotency-Key's replay with another replace_key is another request.
func TestReplaceKeyIsPartOfTheIdempotentMeaning(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	first := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "replace_key": "a"}, "Idempotency-Key", "k1")
	if first.status != http.StatusAccepted {
		t.Fatalf("%d %s", first.status, first.body)
	}
	again := e.do("POST", "/v1/send", key, map[string]any{"replace_key": "a", "message": "hi", "user_id": "u1"}, "Idempotency-Key", "k1")
	if again.status != http.StatusAccepted || again.json(t)["tracking_id"] != first.json(t)["tracking_id"] {
		t.Errorf("the same send replayed: %d %s, want the first answer", again.status, again.body)
	}
	other := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "replace_key": "b"}, "Idempotency-Key", "k1")
	expectError(t, other, http.StatusConflict, "idempotency_conflict")
}

// DELETE /v1/notifications/{id}/message: 202 for a message delivered less than 48 hours ago, recorded for
// the workers; 409 not_deletable saying why otherwise (not delivered, older than 48 hours, deleted
// already); 404 for an unknown id or another tenant's.
func TestDeleteMessageIsAcceptedOnlyWhenDeletable(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	send := func() string {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
		return r.json(t)["tracking_id"].(string)
	}
	del := func(id string) response { return e.do("DELETE", "/v1/notifications/"+id+"/message", key, nil) }
	expectReason := func(r response, reason string) {
		t.Helper()
		expectError(t, r, http.StatusConflict, "not_deletable")
		if m := r.json(t)["message"]; m != reason {
			t.Errorf("message %q, want %q", m, reason)
		}
	}

	queued := send()
	expectReason(del(queued), notification.NotDeletableUndelivered)

	old := send()
	e.delivered(old, 49*time.Hour)
	expectReason(del(old), notification.NotDeletableTooOld)

	fresh := send()
	e.delivered(fresh, time.Hour)
	r := del(fresh)
	if r.status != http.StatusAccepted {
		t.Fatalf("DELETE of a message sent an hour ago: %d %s", r.status, r.body)
	}
	if got := r.json(t); got["tracking_id"] != fresh || got["status"] != "delivered" || got["delivered_as"] != "sent" || got["message_deleted_at"] != nil {
		t.Errorf("202 body %v, want the delivered notification, its message not deleted yet", got)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications WHERE tracking_id = $1 AND message_delete_requested_at IS NOT NULL`, fresh); n != 1 {
		t.Error("the deletion was not recorded for the workers")
	}
	expectReason(del(fresh), notification.NotDeletableDeleted)

	expectError(t, del("00000000-0000-7000-8000-000000000000"), http.StatusNotFound, "not_found")
	other := e.tenant("globex", "Globex", nil)
	expectError(t, e.do("DELETE", "/v1/notifications/"+fresh+"/message", other, nil), http.StatusNotFound, "not_found")
}
