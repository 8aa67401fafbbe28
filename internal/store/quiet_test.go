package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/quiet"
	"github.com/heraldhq/herald/internal/store"
	tfixture "github.com/heraldhq/herald/internal/testing/fixture"
)

var berlinNights = quiet.Hours{Start: 22 * 60, End: 8 * 60, Zone: "Europe/Berlin", Mode: quiet.Hold}

// A tenant's quiet hours are written only when they change, read back with the tenant and with its keys
// (the ingress's Principal), and cleared; an unknown tenant is ErrNotFound.
func TestTenantQuietHoursAreStoredAndCleared(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	key := tfixture.New(s).APIKey(t, "acme")
	if changed, err := s.SetTenantQuietHours(ctx, "acme", &berlinNights); err != nil || !changed {
		t.Fatalf("set: %v %v", changed, err)
	}
	if changed, err := s.SetTenantQuietHours(ctx, "acme", &berlinNights); err != nil || changed {
		t.Fatalf("the same hours again must change nothing: %v %v", changed, err)
	}
	tn, err := s.GetTenant(ctx, "acme")
	if err != nil || tn.Quiet == nil || *tn.Quiet != berlinNights {
		t.Fatalf("tenant: %+v %v", tn.Quiet, err)
	}
	p, err := s.Authenticate(ctx, apikey.Digest(key))
	if err != nil || p.Quiet == nil || *p.Quiet != berlinNights {
		t.Fatalf("principal: %+v %v", p.Quiet, err)
	}
	if changed, err := s.SetTenantQuietHours(ctx, "acme", nil); err != nil || !changed {
		t.Fatalf("clear: %v %v", changed, err)
	}
	if tn, _ := s.GetTenant(ctx, "acme"); tn.Quiet != nil {
		t.Fatalf("cleared hours read back as %+v", tn.Quiet)
	}
	if _, err := s.SetTenantQuietHours(ctx, "nobody", &berlinNights); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown tenant: %v", err)
	}
	// The database refuses half a window, whoever writes it.
	if _, err := s.Pool().Exec(ctx, `UPDATE tenants SET quiet_start = 60 WHERE id = 'acme'`); err == nil {
		t.Fatal("a start without an end, a zone and a mode was stored")
	}
}

// The claim carries the tenant's hours and the user's zone for a notification that respects them, and
// none for one whose send ignores them; a hold puts the claimed row back to scheduled under the attempt's
// number, with send_at at the window's end and the attempt not counted.
func TestTheClaimCarriesQuietHoursAndAHoldReschedules(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if _, err := s.SetTenantQuietHours(ctx, "acme", &berlinNights); err != nil {
		t.Fatal(err)
	}
	tz := "America/New_York"
	if _, _, err := s.SetUserSettings(ctx, "acme", "ok", store.UserSettings{SetTimeZone: true, TimeZone: &tz}); err != nil {
		t.Fatal(err)
	}
	respects := queued(t, s)
	ignoring := tenantNotification("ok")
	ignoring.QuietIgnore = true
	if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{ignoring}); err != nil || len(got) != 1 {
		t.Fatalf("insert: %v %v", got, err)
	}
	zones, err := s.UserTimeZones(ctx, "acme", []string{"ok", "no", "nobody"})
	if err != nil || len(zones) != 1 || zones["ok"] != tz {
		t.Fatalf("UserTimeZones = %v, %v", zones, err)
	}

	d, err := s.ClaimDelivery(ctx, respects, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d.Quiet == nil || *d.Quiet != berlinNights || d.UserZone != tz {
		t.Fatalf("claimed quiet %+v, zone %q; want the tenant's hours and the user's zone", d.Quiet, d.UserZone)
	}
	i, err := s.ClaimDelivery(ctx, ignoring.TrackingID, time.Minute)
	if err != nil || i.Quiet != nil {
		t.Fatalf("a send that ignores quiet hours claimed with %+v (%v)", i.Quiet, err)
	}

	until := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	stale := d
	stale.Attempts++
	if ok, err := s.HoldDelivery(ctx, stale, until); err != nil || ok {
		t.Fatalf("a hold under another attempt's number must write nothing: %v %v", ok, err)
	}
	if ok, err := s.HoldDelivery(ctx, d, until); err != nil || !ok {
		t.Fatalf("hold: %v %v", ok, err)
	}
	v, err := s.GetNotification(ctx, "acme", respects)
	if err != nil || v.Status != notification.Scheduled || v.SendAt == nil || !v.SendAt.Equal(until) || v.Attempts != 0 {
		t.Fatalf("held: %s send_at %v attempts %d (%v); want scheduled until %v, no attempt", v.Status, v.SendAt, v.Attempts, err, until)
	}
	if _, err := s.ClaimDelivery(ctx, respects, time.Minute); !errors.Is(err, store.ErrNotClaimable) {
		t.Fatalf("a held notification was claimable: %v", err)
	}
	// Held, it is cancellable like any scheduled one.
	if v, err := s.CancelNotification(ctx, "acme", respects); err != nil || v.Status != notification.Cancelled {
		t.Fatalf("cancel while held: %v %v", v.Status, err)
	}
}
