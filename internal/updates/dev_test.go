package updates_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

const (
	devAcme   = int64(7001) // developer of acme
	devGlobex = int64(7002) // developer of globex
	stranger  = int64(7999)
)

// ask sends text from a private chat and returns the one reply it produced.
func (e *env) ask(from int64, text string) reply {
	e.t.Helper()
	before := len(e.replies())
	expectOK(e.t, e.post(textUpdate(e.updateID(), from, text)))
	rs := e.replies()
	if len(rs) != before+1 {
		e.t.Fatalf("%q from %d produced %d replies, want 1", text, from, len(rs)-before)
	}
	r := rs[len(rs)-1]
	if r.ChatID != from || r.TenantID != nil {
		e.t.Fatalf("reply to %q: chat %d tenant %q; want chat %d and no tenant", text, r.ChatID, deref(r.TenantID), from)
	}
	return r
}

// devEnv has three tenants with notifications: acme (developer 7001), globex (developer 7002), initech.
func devEnv(t *testing.T) (e *env, acmeID, globexID, oldAcmeID string) {
	e = newEnv(t)
	sendsPerSecond := int32(20)
	e.fx.Tenant(t, "acme", fixture.DeveloperName("Acme Dev"), fixture.Developers(devAcme),
		fixture.Limits(store.TenantLimits{SendsPerSecond: &sendsPerSecond})) // acme has a limit of its own
	e.tenant("globex", "Globex Dev", devGlobex)
	e.tenant("initech", "Initech Dev")
	e.fx.User(t, "acme", "u1")
	e.fx.User(t, "globex", "g1")
	insert := func(tenant, user string, status notification.Status, age time.Duration, opts ...fixture.NotificationOption) string {
		return e.fx.Notification(t, append([]fixture.NotificationOption{fixture.For(tenant, user), fixture.InState(status),
			fixture.Body("A message from Acme\nSECRET BODY"), fixture.Attempts(1), fixture.MessageID("77"),
			fixture.CreatedAt(time.Now().Add(-age)), fixture.UpdatedAt(time.Now())}, opts...)...)
	}
	acmeID = insert("acme", "u1", notification.Delivered, time.Minute, fixture.Metadata(`{"order":"42"}`),
		fixture.SendAt(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)), fixture.ExpiresAt(time.Date(2099, 1, 2, 0, 0, 0, 0, time.UTC)),
		fixture.DeliveredAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	insert("acme", "u1", notification.Delivered, 2*time.Hour)
	insert("acme", "u1", notification.Failed, 3*time.Hour)
	oldAcmeID = insert("acme", "u1", notification.Failed, 25*time.Hour) // outside /dev_stats' window
	globexID = insert("globex", "g1", notification.Queued, time.Minute)
	// acme was refused lately (the ingress records refusals per minute).
	e.fx.Refusals(t, "acme", "sends", time.Now(), 7)
	e.fx.Refusals(t, "acme", "sends", time.Now().Add(-2*time.Hour), 100)
	return e, acmeID, globexID, oldAcmeID
}

