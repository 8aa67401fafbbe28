package store_test

import (
	"context"
	"testing"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
)

// The console's reads: the latest notifications of one tenant, and each user's progress (linked,
// verification and its prompt, sent and delivered), never another tenant's.
func TestConsoleReadsOneTenantsNotificationsAndUsers(t *testing.T) {
	t.Parallel()
	s := fixture(t)
	ctx := context.Background()
	first, second := queued(t, s), queued(t, s)
	exec(t, s, `UPDATE notifications SET status = 'delivered' WHERE tracking_id = $1`, first)
	exec(t, s, `UPDATE notifications SET created_at = created_at - interval '1 second' WHERE tracking_id = $1`, first)
	if err := s.CreateTenant(ctx, "other", "Other"); err != nil {
		t.Fatal(err)
	}
	seed.New(s).User(t, "other", "ok", seed.LinkedTo(3))
	// "no" starts a verification: its prompt is what the console shows.
	prompt := func(chatID int64) store.NewNotification {
		return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, TenantID: "acme", ChatID: chatID, Priority: 8, Body: "verify"}
	}
	if _, _, err := s.StartVerification(ctx, "acme", "no", "Acme", prompt); err != nil {
		t.Fatal(err)
	}

	ns, err := s.RecentNotifications(ctx, "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 2 || ns[0].TrackingID != second || ns[1].TrackingID != first || ns[1].Status != notification.Delivered {
		t.Errorf("recent notifications (newest first, tenant notifications only): %+v", ns)
	}

	users, err := s.UsersProgress(ctx, "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.UserProgress{}
	for _, u := range users {
		got[u.UserID] = u
	}
	if ok := got["ok"]; len(users) != 2 || ok.MessengerUserID == nil || *ok.MessengerUserID != 1 || ok.Verification != "verified" ||
		ok.Sent != 2 || ok.Delivered != 1 || ok.Prompt != nil {
		t.Errorf("user ok: %+v (of %d users)", ok, len(users))
	}
	if no := got["no"]; no.Verification != "pending" || no.Prompt == nil || no.Prompt.Status != notification.Queued || no.Sent != 0 {
		t.Errorf("user no: %+v", no)
	}
}
