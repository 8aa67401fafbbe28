package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// herald usage prints what each tenant sent, counted as GET /v1/usage counts it: every tenant as CSV, one
// tenant as JSON; a bad window is a usage error and an unknown tenant an error.
func TestUsageCommand(t *testing.T) {
	st, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	ctx := context.Background()
	fx := fixture.New(st)
	sends := map[string]int{"acme": 3, "globex": 1}
	for tenant, n := range sends {
		fx.Tenant(t, tenant)
		fx.VerifiedUser(t, tenant, "u1", 1)
		var ns []store.NewNotification
		for range n {
			ns = append(ns, store.NewNotification{TrackingID: newUUID(), Kind: notification.KindTenant, TenantID: tenant, UserID: "u1", Priority: 5, Body: "hi"})
		}
		if _, err := st.InsertTenantNotifications(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	// An old day of acme's, outside the default window of 30 days.
	fx.UsageHour(t, "acme", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), 9, 8)
	today := time.Now().UTC().Truncate(24 * time.Hour).Format(time.RFC3339)

	code, stdout, stderr := herald(t, "usage")
	want := "tenant_id,period_start,accepted,delivered,failed,blocked,expired,cancelled,unlinked,edited,paid_broadcast\n" +
		"acme," + today + ",3,0,0,0,0,0,0,0,0\n" +
		"globex," + today + ",1,0,0,0,0,0,0,0,0\n"
	if code != 0 || stdout != want {
		t.Fatalf("herald usage: %d\n%s%s\nwant\n%s", code, stdout, stderr, want)
	}

	code, stdout, stderr = herald(t, "usage", "--tenant", "acme", "--format", "json", "--granularity", "hour",
		"--from", "2026-01-05T00:00:00Z", "--to", "2026-01-06T00:00:00Z")
	var got struct {
		Data []map[string]any `json:"data"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || len(got.Data) != 1 {
		t.Fatalf("herald usage --tenant acme --format json: %d\n%s%s", code, stdout, stderr)
	}
	if p := got.Data[0]; p["tenant_id"] != "acme" || p["period_start"] != "2026-01-05T10:00:00Z" || p["accepted"] != 9.0 || p["delivered"] != 8.0 || p["edited"] != 0.0 {
		t.Errorf("the hour of acme's: %v", p)
	}

	if code, _, stderr := herald(t, "usage", "--from", "2026-02-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z"); code != 2 || !strings.Contains(stderr, "from must be before to") {
		t.Errorf("a window backwards: %d %s, want a usage error", code, stderr)
	}
	if code, _, stderr := herald(t, "usage", "--tenant", "nope"); code != 1 || !strings.Contains(stderr, "no tenant nope") {
		t.Errorf("an unknown tenant: %d %s", code, stderr)
	}
}
