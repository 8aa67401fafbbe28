package store_test

import (
	"context"
	"maps"
	"testing"

	"github.com/heraldhq/herald/internal/store"
)

// Every change of a users.time_zone bumps its tenant's user_zones_version in the same transaction — a
// PATCH that sets, changes or clears it, the erasure and the purge of a user that had one — and nothing
// else does: not a PATCH that gives the same zone or only the locale, not another tenant's change, not the
// erasure of a user without one. ZonedUsers reads the tenant's zoned users only, up to its limit.
func TestUserZonesVersionFollowsEveryChangeOfAZone(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	version := func(tenant string) int64 {
		t.Helper()
		v, err := s.UserZonesVersion(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	set := func(tenant, user string, settings store.UserSettings) int64 {
		t.Helper()
		_, v, err := s.SetUserSettings(ctx, tenant, user, settings)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	zone := func(z string) store.UserSettings { return store.UserSettings{SetTimeZone: true, TimeZone: &z} }
	de := "de"
	if v := version("acme"); v != 0 {
		t.Fatalf("a new tenant's version: %d", v)
	}
	steps := []struct {
		what   string
		do     func() int64 // the version the change reports (0: none)
		bumped bool
	}{
		{"set a zone", func() int64 { return set("acme", "ok", zone("Europe/Berlin")) }, true},
		{"the same zone again", func() int64 { return set("acme", "ok", zone("Europe/Berlin")) }, false},
		{"the locale only", func() int64 { return set("acme", "ok", store.UserSettings{SetLocale: true, Locale: &de}) }, false},
		{"another zone", func() int64 { return set("acme", "ok", zone("Asia/Tokyo")) }, true},
		{"a user not linked yet", func() int64 { return set("acme", "newcomer", zone("UTC")) }, true},
		{"another tenant's user (its own tenant's version moves)", func() int64 {
			if v := set("globex", "ok", zone("UTC")); v != 1 || version("globex") != 1 {
				t.Fatalf("globex's change reported %d, its version %d; want 1, 1", v, version("globex"))
			}
			return 0
		}, false},
		{"cleared", func() int64 { return set("acme", "newcomer", store.UserSettings{SetTimeZone: true}) }, true},
		{"cleared again", func() int64 { return set("acme", "newcomer", store.UserSettings{SetTimeZone: true}) }, false},
		{"the erasure of a user without one", func() int64 {
			e, err := s.EraseUser(ctx, "acme", "newcomer")
			if err != nil {
				t.Fatal(err)
			}
			return e.ZonesVersion
		}, false},
		{"the erasure of a user with one", func() int64 {
			e, err := s.EraseUser(ctx, "acme", "ok")
			if err != nil {
				t.Fatal(err)
			}
			return e.ZonesVersion
		}, true},
	}
	for _, step := range steps {
		before := version("acme")
		got := step.do()
		after := version("acme")
		switch {
		case step.bumped && (after != before+1 || got != after):
			t.Fatalf("%s: version %d → %d, reported %d; want one more, reported", step.what, before, after, got)
		case !step.bumped && (after != before || got != 0):
			t.Fatalf("%s: version %d → %d, reported %d; want unchanged, 0", step.what, before, after, got)
		}
	}

	// ZonedUsers: the tenant's users with a zone, up to the limit; the purge bumps too.
	for _, u := range []string{"a", "b", "c"} {
		set("acme", u, zone("Europe/Paris"))
	}
	set("acme", "d", store.UserSettings{SetLocale: true, Locale: &de})
	if got, err := s.ZonedUsers(ctx, "acme", 10); err != nil || !maps.Equal(got, map[string]string{"a": "Europe/Paris", "b": "Europe/Paris", "c": "Europe/Paris"}) {
		t.Fatalf("ZonedUsers: %v %v", got, err)
	}
	if got, err := s.ZonedUsers(ctx, "acme", 2); err != nil || len(got) != 2 {
		t.Fatalf("ZonedUsers limited to 2: %v %v", got, err)
	}
	if got, err := s.ZonedUsers(ctx, "globex", 10); err != nil || !maps.Equal(got, map[string]string{"ok": "UTC"}) {
		t.Fatalf("globex's: %v %v", got, err)
	}
	before := version("acme")
	if _, err := s.PurgeTenantUsers(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if after := version("acme"); after <= before {
		t.Fatalf("the purge left the version at %d", after)
	}
	if got, err := s.ZonedUsers(ctx, "acme", 10); err != nil || len(got) != 0 {
		t.Fatalf("after the purge: %v %v", got, err)
	}
	if _, err := s.UserZonesVersion(ctx, "nobody"); err == nil {
		t.Fatal("an unknown tenant's version: no error")
	}
}
