package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// IsDataError tells a statement PostgreSQL refused for what its rows hold (which the outbox then runs
// apart, request by request) from one that failed for any other reason (which it must not multiply).
func TestIsDataErrorTellsTheRowsFromTheDatabase(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	// A verified user: the gate lets the row through, so its jsonb is cast.
	exec(t, s, `INSERT INTO users (tenant_id, user_id) VALUES ('acme', 'u')`)
	exec(t, s, `INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id) VALUES ('acme', 'u', 1, 1)`)
	exec(t, s, `INSERT INTO phone_verifications (tenant_id, user_id, status) VALUES ('acme', 'u', 'verified')`)
	n := func(tenant, user, body string, metadata map[string]string) []store.NewNotification {
		return []store.NewNotification{{TrackingID: "01900000-0000-7000-8000-000000000001", Kind: notification.KindTenant,
			TenantID: tenant, UserID: user, Priority: 5, Body: body, Metadata: metadata}}
	}
	for name, err := range map[string]error{
		"a NUL in text": func() error { _, err := s.InsertTenantNotifications(ctx, n("acme", "u", "a\x00b", nil)); return err }(),
		"a NUL in jsonb": func() error {
			_, err := s.InsertTenantNotifications(ctx, n("acme", "u", "hi", map[string]string{"k": "\x00"}))
			return err
		}(),
		"a conflict": s.CreateTenant(ctx, "acme", "Acme again"),
	} {
		if err == nil || !store.IsDataError(err) || store.IsUnavailable(err) {
			t.Errorf("%s: %v: IsDataError %v, IsUnavailable %v; want a data error", name, err, store.IsDataError(err), store.IsUnavailable(err))
		}
	}
	expired, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-expired.Done()
	for name, err := range map[string]error{
		"a deadline":     func() error { _, err := s.InsertTenantNotifications(expired, n("acme", "u", "hi", nil)); return err }(),
		"a syntax error": func() error { _, err := s.Pool().Exec(ctx, `SELEC 1`); return err }(),
		"none":           nil,
	} {
		if store.IsDataError(err) {
			t.Errorf("%s: %v is not about the data", name, err)
		}
	}
}
