package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// IsDataError tells a statement PostgreSQL refused for what its rows hold (which the outbox then runs
// apart, request by request) from one that failed for any other reason (which it must not multiply).
func TestIsDataErrorTellsTheRowsFromTheDatabase(t *testing.T) {
	s := fixture(t) // "ok" is verified: the gate lets its row through, so its jsonb is cast
	ctx := context.Background()
	n := func(tenant, user, body string, metadata map[string]string) []store.NewNotification {
		return []store.NewNotification{{TrackingID: "01900000-0000-7000-8000-000000000001", Kind: notification.KindTenant,
			TenantID: tenant, UserID: user, Priority: 5, Body: body, Metadata: metadata}}
	}
	for name, err := range map[string]error{
		"a NUL in text": func() error { _, err := s.InsertTenantNotifications(ctx, n("acme", "ok", "a\x00b", nil)); return err }(),
		"a NUL in jsonb": func() error {
			_, err := s.InsertTenantNotifications(ctx, n("acme", "ok", "hi", map[string]string{"k": "\x00"}))
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
		"a deadline":     func() error { _, err := s.InsertTenantNotifications(expired, n("acme", "ok", "hi", nil)); return err }(),
		"a syntax error": func() error { _, err := s.Pool().Exec(ctx, `SELEC 1`); return err }(),
		"none":           nil,
	} {
		if store.IsDataError(err) {
			t.Errorf("%s: %v is not about the data", name, err)
		}
	}
}
