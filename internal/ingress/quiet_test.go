package ingress_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/quiet"
)

// aroundNow is a window of quiet hours in UTC from an hour before this minute to an hour after it (it wraps
// midnight when the test runs near it), and the instant it ends.
func aroundNow(mode quiet.Mode) (quiet.Hours, time.Time) {
	now := time.Now().UTC().Truncate(time.Minute)
	m := now.Hour()*60 + now.Minute()
	h := quiet.Hours{Start: quiet.Clock((m - 60 + quiet.MinutesPerDay) % quiet.MinutesPerDay),
		End: quiet.Clock((m + 60) % quiet.MinutesPerDay), Zone: "UTC", Mode: mode}
	return h, now.Add(time.Hour)
}

// §14: the send option quiet_hours takes "respect" or "ignore" (null: the priority's default); anything
// else is 400 invalid_request.
func TestTheQuietHoursOptionIsValidated(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for _, v := range []any{"respect", "ignore", nil} {
		if r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "quiet_hours": v}); r.status != http.StatusAccepted {
			t.Errorf("quiet_hours %v: %d %s", v, r.status, r.body)
		}
	}
	for _, v := range []any{"never", "Respect", "", true, 1, map[string]any{}} {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "quiet_hours": v})
		expectError(t, r, http.StatusBadRequest, "invalid_request")
	}
}

// §14 at acceptance: a send that would be delivered inside the tenant's quiet hours (hold) is answered
// scheduled, with send_at at the window's end, and is not on Kafka; the priority's default, the option,
// the user's own zone, a send_at into the window and one after it, and cancel while held.
func TestQuietHoursHoldAtAcceptance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hours, end := aroundNow(quiet.Hold)
	ctx := context.Background()
	if err := e.st.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetTenantQuietHours(ctx, "acme", &hours); err != nil {
		t.Fatal(err)
	}
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(t, "acme", "u1", 1001)
	e.fx.VerifiedUser(t, "acme", "far", 1002)
	// Twelve hours east of UTC the window is far away: the user's zone wins over the tenant's.
	if r := e.do("PATCH", "/v1/users/far", key, map[string]any{"time_zone": "Etc/GMT-12"}); r.status != http.StatusOK {
		t.Fatalf("PATCH user: %d %s", r.status, r.body)
	}
	endText := end.Format("2006-01-02T15:04:05.000Z")
	cases := []struct {
		name   string
		body   map[string]any
		status string
		sendAt any // the resource's send_at
	}{
		{"a plain send is held", map[string]any{}, "scheduled", endText},
		{"priority 7 ignores quiet hours by default", map[string]any{"priority": 7}, "queued", nil},
		{"priority 9 that respects them is held", map[string]any{"priority": 9, "quiet_hours": "respect"}, "scheduled", endText},
		{"priority 5 that ignores them is not", map[string]any{"quiet_hours": "ignore"}, "queued", nil},
		{"a user whose own zone is outside the window", map[string]any{"user_id": "far"}, "queued", nil},
		{"send_at inside the window moves to its end", map[string]any{"send_at": ts(30 * time.Minute)}, "scheduled", endText},
	}
	for _, c := range cases {
		body := map[string]any{"user_id": "u1", "message": "hi"}
		for k, v := range c.body {
			body[k] = v
		}
		r := e.do("POST", "/v1/send", key, body)
		if r.status != http.StatusAccepted || r.json(t)["status"] != c.status {
			t.Errorf("%s: %d %s, want 202 %s", c.name, r.status, r.body, c.status)
			continue
		}
		id := r.json(t)["tracking_id"].(string)
		m := e.do("GET", "/v1/status/"+id, key, nil).json(t)
		if m["send_at"] != c.sendAt {
			t.Errorf("%s: send_at %v, want %v", c.name, m["send_at"], c.sendAt)
		}
		if c.status == "scheduled" {
			// Held, it can be cancelled like any scheduled notification.
			if r := e.do("POST", "/v1/notifications/"+id+"/cancel", key, nil); r.status != http.StatusOK || r.json(t)["status"] != "cancelled" {
				t.Errorf("%s: cancel while held: %d %s", c.name, r.status, r.body)
			}
		}
	}
	// A send_at after the window is kept as given.
	after := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Millisecond)
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "send_at": after.Format(time.RFC3339Nano)})
	id := accepted(t, r)
	if m := e.do("GET", "/v1/status/"+id, key, nil).json(t); m["send_at"] != after.Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("a send_at after the window: %v, want %s", m["send_at"], after)
	}
	// A batch's items are decided one by one.
	b := e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []map[string]any{
		{"user_id": "u1", "message": "held"}, {"user_id": "u1", "message": "urgent", "priority": 8}}})
	if b.status != http.StatusOK {
		t.Fatalf("batch: %d %s", b.status, b.body)
	}
	results := b.json(t)["results"].([]any)
	if results[0].(map[string]any)["status"] != "scheduled" || results[1].(map[string]any)["status"] != "queued" {
		t.Errorf("batch results %v, want scheduled then queued", results)
	}
	// Only the sends that were not held are on Kafka: priority 7, "ignore", the far user's, the urgent item.
	if n := len(e.envelopes("it.notifications.high")) + len(e.envelopes("it.notifications.normal")); n != 4 {
		t.Errorf("%d envelopes on Kafka, want the 4 sends not held", n)
	}
}

// §14: silent mode holds nothing at acceptance (the worker sends without a sound), and a tenant without
// quiet hours sees no change.
func TestSilentQuietHoursAndNoneHoldNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hours, _ := aroundNow(quiet.Silent)
	ctx := context.Background()
	for _, tenant := range []string{"silent", "plain"} {
		if err := e.st.CreateTenant(ctx, tenant, tenant); err != nil {
			t.Fatal(err)
		}
		e.fx.VerifiedUser(t, tenant, "u1", 1001)
	}
	if _, err := e.st.SetTenantQuietHours(ctx, "silent", &hours); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"silent", "plain"} {
		key := e.tenant(tenant, tenant, nil)
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
		if r.status != http.StatusAccepted || r.json(t)["status"] != "queued" {
			t.Errorf("%s: %d %s, want 202 queued", tenant, r.status, r.body)
		}
	}
}
