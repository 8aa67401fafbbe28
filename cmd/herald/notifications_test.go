package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// herald notifications list pages through a tenant's notifications as GET /v1/notifications does, and
// herald notifications cancel cancels one as the API's cancel does.
func TestNotificationsListAndCancel(t *testing.T) {
	st, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	ctx := context.Background()
	fx := fixture.New(st)
	for _, tenant := range []string{"acme", "globex"} {
		fx.Tenant(t, tenant)
		fx.VerifiedUser(t, tenant, "u1", 1)
	}
	var ns []store.NewNotification
	for range 5 {
		ns = append(ns, store.NewNotification{TrackingID: newUUID(), Kind: notification.KindTenant, TenantID: "acme", UserID: "u1", Priority: 5, Body: "secret body"})
	}
	// The newest: formatted (§10) and of a category (§9); the list shows both, never the body.
	ns[4].Rich, ns[4].Category = notification.Rich{Format: notification.FormatHTML}, "promo"
	ns = append(ns, store.NewNotification{TrackingID: newUUID(), Kind: notification.KindTenant, TenantID: "globex", UserID: "u1", Priority: 5, Body: "theirs"})
	if _, err := st.InsertTenantNotifications(ctx, ns); err != nil {
		t.Fatal(err)
	}

	// The one before it was delivered by editing its replace_key's message (§13): the list says so.
	fx.SetNotification(t, ns[3].TrackingID, fixture.InState(notification.Delivered), fixture.DeliveredAt(time.Now()), fixture.MessageID("7"),
		fixture.DeliveredAs("edited"), fixture.ReplaceKey("order-1"))

	code, stdout, stderr := herald(t, "notifications", "list", "--tenant", "acme", "--limit", "3")
	if code != 0 || strings.Count(stdout, "\n") != 4 || strings.Contains(stdout, "secret") || strings.Contains(stdout, ns[5].TrackingID) {
		t.Fatalf("list: %d\n%s%s", code, stdout, stderr)
	}
	if !regexp.MustCompile(`(?m)^TRACKING ID +USER +STATUS +PRIORITY +FORMAT +CATEGORY +DELIVERED AS +ATTEMPTS`).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^`+ns[4].TrackingID+` +u1 +queued +5 +html +promo +- +0 `).MatchString(stdout) ||
		!regexp.MustCompile(`(?m)^`+ns[3].TrackingID+` +u1 +delivered +5 +text +- +edited +0 `).MatchString(stdout) {
		t.Errorf("list: the format, category and delivered-as columns:\n%s", stdout)
	}
	m := regexp.MustCompile(`--cursor (\S+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no cursor for the next page on stderr: %q", stderr)
	}
	code, stdout, stderr = herald(t, "notifications", "list", "--tenant", "acme", "--limit", "3", "--cursor", m[1])
	if code != 0 || strings.Count(stdout, "\n") != 3 || stderr != "" {
		t.Fatalf("second page: %d\n%s%s", code, stdout, stderr)
	}

	if code, _, stderr := herald(t, "notifications", "cancel", "--tenant", "acme", "--id", ns[0].TrackingID); code != 0 || !strings.Contains(stderr, "cancelled") {
		t.Fatalf("cancel: %d %s", code, stderr)
	}
	if code, _, stderr := herald(t, "notifications", "cancel", "--tenant", "acme", "--id", ns[0].TrackingID); code != 1 || !strings.Contains(stderr, "is cancelled") {
		t.Errorf("a second cancel: %d %s, want refused naming the state", code, stderr)
	}
	if code, _, stderr := herald(t, "notifications", "cancel", "--tenant", "acme", "--id", ns[5].TrackingID); code != 1 || !strings.Contains(stderr, "no notification") {
		t.Errorf("another tenant's notification: %d %s", code, stderr)
	}
	if code, stdout, _ := herald(t, "notifications", "list", "--tenant", "acme", "--status", "cancelled"); code != 0 || !strings.Contains(stdout, ns[0].TrackingID) || strings.Count(stdout, "\n") != 2 {
		t.Errorf("--status cancelled: %d\n%s", code, stdout)
	}

	for _, args := range [][]string{
		{"--tenant", "acme", "--status", "sent"},
		{"--tenant", "acme", "--limit", "0"},
		{"--tenant", "acme", "--created-after", "yesterday"},
		{"--tenant", "acme", "--cursor", "garbage"},
		{"--tenant", "acme", "--user-id", "u2", "--cursor", m[1]},
	} {
		if code, _, stderr := herald(t, append([]string{"notifications", "list"}, args...)...); code != 2 {
			t.Errorf("list %v: %d %s, want a usage error", args, code, stderr)
		}
	}
	if code, _, stderr := herald(t, "notifications", "list", "--tenant", "nobody"); code != 1 || !strings.Contains(stderr, "no tenant nobody") {
		t.Errorf("an unknown tenant: %d %s", code, stderr)
	}
	if code, _, _ := herald(t, "notifications", "cancel", "--tenant", "acme", "--id", "nope"); code != 2 {
		t.Errorf("a malformed id must be a usage error")
	}
}

func newUUID() string { return uuid.Must(uuid.NewV7()).String() }
