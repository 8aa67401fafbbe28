// Package quiet is the arithmetic of a tenant's quiet hours (spec v1-extensions §14): a daily window of
// wall-clock time, read in a time zone, during which notifications are held (mode hold) or delivered
// without a sound (mode silent). The window may wrap midnight (22:00-08:00); its times are wall-clock
// times of the zone, so daylight-saving changes follow the zone database (time.LoadLocation, embedded in
// the binary by cmd/herald's time/tzdata), never a fixed offset.
//
// The package decides nothing about notifications: the ingress asks it at acceptance and the worker at
// the claim (docs/delivery.md, "Quiet hours"), each with the zone it reads for the user.
package quiet

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Mode is what happens to a notification that would be delivered inside the window.
type Mode string

// The modes.
const (
	Hold   Mode = "hold"   // it waits in scheduled until the window ends
	Silent Mode = "silent" // it is delivered at once, without a sound (disable_notification)
)

// Valid reports whether m is a mode.
func (m Mode) Valid() bool { return m == Hold || m == Silent }

// MinutesPerDay bounds a Clock.
const MinutesPerDay = 24 * 60

// Clock is a wall-clock time of day, in minutes since midnight (0..1439).
type Clock int

var clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)

// ClockPattern is the rule of a Clock as text (HH:MM, 24 hours), for the CRD's validation and the docs.
const ClockPattern = `^([01][0-9]|2[0-3]):[0-5][0-9]$`

// ParseClock reads "HH:MM" (00:00..23:59).
func ParseClock(s string) (Clock, error) {
	m := clockPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a time of day HH:MM (00:00-23:59)", s)
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	return Clock(h*60 + mi), nil
}

// String is the clock as HH:MM.
func (c Clock) String() string { return fmt.Sprintf("%02d:%02d", int(c)/60, int(c)%60) }

// Hours are a tenant's quiet hours: the window [Start, End) of each day, read in Zone (or in the user's
// own zone, when set: Location), and the Mode.
type Hours struct {
	Start, End Clock
	Zone       string // an IANA zone name
	Mode       Mode
}

// Parse reads the flags' form: window "22:00-08:00", an IANA zone and a mode.
func Parse(window, zone, mode string) (Hours, error) {
	start, end, ok := strings.Cut(window, "-")
	if !ok {
		return Hours{}, fmt.Errorf("quiet hours %q must be START-END, like 22:00-08:00", window)
	}
	s, err := ParseClock(start)
	if err != nil {
		return Hours{}, fmt.Errorf("quiet hours start: %w", err)
	}
	e, err := ParseClock(end)
	if err != nil {
		return Hours{}, fmt.Errorf("quiet hours end: %w", err)
	}
	h := Hours{Start: s, End: e, Zone: zone, Mode: Mode(mode)}
	return h, h.Validate()
}

// Validate checks the rules the CRD's CEL and the admin CLI hold too: a window of at least a minute (start
// and end differ), a zone of the zone database, a mode.
func (h Hours) Validate() error {
	if h.Start < 0 || h.Start >= MinutesPerDay || h.End < 0 || h.End >= MinutesPerDay {
		return errors.New("quiet hours: start and end must be times of day 00:00-23:59")
	}
	if h.Start == h.End {
		return errors.New("quiet hours: start and end must differ (an empty or a whole-day window is not a window)")
	}
	if _, err := LoadZone(h.Zone); err != nil {
		return fmt.Errorf("quiet hours: %w", err)
	}
	if !h.Mode.Valid() {
		return fmt.Errorf("quiet hours: mode %q must be hold or silent", h.Mode)
	}
	return nil
}

// Window is the window as "22:00-08:00".
func (h Hours) Window() string { return h.Start.String() + "-" + h.End.String() }

// LoadZone loads an IANA zone by name. "" and "Local" are refused: a zone that depends on the machine's
// settings would read the window differently on each replica.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("time zone %q must be an IANA zone name, like Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: must be an IANA zone name, like Europe/Berlin", name)
	}
	return loc, nil
}

// Location is the zone the window is read in for a user: the user's own time_zone (§12) when set and
// known, else the tenant's Zone (validated when stored; UTC should it ever not load).
func (h Hours) Location(userZone string) *time.Location {
	if userZone != "" {
		if loc, err := LoadZone(userZone); err == nil {
			return loc
		}
	}
	if loc, err := LoadZone(h.Zone); err == nil {
		return loc
	}
	return time.UTC
}

// Until reports whether t falls inside the window, read in loc, and if so when the window ends: the first
// instant after t at which loc's wall clock reads End. A day whose End does not exist (skipped by a
// daylight-saving change) ends the window when the clock jumps past it; a day whose End occurs twice ends
// it at the first.
func (h Hours) Until(t time.Time, loc *time.Location) (time.Time, bool) {
	local := t.In(loc)
	m := Clock(local.Hour()*60 + local.Minute())
	var inside, endsToday bool
	if h.Start < h.End {
		inside, endsToday = m >= h.Start && m < h.End, true
	} else { // wraps midnight: [Start, 24:00) ∪ [00:00, End)
		inside, endsToday = m >= h.Start || m < h.End, m < h.End
	}
	if !inside {
		return time.Time{}, false
	}
	y, mo, d := local.Date()
	if !endsToday {
		d++
	}
	return wallClock(y, mo, d, h.End, loc), true
}

// wallClock is the instant at which loc's clock reads c on the day (y, mo, d) (normalised by time.Date).
// When the clock never reads c that day (a gap of a daylight-saving change: time.Date then answers an
// instant on either side), it is the jump itself — the first instant whose wall clock is past c; when c
// occurs twice (a fall-back hour), the first.
func wallClock(y int, mo time.Month, d int, c Clock, loc *time.Location) time.Time {
	want := time.Date(y, mo, d, int(c)/60, int(c)%60, 0, 0, loc)
	if w := want.In(loc); w.Hour()*60+w.Minute() != int(c) {
		// In a gap: time.Date read c with the offset of one side, which lands on the other: after the jump
		// (its zone period starts there) or before it (its zone period ends there).
		start, end := want.ZoneBounds()
		if got := w.Hour()*60 + w.Minute(); got > int(c) && !start.IsZero() {
			return start
		} else if got < int(c) && !end.IsZero() {
			return end
		}
		return want
	}
	if start, _ := want.ZoneBounds(); !start.IsZero() && want.Sub(start) < 3*time.Hour {
		// Just after a change: the clock may have read c before it too (a fall-back hour).
		for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
			if earlier := want.Add(-back); earlier.Before(start) && sameWallClock(earlier.In(loc), want.In(loc)) {
				return earlier
			}
		}
	}
	return want
}

func sameWallClock(a, b time.Time) bool {
	return a.Year() == b.Year() && a.YearDay() == b.YearDay() && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}
