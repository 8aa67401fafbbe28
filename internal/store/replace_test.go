package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
)

// The claim of a notification with a replace_key (§13) names the message to edit: its key's latest
// delivered notification's, when that went to the same chat through the same bot less than 48 hours ago
// (from the message's first send) and its message is neither deleted nor being deleted; otherwise none.
func TestTheClaimNamesTheKeysMessageToEdit(t *testing.T) {
	s := fixture(t) // user "ok" linked to chat 1
	ctx := context.Background()
	f := seed.New(s)
	now := time.Now()
	delivered := func(key, msg string, sentAgo time.Duration, opts ...seed.NotificationOption) string {
		return f.Notification(t, append([]seed.NotificationOption{seed.For("acme", "ok"), seed.ReplaceKey(key), seed.InState(notification.Delivered),
			seed.MessageID(msg), seed.DeliveredAt(now.Add(-sentAgo)), seed.MessageSentAt(now.Add(-sentAgo)), seed.CreatedAt(now.Add(-sentAgo))}, opts...)...)
	}
	claim := func(key string) notification.Delivery {
		t.Helper()
		id := f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey(key))
		d, err := s.ClaimDelivery(ctx, id, time.Minute)
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if d.ReplaceKey != key {
			t.Errorf("claimed replace_key %q, want %q", d.ReplaceKey, key)
		}
		return d
	}

	delivered("a", "10", 2*time.Hour)
	delivered("a", "11", time.Hour) // the latest
	if d := claim("a"); d.Edit == nil || d.Edit.MessageID != 11 || d.Edit.SentAt.Sub(now.Add(-time.Hour)).Abs() > time.Second {
		t.Errorf("edit target %+v, want message 11 sent an hour ago", d.Edit)
	}
	if d := claim("none"); d.Edit != nil {
		t.Errorf("a key never delivered edits %+v", d.Edit)
	}
	delivered("old", "20", 48*time.Hour+time.Minute)
	if d := claim("old"); d.Edit != nil {
		t.Errorf("a message older than 48 hours is edited: %+v", d.Edit)
	}
	// An edit delivered an hour ago of a message sent 47 hours and 59 minutes ago: the 48 hours run from the send.
	f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("edited"), seed.InState(notification.Delivered), seed.MessageID("30"),
		seed.DeliveredAt(now.Add(-time.Hour)), seed.MessageSentAt(now.Add(-48*time.Hour-time.Second)))
	if d := claim("edited"); d.Edit != nil {
		t.Errorf("an edit restarted the 48 hours: %+v", d.Edit)
	}
	delivered("chat", "40", time.Minute, seed.Chat(2))
	if d := claim("chat"); d.Edit != nil {
		t.Errorf("a message in another chat is edited: %+v", d.Edit)
	}
	delivered("bot", "50", time.Minute, seed.Via(notification.BotID(999)))
	if d := claim("bot"); d.Edit != nil {
		t.Errorf("a message of another bot is edited: %+v", d.Edit)
	}
	delivered("deleting", "60", time.Minute, seed.MessageDeleteRequested(now))
	if d := claim("deleting"); d.Edit != nil {
		t.Errorf("a message being deleted is edited: %+v", d.Edit)
	}
	// Another notification of the key that showed the same message asked for its deletion: the message is going.
	delivered("shared", "70", 2*time.Minute, seed.MessageDeleteRequested(now))
	delivered("shared", "70", time.Minute)
	if d := claim("shared"); d.Edit != nil {
		t.Errorf("a message another notification of its key is deleting is edited: %+v", d.Edit)
	}
	// Another tenant's key of the same name is not this one's.
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "globex", "ok", 1)
	f.Notification(t, seed.For("globex", "ok"), seed.ReplaceKey("mine"), seed.InState(notification.Delivered), seed.MessageID("80"),
		seed.DeliveredAt(now), seed.MessageSentAt(now))
	if d := claim("mine"); d.Edit != nil {
		t.Errorf("another tenant's message is edited: %+v", d.Edit)
	}
}

// One key's order: while a notification of its key accepted before it is pending, an in-order claim takes
// nothing (Behind); one whose turn comes after a later notification of its key was delivered is
// Superseded. The finish records delivered_as and keeps the edited message's first send.
func TestOneKeysOrderAtTheClaimAndTheFinish(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	f := seed.New(s)
	now := time.Now()
	first := f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("k"), seed.Priority(2), seed.CreatedAt(now.Add(-time.Second)))
	second := f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("k"), seed.Priority(9), seed.CreatedAt(now))
	f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("other"), seed.CreatedAt(now.Add(-time.Minute)))
	_, err := s.ClaimDeliveryInOrder(ctx, second, time.Minute)
	var nc *store.NotClaimable
	if !errors.As(err, &nc) || !nc.Behind {
		t.Fatalf("the key's later (high-priority) notification: %v, want behind the earlier one", err)
	}
	d1, err := s.ClaimDeliveryInOrder(ctx, first, time.Minute)
	if err != nil || d1.Edit != nil || d1.Superseded {
		t.Fatalf("the first: %+v %v", d1, err)
	}
	sentAt := now.Add(-time.Hour)
	if ok, err := s.FinishDelivery(ctx, d1, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "5"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	d2, err := s.ClaimDeliveryInOrder(ctx, second, time.Minute)
	if err != nil || d2.Edit == nil || d2.Edit.MessageID != 5 || d2.Superseded {
		t.Fatalf("the second: %+v %v, want an edit of message 5", d2, err)
	}
	if ok, err := s.FinishDelivery(ctx, d2, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "5",
		DeliveredAs: notification.DeliveredEdited, MessageSentAt: &sentAt}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	v1, _ := s.GetNotification(ctx, "acme", first)
	v2, _ := s.GetNotification(ctx, "acme", second)
	if v1.DeliveredAs == nil || *v1.DeliveredAs != notification.DeliveredSent || v2.DeliveredAs == nil || *v2.DeliveredAs != notification.DeliveredEdited ||
		v2.ReplaceKey == nil || *v2.ReplaceKey != "k" {
		t.Errorf("delivered_as %v and %v, replace_key %v", v1.DeliveredAs, v2.DeliveredAs, v2.ReplaceKey)
	}
	var kept time.Time
	if err := s.Pool().QueryRow(ctx, `SELECT message_sent_at FROM notifications WHERE tracking_id = $1`, second).Scan(&kept); err != nil ||
		kept.Sub(sentAt).Abs() > time.Millisecond {
		t.Errorf("the edit's message_sent_at %v (%v), want the message's first send %v", kept, err, sentAt)
	}

	// An older one of the key, retried after the newer was delivered, is superseded.
	older := f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("k"), seed.CreatedAt(now.Add(-time.Minute)))
	if d, err := s.ClaimDeliveryInOrder(ctx, older, time.Minute); err != nil || !d.Superseded {
		t.Errorf("an older notification of the key claimed after a newer one was delivered: %+v %v, want superseded", d, err)
	}
}

