package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// auditTrail is every event of a tenant, oldest first, as "type actor target".
func auditTrail(t *testing.T, s *store.Store, tenant string) ([]string, []audit.Event) {
	t.Helper()
	events, _, err := s.AuditEvents(context.Background(), tenant, nil, store.MaxListLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		out = append(out, string(e.Type)+" "+e.Actor+" "+e.Target)
	}
	return out, events
}

// Each change a tenant's key makes through the store appends its event, by the actor its context carries,
// with what changed — never the key, a callback's secret or URL, a phone number or a template's source.
func TestEachChangeAppendsItsAuditEvent(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	fx := seed.New(s)
	fx.Tenant(t, "acme")
	fx.VerifiedUser(t, "acme", "u1", 1001, seed.PhoneLast4("9876"))
	ctx := audit.WithActor(context.Background(), audit.APIKey("k-1"))

	k := apikey.New()
	keyID, err := s.InsertAPIKey(ctx, "acme", k.Digest, k.Prefix, ptr("Shop"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SaveTemplate(ctx, "acme", store.Template{Name: "welcome", Format: "text", DefaultLocale: "en",
		Locales: json.RawMessage(`{"en":{"message":"SECRET-BODY {{ name }}"}}`)}); err != nil {
		t.Fatal(err)
	}
	// The same again is no new version, and no event.
	if _, created, err := s.SaveTemplate(ctx, "acme", store.Template{Name: "welcome", Format: "text", DefaultLocale: "en",
		Locales: json.RawMessage(`{"en":{"message":"SECRET-BODY {{ name }}"}}`)}); err != nil || created {
		t.Fatalf("the same template again: created %v, %v", created, err)
	}
	ep, err := s.CreateCallbackEndpoint(ctx, store.CallbackEndpoint{ID: "0c0c0c0c-0000-4000-8000-000000000001", TenantID: "acme",
		URL: "https://hooks.example/cb?token=URLTOKEN", Events: []string{"notification.delivered"}}, []byte("SEALEDSECRET"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RotateCallbackSecret(ctx, "acme", ep.ID, []byte("SEALEDSECRET2"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCallbackEndpoint(ctx, "acme", ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OptOut(ctx, "acme", "u1", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LiftOptOut(ctx, "acme", "u1", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTemplate(ctx, "acme", "welcome"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeAPIKeys(ctx, "acme", keyID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EraseUser(ctx, "acme", "u1"); err != nil {
		t.Fatal(err)
	}
	// Changes that change nothing record nothing.
	if err := s.DeleteCallbackEndpoint(ctx, "acme", ep.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if n, err := s.RevokeAPIKeys(ctx, "acme", keyID); err != nil || n != 0 {
		t.Fatalf("revoking it again: %d, %v", n, err)
	}

	got, events := auditTrail(t, s, "acme")
	a := "api_key:k-1 "
	want := []string{
		"api_key.created " + a + keyID,
		"template.saved " + a + "welcome",
		"callback.created " + a + ep.ID,
		"callback.secret_rotated " + a + ep.ID,
		"callback.deleted " + a + ep.ID,
		"user.opted_out " + a + "u1",
		"user.opted_in " + a + "u1",
		"template.deleted " + a + "welcome",
		"api_key.revoked " + a + keyID,
		"user.erased " + a + "u1",
	}
	if len(got) != len(want) {
		t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
	// The events' own ids, times and UUIDs are digits of their own that may hold the phone's "9876" by
	// chance (a CI run's "at" of 08:36:10.987672 did): they are taken out before the search.
	scrubbed := slices.Clone(events)
	for i := range scrubbed {
		scrubbed[i].ID, scrubbed[i].At = 0, time.Time{}
	}
	raw, _ := json.Marshal(scrubbed)
	all := uuidPattern.ReplaceAllString(string(raw), "UUID")
	for _, secret := range []string{k.Secret, k.Prefix, "SEALEDSECRET", "URLTOKEN", "hooks.example", "9876", "SECRET-BODY"} {
		if strings.Contains(all, secret) {
			t.Errorf("an event holds %q: %s", secret, all)
		}
	}
	details := map[audit.Type]string{}
	for _, e := range events {
		d, _ := json.Marshal(e.Details)
		details[e.Type] = string(d)
	}
	for typ, want := range map[audit.Type]string{
		audit.APIKeyRevoked:   `{"label":"Shop"}`,
		audit.TemplateSaved:   `{"version":1}`,
		audit.CallbackCreated: `{"events":["notification.delivered"]}`,
		audit.UserOptedOut:    `{"by":"tenant","category":"promo"}`,
	} {
		if details[typ] != want {
			t.Errorf("%s's details %s, want %s", typ, details[typ], want)
		}
	}
}

// An event commits with its change or not at all: a change rolled back at its commit leaves no event, and
// an event that cannot be appended takes its change back with it.
func TestAnAuditEventCommitsWithItsChange(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	fx := seed.New(s)
	fx.Tenant(t, "acme")
	fx.VerifiedUser(t, "acme", "u1", 1001)
	ctx := audit.WithActor(context.Background(), audit.APIKey("k-1"))
	// A deferred constraint trigger refuses each changed table's row at the commit, after the statement (and
	// the event) ran.
	if _, err := s.Pool().Exec(ctx, `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
		CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON template_versions DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
		CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON api_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
		CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON opt_outs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();
		CREATE CONSTRAINT TRIGGER refuse AFTER UPDATE ON tenants DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	k := apikey.New()
	if _, err := s.InsertAPIKey(ctx, "acme", k.Digest, k.Prefix, ptr("Shop"), nil); err == nil {
		t.Error("the key was inserted")
	}
	if _, _, err := s.SaveTemplate(ctx, "acme", store.Template{Name: "welcome", Format: "text", DefaultLocale: "en",
		Locales: json.RawMessage(`{"en":{"message":"hi"}}`)}); err == nil {
		t.Error("the template was saved")
	}
	if _, err := s.OptOut(ctx, "acme", "u1", "", consent.ByTenant); err == nil {
		t.Error("the opt-out was made")
	}
	seven := int32(7)
	if err := s.SetTenantLimits(ctx, "acme", store.TenantLimits{SendsPerSecond: &seven}); err == nil {
		t.Error("the limits were set")
	}
	if got, _ := auditTrail(t, s, "acme"); len(got) != 0 {
		t.Errorf("changes rolled back left events: %q", got)
	}

	// The other way round: an event refused takes its change back.
	if _, err := s.Pool().Exec(ctx, `
		DROP TRIGGER refuse ON api_keys;
		CREATE TRIGGER refuse BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertAPIKey(ctx, "acme", k.Digest, k.Prefix, ptr("Shop"), nil); err == nil {
		t.Error("a key was inserted without its event")
	}
	var keys int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE tenant_id = 'acme'`).Scan(&keys); err != nil || keys != 0 {
		t.Errorf("%d keys (%v) after their events were refused", keys, err)
	}
}

// A tenant's trail holds only its events; a type filters; pages walk every event once, newest first, and a
// cursor serves only the filter it was made for.
func TestAuditEventsFilterAndPage(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	fx := seed.New(s)
	fx.Tenant(t, "acme")
	fx.Tenant(t, "globex")
	ctx := audit.WithActor(context.Background(), audit.AdminCLI)
	for i := range 5 {
		for _, tenant := range []string{"acme", "globex"} {
			k := apikey.New()
			if _, err := s.InsertAPIKey(ctx, tenant, k.Digest, k.Prefix, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetTenantDeveloperName(ctx, "acme", "Acme "+string(rune('A'+i))); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int64
	var cur *store.AuditCursor
	types := []audit.Type{audit.TenantUpdated}
	for page := 0; ; page++ {
		events, next, err := s.AuditEvents(ctx, "acme", types, 2, cur)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.TenantID != "acme" || e.Type != audit.TenantUpdated || e.Actor != audit.AdminCLI {
				t.Errorf("page %d holds %+v", page, e)
			}
			ids = append(ids, e.ID)
		}
		if next == nil {
			break
		}
		c, err := store.DecodeAuditCursor(next.Encode(types), types)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.DecodeAuditCursor(next.Encode(types), nil); err == nil {
			t.Error("a cursor of tenant.updated served the listing of every type")
		}
		cur = &c
	}
	if len(ids) != 5 {
		t.Fatalf("walked %d events of acme's tenant.updated, want 5: %v", len(ids), ids)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			t.Errorf("not newest first: %v", ids)
		}
	}
	all, _, err := s.AuditEvents(ctx, "", nil, store.MaxListLimit, nil)
	if err != nil {
		t.Fatal(err)
	}
	tenants := map[string]int{}
	for _, e := range all {
		tenants[e.TenantID]++
	}
	// Each tenant's five keys; acme's five renames.
	if tenants["acme"] != 10 || tenants["globex"] != 5 {
		t.Errorf("events per tenant %v", tenants)
	}
}

// Events older than 400 days are purged; younger ones stay.
func TestAuditEventsArePurgedAfter400Days(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO audit_events (tenant_id, type, actor, target, at) VALUES
		('acme', 'template.saved', 'operator', 'old', now() - interval '401 days'),
		('acme', 'template.saved', 'operator', 'young', now() - interval '399 days')`); err != nil {
		t.Fatal(err)
	}
	n, err := s.Purge(ctx, store.PurgeAuditEvents, store.DefaultRetention, 100)
	if err != nil || n != 1 {
		t.Fatalf("purged %d, %v; want 1", n, err)
	}
	got, _ := auditTrail(t, s, "acme")
	if len(got) != 1 || !strings.HasSuffix(got[0], "young") {
		t.Errorf("left %q", got)
	}
}

// uuidPattern matches a UUID in its text form.
var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
