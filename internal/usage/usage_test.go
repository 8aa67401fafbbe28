package usage

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
)

// Every terminal state of the lifecycle counts in a column of its own: a terminal state added to the table
// of transitions fails here until it is mapped.
func TestEveryTerminalStateHasAColumn(t *testing.T) {
	seen := map[Column]notification.Status{}
	for _, s := range notification.Terminals() {
		c, ok := Of(s)
		if !ok {
			t.Errorf("terminal state %s counts in no column", s)
			continue
		}
		if other, dup := seen[c]; dup {
			t.Errorf("%s and %s both count in %s", s, other, c)
		}
		seen[c] = s
		if !slices.Contains(Columns, c) {
			t.Errorf("%s counts in %s, which is not a column", s, c)
		}
	}
	if _, ok := Of(notification.Retrying); ok {
		t.Error("retrying counts in a column; only terminal states do")
	}
}

// Counts are the columns, in their order, under their names: the JSON, the scan and the CSV agree.
func TestCountsAreTheColumnsInOrder(t *testing.T) {
	var c Counts
	for i, f := range c.Fields() {
		*f = int64(i + 1)
	}
	b, _ := json.Marshal(c)
	var m map[string]int64
	_ = json.Unmarshal(b, &m)
	if len(m) != len(Columns) {
		t.Fatalf("Counts has %d fields, want %d: %s", len(m), len(Columns), b)
	}
	for i, col := range Columns {
		if m[string(col)] != int64(i+1) {
			t.Errorf("%s is field %d of Fields, want %d: %s", col, m[string(col)], i+1, b)
		}
	}
}

func TestParseWindow(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 30, 0, 0, time.UTC)
	w, err := ParseWindow("", "", "", now)
	if err != nil || !w.To.Equal(now) || !w.From.Equal(now.Add(-30*24*time.Hour)) || w.Granularity != Day {
		t.Errorf("defaults: %+v %v, want the last 30 days by day", w, err)
	}
	w, err = ParseWindow("2026-01-01T00:00:00+02:00", "2026-02-01T00:00:00Z", "hour", now)
	if err != nil || !w.From.Equal(time.Date(2025, 12, 31, 22, 0, 0, 0, time.UTC)) || w.Granularity != Hour {
		t.Errorf("given: %+v %v", w, err)
	}
	if _, err := ParseWindow("2025-01-01T00:00:00Z", "2026-02-05T00:00:00Z", "", now); err != nil {
		t.Errorf("400 days apart: %v, want accepted", err)
	}
	for _, c := range [][3]string{
		{"yesterday", "", ""},
		{"", "2026-13-01T00:00:00Z", ""},
		{"", "", "week"},
		{"2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z", ""},
		{"2026-03-01T00:00:00Z", "2026-02-01T00:00:00Z", ""},
		{"2025-01-01T00:00:00Z", "2026-02-05T00:00:01Z", ""},
	} {
		if _, err := ParseWindow(c[0], c[1], c[2], now); !errors.Is(err, ErrWindow) {
			t.Errorf("ParseWindow(%q): %v, want ErrWindow", c, err)
		}
	}
}

// The last day is the hour now is in and the 23 whole hours before it, in UTC.
func TestLastDaySince(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 59, 59, 0, time.FixedZone("CET", 3600))
	if got, want := LastDaySince(now), time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("LastDaySince(%s) = %s, want %s", now, got, want)
	}
}