// A deletion: requested once within 48 hours of the message's send (the reasons otherwise), taken by one
// worker at a time under a lease, recorded once — on every notification of the key that showed the
// message — with the event for the one requested; dropped when the platform refuses it for good.
func TestAMessagesDeletionIsRequestedTakenAndRecordedOnce(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	f := seed.New(s)
	now := time.Now()
	endpoint(t, s, "acme", store.EventMessageDeleted)
	sent := f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("k"), seed.InState(notification.Delivered), seed.MessageID("9"),
		seed.DeliveredAt(now.Add(-time.Hour)), seed.MessageSentAt(now.Add(-time.Hour)), seed.CreatedAt(now.Add(-time.Hour)))
	edit := f.Notification(t, seed.For("acme", "ok"), seed.ReplaceKey("k"), seed.InState(notification.Delivered), seed.MessageID("9"),
		seed.DeliveredAt(now), seed.MessageSentAt(now.Add(-time.Hour)))
	queued := f.Notification(t, seed.For("acme", "ok"))
	old := f.Notification(t, seed.For("acme", "ok"), seed.InState(notification.Delivered), seed.MessageID("3"),
		seed.DeliveredAt(now.Add(-49*time.Hour)))

	reason := func(id string) string {
		t.Helper()
		_, err := s.RequestMessageDelete(ctx, "acme", id)
		var nd *store.NotDeletable
		if !errors.As(err, &nd) {
			t.Fatalf("RequestMessageDelete(%s): %v, want NotDeletable", id, err)
		}
		return nd.Reason
	}
	if r := reason(queued); r != notification.NotDeletableUndelivered {
		t.Errorf("queued: %q", r)
	}
	if r := reason(old); r != notification.NotDeletableTooOld {
		t.Errorf("49 hours old: %q", r)
	}
	if _, err := s.RequestMessageDelete(ctx, "globex", sent); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's: %v", err)
	}
	if v, err := s.RequestMessageDelete(ctx, "acme", sent); err != nil || v.TrackingID != sent {
		t.Fatalf("request: %+v %v", v, err)
	}
	if r := reason(sent); r != notification.NotDeletableDeleted {
		t.Errorf("again: %q", r)
	}

	taken, err := s.TakeMessageDeletes(ctx, 10, time.Minute)
	if err != nil || len(taken) != 1 || taken[0].TrackingID != sent || taken[0].ChatID != 1 || taken[0].MessageID != "9" {
		t.Fatalf("taken %+v %v", taken, err)
	}
	if again, err := s.TakeMessageDeletes(ctx, 10, time.Minute); err != nil || len(again) != 0 {
		t.Errorf("taken again under its lease: %+v %v", again, err)
	}
	if ok, err := s.MessageDeleted(ctx, sent); err != nil || !ok {
		t.Fatalf("recorded: %v %v", ok, err)
	}
	if ok, err := s.MessageDeleted(ctx, sent); err != nil || ok {
		t.Errorf("recorded twice: %v %v", ok, err)
	}
	for _, id := range []string{sent, edit} {
		if v, _ := s.GetNotification(ctx, "acme", id); v.MessageDeletedAt == nil {
			t.Errorf("%s: message_deleted_at not set", id)
		}
	}
	var events int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM callback_inbox WHERE type = $1`, store.EventMessageDeleted).Scan(&events); err != nil || events != 1 {
		t.Errorf("%d events (%v), want 1: for the notification whose deletion was requested", events, err)
	}
	if r := reason(edit); r != notification.NotDeletableDeleted {
		t.Errorf("the edit of the deleted message: %q", r)
	}

	// Refused for good: the request goes, the message stays, and the tenant may ask again.
	fresh := f.Notification(t, seed.For("acme", "ok"), seed.InState(notification.Delivered), seed.MessageID("12"), seed.DeliveredAt(now))
	if _, err := s.RequestMessageDelete(ctx, "acme", fresh); err != nil {
		t.Fatal(err)
	}
	if err := s.DropMessageDelete(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if taken, _ := s.TakeMessageDeletes(ctx, 10, time.Minute); len(taken) != 0 {
		t.Errorf("a dropped deletion is taken: %+v", taken)
	}
	if _, err := s.RequestMessageDelete(ctx, "acme", fresh); err != nil {
		t.Errorf("asked again after a drop: %v", err)
	}
}
