package main

import (
	"context"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/quiet"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// herald tenant update --quiet-hours sets a tenant's quiet hours (§14), --no-quiet-hours clears them, and
// tenant list shows them; a malformed window, an unknown zone, a wrong mode or a wrong combination of the
// flags is a usage error that changes nothing.
func TestAdminCLISetsQuietHours(t *testing.T) {
	st, url := pgtest.NewStore(t)
	t.Setenv("HERALD_DATABASE_URL", url)
	ctx := context.Background()
	if code, _, stderr := herald(t, "tenant", "create", "--id", "acme", "--developer-name", "Acme"); code != 0 {
		t.Fatalf("tenant create: %s", stderr)
	}
	code, _, stderr := herald(t, "tenant", "update", "--id", "acme", "--quiet-hours", "22:00-08:00", "--quiet-hours-zone", "Europe/Berlin")
	if code != 0 || !strings.Contains(stderr, "quiet hours 22:00-08:00 (Europe/Berlin), mode hold") {
		t.Fatalf("set: %d %s", code, stderr)
	}
	want := quiet.Hours{Start: 22 * 60, End: 8 * 60, Zone: "Europe/Berlin", Mode: quiet.Hold}
	if tn, err := st.GetTenant(ctx, "acme"); err != nil || tn.Quiet == nil || *tn.Quiet != want {
		t.Fatalf("stored %+v (%v), want %+v", tn.Quiet, err, want)
	}
	if _, list, _ := herald(t, "tenant", "list"); !strings.Contains(list, "QUIET HOURS") || !strings.Contains(list, "22:00-08:00 Europe/Berlin hold") {
		t.Errorf("tenant list:\n%s", list)
	}
	if code, _, stderr := herald(t, "tenant", "update", "--id", "acme", "--quiet-hours", "12:30-14:00", "--quiet-hours-zone", "Asia/Tokyo",
		"--quiet-hours-mode", "silent"); code != 0 {
		t.Fatalf("silent: %d %s", code, stderr)
	}
	if tn, _ := st.GetTenant(ctx, "acme"); tn.Quiet == nil || tn.Quiet.Mode != quiet.Silent || tn.Quiet.Zone != "Asia/Tokyo" || tn.Quiet.Start != 12*60+30 {
		t.Fatalf("after the second update: %+v", tn.Quiet)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--quiet-hours", "22:00-08:00"}, "needs --quiet-hours-zone"},
		{[]string{"--quiet-hours", "22-08", "--quiet-hours-zone", "UTC"}, "not a time of day"},
		{[]string{"--quiet-hours", "22:00-22:00", "--quiet-hours-zone", "UTC"}, "must differ"},
		{[]string{"--quiet-hours", "22:00-08:00", "--quiet-hours-zone", "Mars/Olympus"}, "unknown time zone"},
		{[]string{"--quiet-hours", "22:00-08:00", "--quiet-hours-zone", "UTC", "--quiet-hours-mode", "loud"}, "must be hold or silent"},
		{[]string{"--quiet-hours-zone", "UTC"}, "go with --quiet-hours"},
		{[]string{"--no-quiet-hours", "--quiet-hours", "22:00-08:00", "--quiet-hours-zone", "UTC"}, "give one of them"},
	} {
		code, stdout, stderr := herald(t, append([]string{"tenant", "update", "--id", "acme"}, tc.args...)...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.says) {
			t.Errorf("%s: exit %d, stderr %s; want 2 saying %q", strings.Join(tc.args, " "), code, stderr, tc.says)
		}
	}
	if tn, _ := st.GetTenant(ctx, "acme"); tn.Quiet == nil || tn.Quiet.Zone != "Asia/Tokyo" {
		t.Fatalf("a refused update changed the hours: %+v", tn.Quiet)
	}
	if code, _, stderr := herald(t, "tenant", "update", "--id", "acme", "--no-quiet-hours"); code != 0 || !strings.Contains(stderr, "has no quiet hours") {
		t.Fatalf("clear: %d %s", code, stderr)
	}
	if tn, _ := st.GetTenant(ctx, "acme"); tn.Quiet != nil {
		t.Fatalf("cleared hours read back as %+v", tn.Quiet)
	}
}
