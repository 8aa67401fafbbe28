package store_test

import (
	"context"
	"testing"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// The gate and the insert are one statement: each row goes in only when its user is linked with a verified
// phone, and the statement says which went in.
func TestInsertGatesEachRow(t *testing.T) {
	s := fixture(t)
	ok1, no, ok2, stranger := tenantNotification("ok"), tenantNotification("no"), tenantNotification("ok"), tenantNotification("nobody")
	got, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{ok1, no, ok2, stranger})
	if err != nil {
		t.Fatal(err)
	}
	// Each comes back with its chat (user "ok" is linked to chat 1): the envelope's partition key.
	if len(got) != 2 || got[ok1.TrackingID].Chat != 1 || got[ok2.TrackingID].Chat != 1 {
		t.Fatalf("accepted %v, want exactly the two sends to the verified user, with chat 1", got)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE chat_id = 1`); n != 2 {
		t.Errorf("%d rows record chat 1, want 2 (republishing keys them by it)", n)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE status = 'queued' AND published_at IS NOT NULL`); n != 2 {
		t.Errorf("%d rows queued with published_at set, want 2 (inserted as 'publish under way')", n)
	}
}

// A batch is one statement: a row that violates a constraint fails the whole batch, and nothing of it is
// stored (the outbox answers every request of the batch with the error).
func TestInsertWithAFailingRowStoresNothing(t *testing.T) {
	s := fixture(t)
	good := tenantNotification("ok")
	bad := tenantNotification("ok")
	bad.Priority = 12 // the CHECK allows 0..9
	if _, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{good, bad}); err == nil {
		t.Fatal("a batch with an invalid row was accepted")
	}
	dup := tenantNotification("ok")
	if _, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{dup, dup}); err == nil {
		t.Fatal("a batch with a duplicate tracking id was accepted")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications`); n != 0 {
		t.Errorf("%d rows stored from failed batches, want 0", n)
	}
}

// A failed publish takes the rows back and says which; a row a worker already claimed stays.
func TestDiscardTakesQueuedRowsBack(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	a, b := queued(t, s), queued(t, s)
	if _, err := s.ClaimDelivery(ctx, b, 60e9); err != nil {
		t.Fatal(err)
	}
	taken, err := s.DiscardNotifications(ctx, []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if !taken[a] || taken[b] || len(taken) != 1 {
		t.Errorf("taken back %v, want only the queued %s", taken, a)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1`, a); n != 0 {
		t.Error("the queued row was not taken back")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1`, b); n != 1 {
		t.Error("a row a worker had claimed was deleted")
	}
}

// A system message whose publish failed goes to the relay, and the relay's query finds it.
func TestUnpublishedMessagesReachTheRelay(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	n := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, TenantID: "acme", ChatID: 1, Priority: 9, Body: "reply"}
	if err := s.InsertSystemMessage(ctx, n); err != nil {
		t.Fatal(err)
	}
	relayed := func() []string {
		var got []string
		if _, err := s.RepublishUnpublished(ctx, 10, func(_ context.Context, batch []store.Pending) []string {
			for _, p := range batch {
				got = append(got, p.TrackingID)
			}
			return got
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := relayed(); len(got) != 0 {
		t.Fatalf("the relay took %v before any publish failed", got)
	}
	if err := s.MarkUnpublished(ctx, []string{n.TrackingID}); err != nil {
		t.Fatal(err)
	}
	if got := relayed(); len(got) != 1 || got[0] != n.TrackingID {
		t.Fatalf("relay took %v, want the unpublished message", got)
	}
	if got := relayed(); len(got) != 0 {
		t.Fatalf("the relay took %v again after publishing it", got)
	}
}
