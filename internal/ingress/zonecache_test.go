package ingress_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/store"
)

const dueTemplate = `{"default_locale": "en", "locales": {"en": {"message": "Due {{ at | date: \"%Y-%m-%d %H:%M %Z\" }}"}}}`

// The ends of "Due …" for 2026-07-01T20:30:00Z in each zone.
const (
	inUTC    = "Due 2026-07-01 20:30 UTC"
	inBerlin = "Due 2026-07-01 22:30 CEST"
	inTokyo  = "Due 2026-07-02 05:30 JST"
	inParis  = "Due 2026-07-01 22:30 CEST"
	inSaoPau = "Due 2026-07-01 17:30 -03"
)

// sendDue sends the due template to user and returns the stored message.
func (e *env) sendDue(key, user string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/send", key, `{"user_id": "`+user+`", "template": "due", "data": {"at": "2026-07-01T20:30:00Z"}}`)
	if r.status != 202 {
		e.t.Fatalf("send to %s: %d %s", user, r.status, r.body)
	}
	body, _, _, _, _ := e.stored(r.json(e.t)["tracking_id"].(string))
	return body
}

// previewDue is what the due template renders for user (linked or not, or erased).
func (e *env) previewDue(key, user string) string {
	e.t.Helper()
	r := e.do("POST", "/v1/templates/due/preview", key, `{"user_id": "`+user+`", "data": {"at": "2026-07-01T20:30:00Z"}}`)
	if r.status != 200 {
		e.t.Fatalf("preview for %s: %d %s", user, r.status, r.body)
	}
	return r.json(e.t)["message"].(string)
}

// storeZone changes a user's zone as another replica would: in PostgreSQL, without this API knowing.
func (e *env) storeZone(tenant, user, zone string) {
	e.t.Helper()
	set := store.UserSettings{SetTimeZone: true}
	if zone != "" {
		set.TimeZone = &zone
	}
	if _, _, err := e.st.SetUserSettings(context.Background(), tenant, user, set); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) patchZone(key, user, zone string) {
	e.t.Helper()
	body := `{"time_zone": null}`
	if zone != "" {
		body = `{"time_zone": "` + zone + `"}`
	}
	if r := e.do("PATCH", "/v1/users/"+user, key, body); r.status != 200 {
		e.t.Fatalf("patch %s: %d %s", user, r.status, r.body)
	}
}

