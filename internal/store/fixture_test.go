package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// fixture creates tenant acme with users "ok" (linked to chat 1, verified) and "no" (linked to chat 2,
// unverified).
func fixture(t *testing.T) *store.Store {
	t.Helper()
	s, _ := pgtest.NewStore(t)
	if err := s.CreateTenant(context.Background(), "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "acme", "ok", 1)
	seed.New(s).User(t, "acme", "no", seed.LinkedTo(2), seed.Unverified())
	return s
}

// verifiedUser makes user a user of tenant linked to chat and verified (the fixture of every package's
// tests; this package's fixture function takes its name).
func verifiedUser(t *testing.T, s *store.Store, tenant, user string, chat int64) {
	t.Helper()
	seed.New(s).VerifiedUser(t, tenant, user, chat)
}

func exec(t *testing.T, s *store.Store, q string, args ...any) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func count(t *testing.T, s *store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func tenantNotification(user string) store.NewNotification {
	return store.NewNotification{TrackingID: newID(), Kind: notification.KindTenant, TenantID: "acme", UserID: user, Priority: 5, Body: "hello"}
}

// queued inserts a queued notification for user "ok" and returns its id.
func queued(t *testing.T, s *store.Store) string {
	t.Helper()
	n := tenantNotification("ok")
	got, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{n})
	if _, ok := got[n.TrackingID]; err != nil || !ok {
		t.Fatalf("insert: %v %v", got, err)
	}
	return n.TrackingID
}
