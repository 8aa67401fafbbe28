package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// seedUsers gives tenant n users linked to chats and verified, each with a used link token, and one
// idempotency key per user; users are named <prefix>-<i>.
func seedUsers(t *testing.T, s *store.Store, tenant, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO users (tenant_id, user_id) SELECT $1, $2 || '-' || i FROM generate_series(1, $3) i`,
		`INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id) SELECT $1, $2 || '-' || i, 1000 + i, 1000 + i FROM generate_series(1, $3) i`,
		`INSERT INTO phone_verifications (tenant_id, user_id, status, phone_last4, verified_at) SELECT $1, $2 || '-' || i, 'verified', '1234', now() FROM generate_series(1, $3) i`,
		`INSERT INTO link_tokens (digest, tenant_id, user_id, label, expires_at, used_at) SELECT sha256(($1 || $2 || i)::bytea), $1, $2 || '-' || i, 'L', now(), now() FROM generate_series(1, $3) i`,
		`INSERT INTO idempotency_keys (tenant_id, key, request_hash, tracking_id) SELECT $1, $2 || '-' || i, '\x00', gen_random_uuid() FROM generate_series(1, $3) i`,
	} {
		if _, err := s.Pool().Exec(ctx, q, tenant, prefix, n); err != nil {
			t.Fatalf("seeding %d users of %s: %v\n%s", n, tenant, err, q)
		}
	}
}

// rowsOf counts the rows of every end-user table that belong to tenant.
func rowsOf(t *testing.T, s *store.Store, tenant string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"users", "links", "phone_verifications", "link_tokens", "idempotency_keys"} {
		var n int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

func queueNotification(t *testing.T, s *store.Store, tenant, user string) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := s.Pool().Exec(context.Background(), `
INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status)
VALUES ($1, 'tenant', $2, $3, 5, 'hello', 'queued')`, id, tenant, user); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestPurgeTenantUsersRemovesEveryUserInBatchesAndNothingElse(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	for _, id := range []string{"acme", "other"} {
		if _, err := s.UpsertTenantFromSpec(ctx, store.TenantRecord{ID: id, DeveloperName: id}); err != nil {
			t.Fatal(err)
		}
	}
	n := 2*store.PurgeBatchSize + 3 // three batches, the last one short
	seedUsers(t, s, "acme", "u", n)
	seedUsers(t, s, "other", "u", 2)
	queued := queueNotification(t, s, "acme", "u-1")
	tpl := store.Template{Name: "order", Format: "text", DefaultLocale: "en", Locales: []byte(`{"en": {"message": "hi"}}`)}
	for _, tenant := range []string{"acme", "other"} {
		if _, _, err := s.SaveTemplate(ctx, tenant, tpl); err != nil {
			t.Fatal(err)
		}
	}

	p, err := s.PurgeTenantUsers(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if p.Users != int64(n) || p.IdempotencyKeys != int64(n) || p.Templates != 1 {
		t.Errorf("PurgeTenantUsers = %+v, want %d users and %d idempotency keys, 1 template", p, n, n)
	}
	// The templates went; the other tenant's stayed; a template saved again under the name is a new
	// version, never the purged one's number.
	if _, err := s.GetTemplate(ctx, "acme", "order", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTemplate of a purged tenant's template: %v, want ErrNotFound", err)
	}
	if _, err := s.GetTemplate(ctx, "other", "order", 1); err != nil {
		t.Errorf("the other tenant's template: %v", err)
	}
	for table, left := range rowsOf(t, s, "acme") {
		if left != 0 {
			t.Errorf("%d rows of acme left in %s", left, table)
		}
	}
	for table, left := range rowsOf(t, s, "other") {
		if left != 2 {
			t.Errorf("%s of the other tenant: %d rows, want its 2 untouched", table, left)
		}
	}
	if _, err := s.GetVerification(ctx, "acme", "u-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetVerification of a purged user: %v, want ErrNotFound", err)
	}
	// The notification queued before the purge stays, and a worker claiming it finds no chat: it ends
	// unlinked instead of reaching the old link.
	d, err := s.ClaimDelivery(ctx, queued, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d.ChatID != 0 {
		t.Errorf("claim of a notification queued before the purge: chat %d, want 0 (no link)", d.ChatID)
	}
	if p, err := s.PurgeTenantUsers(ctx, "acme"); err != nil || p != (store.TenantPurge{}) {
		t.Errorf("a second purge = %+v, %v; want nothing to do", p, err)
	}
	if again, created, err := s.SaveTemplate(ctx, "acme", tpl); err != nil || !created || again.Version != 2 {
		t.Errorf("the template saved again: version %d, created %v, %v; want a new version 2", again.Version, created, err)
	}
}

func TestUpsertTenantFromSpecPurgesAnEarlierIncarnation(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	rec := store.TenantRecord{ID: "acme", DeveloperName: "Acme", Incarnation: "uid-1"}
	if w, err := s.UpsertTenantFromSpec(ctx, rec); err != nil || !w.Wrote || w.Reincarnated {
		t.Fatalf("create: %+v, %v", w, err)
	}
	seedUsers(t, s, "acme", "u", 3)
	key := apikey.New()
	if _, err := s.InsertAPIKey(ctx, "acme", key.Digest, key.Prefix, nil, nil); err != nil {
		t.Fatal(err)
	}

	// The same incarnation: nothing is written, nothing purged.
	if w, err := s.UpsertTenantFromSpec(ctx, rec); err != nil || w.Wrote || w.Reincarnated {
		t.Fatalf("same incarnation: %+v, %v", w, err)
	}
	if rows := rowsOf(t, s, "acme"); rows["users"] != 3 || !usable(t, s, key) {
		t.Fatalf("same incarnation touched the tenant: %v, key usable %v", rows, usable(t, s, key))
	}

	// A new incarnation (the Tenant deleted and re-created): the old keys and users go.
	rec.Incarnation = "uid-2"
	w, err := s.UpsertTenantFromSpec(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.TenantWrite{Wrote: true, Reincarnated: true, Purge: store.TenantPurge{RevokedKeys: 1, Users: 3, IdempotencyKeys: 3}}); w != want {
		t.Errorf("new incarnation: %+v, want %+v", w, want)
	}
	if usable(t, s, key) {
		t.Error("a key of the earlier incarnation still authenticates")
	}
	for table, left := range rowsOf(t, s, "acme") {
		if left != 0 {
			t.Errorf("%d rows of the earlier incarnation left in %s", left, table)
		}
	}

	// A row without incarnation (made with the admin CLI, or before the operator recorded it) is adopted
	// as it is.
	if err := s.CreateTenant(ctx, "cli", "CLI"); err != nil {
		t.Fatal(err)
	}
	seedUsers(t, s, "cli", "u", 2)
	if w, err := s.UpsertTenantFromSpec(ctx, store.TenantRecord{ID: "cli", DeveloperName: "CLI", Incarnation: "uid-3"}); err != nil || !w.Wrote || w.Reincarnated {
		t.Errorf("adopting a row without incarnation: %+v, %v", w, err)
	}
	if rows := rowsOf(t, s, "cli"); rows["users"] != 2 {
		t.Errorf("adoption purged the tenant: %v", rows)
	}
	var inc string
	if err := s.Pool().QueryRow(ctx, `SELECT incarnation FROM tenants WHERE id = 'cli'`).Scan(&inc); err != nil || inc != "uid-3" {
		t.Errorf("incarnation after adoption = %q, %v; want uid-3", inc, err)
	}
}

func TestMigrationIndexesLinkTokensByUser(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	var def string
	err := s.Pool().QueryRow(context.Background(), `SELECT indexdef FROM pg_indexes WHERE indexname = 'link_tokens_user_idx'`).Scan(&def)
	if err != nil {
		t.Fatalf("link_tokens_user_idx: %v", err)
	}
	if want := "(tenant_id, user_id)"; !strings.Contains(def, want) {
		t.Errorf("link_tokens_user_idx = %s, want it on %s", def, want)
	}
}