// A date renders in the user's zone from the zone cache: a change through this API (PATCH, the erasure)
// at once, one through another replica (the store) after UserZonesTTL; a user without a zone, cleared or
// erased, renders in UTC as before; two tenants' users of the same id keep their own zones.
func TestTheZoneCacheFollowsChangesHereAtOnceAndElsewhereWithinItsTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	e := newEnvWith(t, func(o *ingress.Options) { o.UserZonesTTL = ttl })
	key := e.tenant("acme", "Acme", nil)
	globex := e.tenant("globex", "Globex", nil)
	e.fx.VerifiedUser(t, "acme", "u1", 1001)
	e.fx.VerifiedUser(t, "globex", "u1", 2001)
	e.putTemplate(key, "due", dueTemplate, http.StatusCreated)
	e.putTemplate(globex, "due", dueTemplate, http.StatusCreated)
	afterTTL := func() { time.Sleep(ttl + 50*time.Millisecond) }

	if got := e.sendDue(key, "u1"); !strings.HasSuffix(got, inUTC) {
		t.Fatalf("no zone: %q, want UTC", got)
	}
	e.patchZone(key, "u1", "Europe/Berlin")
	e.patchZone(globex, "u1", "America/Sao_Paulo")
	if got := e.sendDue(key, "u1"); !strings.HasSuffix(got, inBerlin) {
		t.Fatalf("right after PATCH: %q, want Berlin", got)
	}
	if got := e.sendDue(globex, "u1"); !strings.HasSuffix(got, inSaoPau) {
		t.Fatalf("globex's u1 right after its PATCH: %q, want São Paulo", got)
	}

	// Another replica's change: after the TTL. So is a user made and zoned there.
	e.storeZone("acme", "u1", "Asia/Tokyo")
	e.storeZone("acme", "newcomer", "Europe/Paris")
	afterTTL()
	if got := e.sendDue(key, "u1"); !strings.HasSuffix(got, inTokyo) {
		t.Fatalf("a TTL after another replica's change: %q, want Tokyo", got)
	}
	if got := e.previewDue(key, "newcomer"); got != inParis {
		t.Fatalf("a user zoned elsewhere: %q, want Paris", got)
	}
	if got := e.sendDue(globex, "u1"); !strings.HasSuffix(got, inSaoPau) {
		t.Fatalf("globex's u1 after acme's changes: %q, want São Paulo", got)
	}

	// Cleared here: at once; cleared elsewhere: after the TTL.
	e.patchZone(key, "u1", "")
	if got := e.sendDue(key, "u1"); !strings.HasSuffix(got, inUTC) {
		t.Fatalf("right after clearing: %q, want UTC", got)
	}
	e.storeZone("acme", "newcomer", "")
	afterTTL()
	if got := e.previewDue(key, "newcomer"); got != inUTC {
		t.Fatalf("cleared elsewhere: %q, want UTC", got)
	}

	// Erased here: at once; erased elsewhere: after the TTL.
	e.patchZone(key, "u1", "Asia/Tokyo")
	if got := e.previewDue(key, "u1"); got != inTokyo {
		t.Fatalf("zoned again: %q", got)
	}
	if r := e.do("DELETE", "/v1/users/u1", key, nil); r.status != 204 {
		t.Fatalf("erase: %d %s", r.status, r.body)
	}
	if got := e.previewDue(key, "u1"); got != inUTC {
		t.Fatalf("right after the erasure: %q, want UTC", got)
	}
	e.patchZone(key, "gone", "Europe/Berlin")
	if got := e.previewDue(key, "gone"); got != inBerlin {
		t.Fatalf("gone, before: %q", got)
	}
	if _, err := e.st.EraseUser(context.Background(), "acme", "gone"); err != nil {
		t.Fatal(err)
	}
	afterTTL()
	if got := e.previewDue(key, "gone"); got != inUTC {
		t.Fatalf("erased elsewhere: %q, want UTC", got)
	}
	if got := e.sendDue(globex, "u1"); !strings.HasSuffix(got, inSaoPau) {
		t.Fatalf("globex's u1 after acme's erasures: %q, want São Paulo", got)
	}
	if _, _, statements := ingress.ZoneReads(e.api); statements != 0 {
		t.Fatalf("%d per-request reads of users, want none: the zones come from the cache", statements)
	}
}

// Past the cap, a tenant's zones are not cached: its sends read their users' zones per request, and each
// still renders in its own user's; a tenant under the cap beside it keeps its cache.
func TestATenantPastTheZoneCapReadsZonesPerRequest(t *testing.T) {
	e := newEnvWith(t, func(o *ingress.Options) { o.MaxZonedUsers = 2 })
	key := e.tenant("acme", "Acme", nil)
	globex := e.tenant("globex", "Globex", nil)
	e.putTemplate(key, "due", dueTemplate, http.StatusCreated)
	e.putTemplate(globex, "due", dueTemplate, http.StatusCreated)
	want := map[string]string{"a": inBerlin, "b": inTokyo, "c": inSaoPau, "none": inUTC}
	e.patchZone(key, "a", "Europe/Berlin")
	e.patchZone(key, "b", "Asia/Tokyo")
	e.patchZone(key, "c", "America/Sao_Paulo")
	e.patchZone(key, "none", "")
	e.patchZone(globex, "a", "Asia/Tokyo")
	for user, w := range want {
		if got := e.previewDue(key, user); got != w {
			t.Errorf("acme's %s: %q, want %q", user, got, w)
		}
	}
	_, _, statements := ingress.ZoneReads(e.api)
	if statements < 1 {
		t.Fatalf("acme past the cap: %d per-request reads, want them", statements)
	}
	if got := e.previewDue(globex, "a"); got != inTokyo {
		t.Fatalf("globex's a: %q, want Tokyo", got)
	}
	if got := e.previewDue(globex, "b"); got != inUTC {
		t.Fatalf("globex's b (acme's has a zone): %q, want UTC", got)
	}
	if _, _, after := ingress.ZoneReads(e.api); after != statements {
		t.Fatalf("globex under the cap read per request: %d → %d statements", statements, after)
	}
}

