package template

import (
	"testing"
	"time"
)

// TestStrftimeEveryDirective pins what each strftime directive writes, and what is written as it stands
// (an unknown directive, a lone % at the end).
func TestStrftimeEveryDirective(t *testing.T) {
	at := time.Date(2026, time.March, 5, 14, 7, 9, 0, time.FixedZone("CET", 3600))
	for format, want := range map[string]string{
		"%Y":                    "2026",
		"%y":                    "26",
		"%m":                    "03",
		"%d":                    "05",
		"%e":                    "5",
		"%H":                    "14",
		"%I":                    "02",
		"%M":                    "07",
		"%S":                    "09",
		"%p":                    "PM",
		"%b":                    "Mar",
		"%B":                    "March",
		"%a":                    "Thu",
		"%A":                    "Thursday",
		"%j":                    "64",
		"%Z":                    "CET",
		"%z":                    "+0100",
		"%%":                    "%",
		"%q":                    "%q",
		"100%":                  "100%",
		"":                      "",
		"on %A %e %B at %H:%M%": "on Thursday 5 March at 14:07%",
	} {
		if got := strftime(at, format); got != want {
			t.Errorf("strftime(%q) = %q, want %q", format, got, want)
		}
	}
}
