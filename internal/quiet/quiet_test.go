package quiet_test

import (
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/quiet"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("zone %s: %v", name, err)
	}
	return loc
}

func TestUntil(t *testing.T) {
	night := quiet.Hours{Start: 22 * 60, End: 8 * 60, Zone: "Europe/Berlin", Mode: quiet.Hold}
	day := quiet.Hours{Start: 12 * 60, End: 14 * 60, Zone: "UTC", Mode: quiet.Hold}
	gapEnd := quiet.Hours{Start: 60, End: 2*60 + 30, Zone: "Europe/Berlin", Mode: quiet.Hold}
	utc := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	cases := []struct {
		name   string
		h      quiet.Hours
		zone   string
		at     string
		inside bool
		until  string // UTC
	}{
		{"before a wrapping window", night, "Europe/Berlin", "2026-06-10T19:59:00Z", false, ""}, // 21:59 CEST
		{"at its start", night, "Europe/Berlin", "2026-06-10T20:00:00Z", true, "2026-06-11T06:00:00Z"},
		{"before midnight, ends the next day", night, "Europe/Berlin", "2026-06-10T21:30:00Z", true, "2026-06-11T06:00:00Z"},
		{"after midnight, ends the same day", night, "Europe/Berlin", "2026-06-11T01:00:00Z", true, "2026-06-11T06:00:00Z"},
		{"the last minute", night, "Europe/Berlin", "2026-06-11T05:59:59Z", true, "2026-06-11T06:00:00Z"},
		{"at its end: outside", night, "Europe/Berlin", "2026-06-11T06:00:00Z", false, ""},
		{"a window within a day", day, "UTC", "2026-06-11T13:00:00Z", true, "2026-06-11T14:00:00Z"},
		{"after it", day, "UTC", "2026-06-11T14:00:00Z", false, ""},
		{"before it", day, "UTC", "2026-06-11T11:59:00Z", false, ""},
		// The user's zone, not the tenant's: 22:30 in New York is 04:30 in Berlin.
		{"read in another zone", night, "America/New_York", "2026-06-11T02:30:00Z", true, "2026-06-11T12:00:00Z"},
		{"outside in the user's zone though inside in the tenant's", night, "America/New_York", "2026-06-11T00:00:00Z", false, ""},
		// Spring forward in Berlin: 2026-03-29 02:00 CET → 03:00 CEST. The night is an hour shorter.
		{"spring forward: the night is 9 h of clock, 8 h of time", night, "Europe/Berlin", "2026-03-28T21:00:00Z", true, "2026-03-29T06:00:00Z"},
		// Fall back: 2026-10-25 03:00 CEST → 02:00 CET. The night is an hour longer.
		{"fall back: 11 h of time", night, "Europe/Berlin", "2026-10-24T20:00:00Z", true, "2026-10-25T07:00:00Z"},
		// An end the clock skips (02:30 on the spring-forward day) ends when the clock jumps.
		{"an end in the spring gap", gapEnd, "Europe/Berlin", "2026-03-29T00:15:00Z", true, "2026-03-29T01:00:00Z"},
		// An end the clock reads twice ends at the first.
		{"an end in the repeated hour", gapEnd, "Europe/Berlin", "2026-10-24T23:30:00Z", true, "2026-10-25T00:30:00Z"},
		// New York's gap: 2026-03-08 02:00 EST → 03:00 EDT; time.Date lands before it there.
		{"an end in a western gap", quiet.Hours{Start: 60, End: 2*60 + 30, Mode: quiet.Hold}, "America/New_York", "2026-03-08T06:30:00Z", true, "2026-03-08T07:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			until, inside := c.h.Until(utc(c.at), mustZone(t, c.zone))
			if inside != c.inside {
				t.Fatalf("inside = %v, want %v", inside, c.inside)
			}
			if !c.inside {
				return
			}
			if want := utc(c.until); !until.Equal(want) {
				t.Fatalf("until = %s, want %s", until.UTC().Format(time.RFC3339), c.until)
			}
			if !until.After(utc(c.at)) {
				t.Fatalf("the window must end after %s (got %s)", c.at, until)
			}
			if _, still := c.h.Until(until, mustZone(t, c.zone)); still {
				t.Fatalf("at its end (%s) the window still holds", until)
			}
		})
	}
}

func TestParseAndValidate(t *testing.T) {
	h, err := quiet.Parse("22:00-08:00", "Europe/Berlin", "hold")
	if err != nil || h.Start != 22*60 || h.End != 8*60 || h.Window() != "22:00-08:00" || h.Mode != quiet.Hold {
		t.Fatalf("Parse = %+v, %v", h, err)
	}
	for _, bad := range []struct{ window, zone, mode string }{
		{"22:00", "UTC", "hold"},
		{"24:00-08:00", "UTC", "hold"},
		{"22:00-8:00", "UTC", "hold"},
		{"22:00-22:00", "UTC", "hold"},
		{"22:00-08:00", "Mars/Olympus", "hold"},
		{"22:00-08:00", "", "hold"},
		{"22:00-08:00", "Local", "hold"},
		{"22:00-08:00", "UTC", "loud"},
	} {
		if _, err := quiet.Parse(bad.window, bad.zone, bad.mode); err == nil {
			t.Errorf("Parse(%q, %q, %q) accepted", bad.window, bad.zone, bad.mode)
		}
	}
}

func TestLocationPrefersTheUsersZone(t *testing.T) {
	h := quiet.Hours{Start: 0, End: 60, Zone: "Europe/Berlin", Mode: quiet.Hold}
	if got := h.Location("Asia/Tokyo").String(); got != "Asia/Tokyo" {
		t.Fatalf("with a user zone: %s", got)
	}
	if got := h.Location("").String(); got != "Europe/Berlin" {
		t.Fatalf("without: %s", got)
	}
	if got := h.Location("Nowhere/Else").String(); got != "Europe/Berlin" {
		t.Fatalf("with an unknown one: %s", got)
	}
}
