package updates_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// relinkedCode and relinkedMessage are what a notification ended by a relink shows (docs/delivery.md).
const (
	relinkedCode    = 1101
	relinkedMessage = "the user linked another messenger account"
)

// notify stores a tenant notification through the send gate (the user must be linked and verified) and
// moves it to status, as its life would; it returns the tracking id.
func (e *env) notify(tenantID, userID string, status notification.Status) string {
	e.t.Helper()
	n := store.NewNotification{TrackingID: uuid.Must(uuid.NewV7()).String(), Kind: notification.KindTenant, TenantID: tenantID,
		UserID: userID, Priority: 5, Body: "hello " + string(status)}
	if status == notification.Scheduled {
		at := time.Now().Add(time.Hour)
		n.Status, n.SendAt = notification.Scheduled, &at
	}
	got, err := e.st.InsertTenantNotifications(context.Background(), []store.NewNotification{n})
	if _, ok := got[n.TrackingID]; err != nil || !ok {
		e.t.Fatalf("insert %s for %s/%s: %v %v", status, tenantID, userID, got, err)
	}
	switch status {
	case notification.Retrying:
		e.fx.SetNotification(e.t, n.TrackingID, fixture.InState(status), fixture.Attempts(1), fixture.NextAttemptAt(time.Now().Add(time.Hour)))
	case notification.Delivering:
		e.fx.SetNotification(e.t, n.TrackingID, fixture.InState(status), fixture.Attempts(1), fixture.Lease(time.Now().Add(time.Minute)))
	case notification.Delivered:
		e.fx.SetNotification(e.t, n.TrackingID, fixture.InState(status), fixture.Attempts(1), fixture.MessageID("7"), fixture.DeliveredAt(time.Now()))
	}
	return n.TrackingID
}

type notificationRow struct {
	Status  string
	ChatID  *int64
	ErrCode int
	ErrMsg  *string
}

func (e *env) notificationRow(id string) notificationRow {
	e.t.Helper()
	row := e.fx.NotificationRow(e.t, id)
	r := notificationRow{row.Status, row.ChatID, row.ErrCode, row.ErrMsg}
	return r
}

// A notification only ever reaches the chat whose owner was verified when it was accepted. When the user
// links another messenger account, the notifications still waiting (scheduled, queued, retrying) end
// unlinked in the relink's own transaction, without a call to the platform, each with its
// notification.unlinked event; the one being delivered is its attempt's (its worker sends to the chat
// recorded at acceptance, the verified owner's), the delivered one stays delivered. A relink of the same
// account ends nothing, nor does the relink touch another user or the same user id at another tenant.
func TestRelinkingToAnotherAccountEndsThePendingNotifications(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Dev")
	label := "Acme"
	for _, u := range []struct {
		tenant, user string
		account      int64
	}{{"acme", "u1", 1001}, {"acme", "u2", 1003}, {"globex", "u1", 1001}} {
		e.link(u.tenant, u.user, u.account)
		e.session(u.tenant, u.user, "verified", &label)
	}
	if _, err := e.st.CreateCallbackEndpoint(context.Background(), store.CallbackEndpoint{ID: uuid.NewString(), TenantID: "acme",
		URL: "https://example.com/hook", Events: []string{"notification.unlinked"}}, []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	pending := map[string]string{}
	for _, s := range []notification.Status{notification.Scheduled, notification.Queued, notification.Retrying} {
		pending[e.notify("acme", "u1", s)] = string(s)
	}
	kept := map[string]string{
		e.notify("acme", "u1", notification.Delivering): "delivering",
		e.notify("acme", "u1", notification.Delivered):  "delivered",
		e.notify("acme", "u2", notification.Queued):     "queued",
		e.notify("globex", "u1", notification.Queued):   "queued",
	}
	unchanged := func(when string, ids map[string]string) {
		t.Helper()
		for id, want := range ids {
			if r := e.notificationRow(id); r.Status != want || r.ChatID == nil || *r.ChatID == 2002 {
				t.Errorf("%s: notification %s is %s in chat %v, want it %s as before", when, id, r.Status, r.ChatID, want)
			}
		}
	}

	// The same account again: nothing ends.
	expectOK(t, e.post(textUpdate(e.updateID(), 1001, "/start "+e.token("acme", "u1", "Acme", ""))))
	unchanged("after a relink of the same account", pending)
	unchanged("after a relink of the same account", kept)
	if n := e.count(`SELECT count(*) FROM callback_inbox`); n != 0 {
		t.Errorf("a relink of the same account recorded %d callback events", n)
	}

	// Another account: the waiting ones end unlinked, after the update's commit (issue 35).
	expectOK(t, e.post(textUpdate(e.updateID(), 2002, "/start "+e.token("acme", "u1", "Acme", ""))))
	e.endingsDone()
	if got := e.links("acme", "u1"); len(got) != 1 || got[0] != (linkRow{2002, 2002}) {
		t.Fatalf("links = %+v, want the new account", got)
	}
	for id, was := range pending {
		r := e.notificationRow(id)
		if r.Status != "unlinked" || r.ErrCode != relinkedCode || deref(r.ErrMsg) != relinkedMessage {
			t.Errorf("the %s notification after the relink: %s, %d %q; want unlinked, %d %q", was, r.Status, r.ErrCode, deref(r.ErrMsg),
				relinkedCode, relinkedMessage)
		}
		if r.ChatID == nil || *r.ChatID != 1001 {
			t.Errorf("the %s notification's chat is %v after the relink, want the verified owner's (1001)", was, r.ChatID)
		}
	}
	unchanged("after a relink to another account", kept)
	events := map[string]int{}
	for _, ev := range e.fx.CallbackInbox(t) {
		if ev.TenantID == "acme" && ev.Type == "notification.unlinked" {
			events[ev.TrackingID]++
		}
	}
	for id, was := range pending {
		if events[id] != 1 {
			t.Errorf("the %s notification has %d notification.unlinked events, want 1", was, events[id])
		}
	}
	if n := e.count(`SELECT count(*) FROM callback_inbox`); n != len(pending) {
		t.Errorf("%d callback events, want %d (one per notification ended)", n, len(pending))
	}
	// Nothing for the platform but the reply to the new chat: the relink sends no notification.
	rs := e.replies()
	if len(rs) != 2 || rs[0].ChatID != 1001 || rs[1].ChatID != 2002 {
		t.Errorf("replies %+v, want the two link confirmations only", rs)
	}
}
