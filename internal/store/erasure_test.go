package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
)

// The erasure of a user leaves nothing of their messenger identity and no event naming them: their
// notifications keep their delivery metadata but lose the body, the chat and the platform's message id
// (the one being delivered too); the tenant's system messages to their chat (link confirmation,
// verification prompt) go; their user.* callback events not yet delivered are deleted, the delivered and
// dropped ones keep no user id. What erasure itself reports (notification.cancelled) stays, as do other
// users' rows, another tenant's system message to the same chat, and a system message still being sent.
func TestEraseUserLeavesNoMessengerIdentityNorUserEvents(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	ep := endpoint(t, s, "acme")
	other := endpoint(t, s, "globex")

	waiting := queued(t, s)
	delivered, delivering := queued(t, s), queued(t, s)
	exec(t, s, `UPDATE notifications SET status = 'delivered', attempts = 1, messenger_message_id = '7' WHERE tracking_id = $1`, delivered)
	exec(t, s, `UPDATE notifications SET status = 'delivering', attempts = 1, lease_expires_at = now() + interval '1 minute' WHERE tracking_id = $1`, delivering)
	exec(t, s, `UPDATE phone_verifications SET status = 'verified' WHERE user_id = 'no'`)
	othersNotification := insert(t, s, tenantNotification("no"))
	system := func(tenant string, chat int64, status string) string {
		id := newID()
		exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, chat_id, priority, body, status) VALUES ($1, 'system', $2, $3, 9, 'connected', $4)`,
			id, tenant, chat, status)
		return id
	}
	confirmation, prompt := system("acme", 1, "delivered"), system("acme", 1, "queued")
	sending, globexReply, otherChat := system("acme", 1, "delivering"), system("globex", 1, "delivered"), system("acme", 2, "delivered")

	// ok's user.* events: one still in the inbox, one pending at the endpoint, one delivered, one dropped;
	// no's (another user) and a ping stay as they are.
	exec(t, s, `INSERT INTO callback_inbox (tenant_id, type, user_id, created_at) VALUES ('acme', 'user.verified', 'ok', now()), ('acme', 'user.verified', 'no', now())`)
	for _, ev := range []struct{ endpoint, user, state string }{
		{ep, "ok", "pending"}, {ep, "ok", "delivered"}, {ep, "ok", "dropped"}, {ep, "no", "pending"}, {other, "ok", "pending"},
	} {
		exec(t, s, `INSERT INTO callback_events (event_id, endpoint_id, type, user_id, state, payload, finished_at)
			VALUES (gen_random_uuid(), $1, 'user.linked', $2, $3, CASE WHEN $3 = 'pending' THEN '{"data":{"user_id":"x"}}'::bytea END,
			        CASE WHEN $3 <> 'pending' THEN now() END)`, ev.endpoint, ev.user, ev.state)
	}

	if _, err := s.EraseUser(ctx, "acme", "ok"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tenant_id = 'acme' AND user_id = 'ok'`); n != 3 {
		t.Errorf("%d of the user's 3 notifications left, want their delivery metadata kept", n)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok' AND (body <> '' OR chat_id IS NOT NULL OR messenger_message_id IS NOT NULL)`); n != 0 {
		t.Errorf("%d of the user's notifications keep a body, a chat or a messenger message id", n)
	}
	if st := statusOf(t, s, waiting); st != notification.Cancelled {
		t.Errorf("the waiting notification is %s, want cancelled", st)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = ANY($1::uuid[])`, []string{confirmation, prompt}); n != 0 {
		t.Errorf("%d of the tenant's system messages to the user's chat left", n)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = ANY($1::uuid[])`, []string{sending, globexReply, otherChat, othersNotification}); n != 4 {
		t.Errorf("only %d of the 4 rows the erasure must not touch are left", n)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND chat_id = 2 AND body = 'hello'`, othersNotification); n != 1 {
		t.Error("another user's notification was touched")
	}
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE user_id = 'ok'`); n != 0 {
		t.Errorf("%d user events of the erased user left in the inbox", n)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE type = 'notification.cancelled' AND tracking_id = $1`, waiting); n != 1 {
		t.Errorf("%d notification.cancelled events for the notification the erasure cancelled, want 1", n)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE endpoint_id = $1 AND user_id = 'ok'`, ep); n != 0 {
		t.Errorf("%d callback events of the tenant still name the erased user", n)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE endpoint_id = $1 AND type = 'user.linked' AND user_id IS NULL AND payload IS NULL AND state <> 'pending'`, ep); n != 2 {
		t.Errorf("%d anonymised delivered and dropped events, want 2 (the pending one deleted)", n)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE user_id = 'no'`) + count(t, s, `SELECT count(*) FROM callback_events WHERE user_id = 'no'`); n != 2 {
		t.Errorf("another user's events: %d left, want 2", n)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_events WHERE endpoint_id = $1 AND user_id = 'ok'`, other); n != 1 {
		t.Error("another tenant's event about its own user of the same id was touched")
	}
	if st := statusOf(t, s, delivering); st != notification.Delivering {
		t.Errorf("the notification being delivered is %s, want it left to its attempt", st)
	}
}

// An attempt that was running when its user was erased records its outcome without the platform's message
// id: the erasure emptied the row's chat, and nothing of the messenger identity comes back.
func TestAnAttemptEndingAfterTheErasureRecordsNoMessengerMessageID(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	id := queued(t, s)
	d, err := s.ClaimDelivery(ctx, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EraseUser(ctx, "acme", "ok"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.FinishDelivery(ctx, d, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "42"}); !ok || err != nil {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND status = 'delivered' AND messenger_message_id IS NULL AND chat_id IS NULL`, id); n != 1 {
		t.Error("the attempt that ended after the erasure recorded the messenger message id")
	}
}