// N concurrent templated sends of one tenant cost at most one read of its version per TTL, whichever send
// finds the entry old — the others wait for that read — and no reload while no zone changed; a PATCH
// through this replica costs none either, a change elsewhere one.
func TestConcurrentSendsShareOneVersionReadPerTTL(t *testing.T) {
	const ttl = time.Second
	e := newEnvWith(t, func(o *ingress.Options) { o.UserZonesTTL = ttl })
	key := e.tenant("acme", "Acme", nil)
	e.putTemplate(key, "due", dueTemplate, http.StatusCreated)
	const users = 24
	want := map[string]string{}
	for u := range users {
		id := fmt.Sprintf("u%d", u)
		e.fx.VerifiedUser(t, "acme", id, int64(1000+u))
		if u%3 == 0 {
			e.patchZone(key, id, "Asia/Tokyo")
			want[id] = inTokyo
		} else {
			want[id] = inUTC
		}
	}
	wave := func() (reads int, took time.Duration) {
		t.Helper()
		before, _, _ := ingress.ZoneReads(e.api)
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var wrong []string
		for u := range users {
			wg.Go(func() {
				id := fmt.Sprintf("u%d", u)
				r := e.do("POST", "/v1/send", key, `{"user_id": "`+id+`", "template": "due", "data": {"at": "2026-07-01T20:30:00Z"}}`)
				if r.status != 202 {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: %d %s", id, r.status, r.body))
					mu.Unlock()
					return
				}
				if body, _, _, _, _ := e.stored(r.json(t)["tracking_id"].(string)); !strings.HasSuffix(body, want[id]) {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: %q, want %q", id, body, want[id]))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		took = time.Since(start)
		if len(wrong) > 0 {
			t.Fatalf("sends wrong:\n%s", strings.Join(wrong, "\n"))
		}
		after, _, _ := ingress.ZoneReads(e.api)
		return after - before, took
	}
	// At most one read per TTL the wave lasted, begun or not.
	atMost := func(took time.Duration) int { return 1 + int(took/ttl) }

	reads, took := wave() // cold: the first read, and the load
	if _, reloads, _ := ingress.ZoneReads(e.api); reads > atMost(took) || reloads != 1 {
		t.Fatalf("cold wave of %d sends in %v: %d version reads, %d loads; want at most %d, 1", users, took, reads, reloads, atMost(took))
	}
	time.Sleep(ttl + 50*time.Millisecond)
	reads, took = wave() // the entry is old: one read for all, nothing changed
	if _, reloads, _ := ingress.ZoneReads(e.api); reads < 1 || reads > atMost(took) || reloads != 1 {
		t.Fatalf("wave after the TTL in %v: %d version reads, %d loads; want 1..%d, 1", took, reads, reloads, atMost(took))
	}

	// A PATCH here: the next sends have it, and the version it made costs no reload.
	e.patchZone(key, "u1", "Europe/Berlin")
	want["u1"] = inBerlin
	time.Sleep(ttl + 50*time.Millisecond)
	wave()
	if _, reloads, _ := ingress.ZoneReads(e.api); reloads != 1 {
		t.Fatalf("after this replica's PATCH: %d loads, want 1", reloads)
	}
	// A change elsewhere: one reload.
	e.storeZone("acme", "u2", "Europe/Berlin")
	want["u2"] = inBerlin
	time.Sleep(ttl + 50*time.Millisecond)
	wave()
	if _, reloads, statements := ingress.ZoneReads(e.api); reloads != 2 || statements != 0 {
		t.Fatalf("after another replica's change: %d loads, %d per-request reads; want 2, 0", reloads, statements)
	}
}