func TestDevCommandsOfADeveloper(t *testing.T) {
	t.Parallel()
	e, acmeID, globexID, oldAcmeID := devEnv(t)

	if b := e.ask(devAcme, "/dev_help").Body; !strings.Contains(b, "/dev_whoami") || !strings.Contains(b, "/dev_status <tracking_id>") {
		t.Errorf("/dev_help = %q", b)
	}
	if b := e.ask(devAcme, "/dev_whoami@herald_test_bot").Body; b != "Your messenger user id: 7001\nDeveloper of:\n- acme (Acme Dev)" {
		t.Errorf("/dev_whoami = %q", b)
	}
	stats := e.ask(devAcme, "/dev_stats").Body
	if want := "Notifications created in the last 24 hours, by status:\nacme: delivered 2, failed 1\n" +
		"  limits: sends 20/s (burst default), requests default, delivery weight default; refused in the last hour: 7 sends"; stats != want {
		t.Errorf("/dev_stats = %q, want %q", stats, want)
	}

	status := e.ask(devAcme, "/dev_status "+acmeID).Body
	for _, field := range []string{"tracking_id: " + acmeID, "tenant: acme", "user_id: u1", "priority: 5", "status: delivered",
		"attempts: 1", "created_at: ", "updated_at: ", "messenger_message_id: 77", "last_error_code: 0", "last_error_message: null",
		`metadata: {"order":"42"}`, "send_at: 2099-01-01T00:00:00Z", "expires_at: 2099-01-02T00:00:00Z", "delivered_at: 2026-",
		"next_attempt_at: null"} {
		if !strings.Contains(status, field) {
			t.Errorf("/dev_status lacks %q:\n%s", field, status)
		}
	}
	if strings.Contains(status, "SECRET BODY") || strings.Contains(status, "A message from") {
		t.Errorf("/dev_status shows the body:\n%s", status)
	}
	if b := e.ask(devAcme, "/dev_status "+oldAcmeID).Body; !strings.Contains(b, "status: failed") {
		t.Errorf("/dev_status of an older notification = %q", b)
	}
	// Another tenant's notification is unknown to this developer.
	if b := e.ask(devAcme, "/dev_status "+globexID).Body; b != "No notification with that tracking id belongs to your tenants." {
		t.Errorf("/dev_status of another tenant's notification = %q", b)
	}
	// System messages (the replies themselves) are not tenant notifications.
	sys := e.replies()[0].TrackingID
	if b := e.ask(devAcme, "/dev_status "+sys).Body; b != "No notification with that tracking id belongs to your tenants." {
		t.Errorf("/dev_status of a system message = %q", b)
	}
	for _, bad := range []string{"/dev_status", "/dev_status not-a-uuid", "/dev_status " + acmeID + " extra"} {
		if b := e.ask(devAcme, bad).Body; b != "Usage: /dev_status <tracking_id>" {
			t.Errorf("%q = %q", bad, b)
		}
	}

	ping := e.ask(devAcme, "/dev_ping")
	if !strings.HasPrefix(ping.Body, "pong: update ") {
		t.Errorf("/dev_ping = %q", ping.Body)
	}

	// An unknown /dev_ command is an unknown command, for developers too.
	if b := e.ask(devAcme, "/dev_drop_tables").Body; b != textUnknown {
		t.Errorf("/dev_drop_tables = %q, want the unknown-command reply", b)
	}
}

func TestDevCommandsOfAPlatformAdmin(t *testing.T) {
	t.Parallel()
	e, _, globexID, _ := devEnv(t)
	if b := e.ask(adminID, "/dev_whoami").Body; b != fmt.Sprintf("Your messenger user id: %d\nPlatform admin: every tenant.\nDeveloper of: (none)", adminID) {
		t.Errorf("/dev_whoami = %q", b)
	}
	want := "Notifications created in the last 24 hours, by status:\nacme: delivered 2, failed 1\n" +
		"  limits: sends 20/s (burst default), requests default, delivery weight default; refused in the last hour: 7 sends\n" +
		"globex: queued 1\n  limits: sends default (burst default), requests default, delivery weight default; refused in the last hour: none\n" +
		"initech: none\n  limits: sends default (burst default), requests default, delivery weight default; refused in the last hour: none"
	if b := e.ask(adminID, "/dev_stats").Body; b != want {
		t.Errorf("/dev_stats = %q, want %q", b, want)
	}
	if b := e.ask(adminID, "/dev_status "+globexID).Body; !strings.Contains(b, "tenant: globex") {
		t.Errorf("/dev_status = %q", b)
	}
}

// Without permission every /dev_* command gets exactly the reply to an unknown command: nothing reveals
// that the commands exist.
func TestDevCommandsWithoutPermissionLookUnknown(t *testing.T) {
	t.Parallel()
	e, acmeID, _, _ := devEnv(t)
	unknown := e.ask(stranger, "/no_such_command").Body
	if unknown != textUnknown {
		t.Fatalf("unknown command reply = %q", unknown)
	}
	// A developer of no tenant (linked as an ordinary user of one) has no permission either.
	e.link("acme", "u1", stranger)
	for _, cmd := range []string{"/dev_help", "/dev_whoami", "/dev_stats", "/dev_status " + acmeID, "/dev_ping", "/dev_help@herald_test_bot"} {
		if b := e.ask(stranger, cmd).Body; b != unknown {
			t.Errorf("%s without permission = %q, want the unknown-command reply %q", cmd, b, unknown)
		}
	}
	// A developer of globex learns nothing about acme.
	if b := e.ask(devGlobex, "/dev_stats").Body; strings.Contains(b, "acme") {
		t.Errorf("/dev_stats of globex's developer mentions acme: %q", b)
	}
}
