package store_test

import (
	"context"
	"testing"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrationsCreateEveryTable(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	for _, table := range []string{"tenants", "api_keys", "users", "links", "link_tokens", "phone_verifications", "notifications", "idempotency_keys", "processed_updates"} {
		var exists bool
		if err := s.Pool().QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if !exists {
			t.Errorf("table %s missing after migrations", table)
		}
	}
}

// A release older than the schema runs `herald migrate` when it is installed over a newer one (a `helm
// upgrade` to an older chart, which runs the pre-upgrade hook of the older image): it must leave the newer
// versions alone and succeed, so that going back does not stop at the migration Job (docs/operations.md,
// "Rollback").
func TestMigrateLeavesANewerSchemaAlone(t *testing.T) {
	s, url := pgtest.NewStore(t)
	ctx := context.Background()
	var latest int64
	if err := s.Pool().QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&latest); err != nil {
		t.Fatal(err)
	}
	// What a newer release would have applied.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, latest+1); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, url); err != nil {
		t.Fatalf("migrating a schema one version newer than this binary: %v", err)
	}
	var now int64
	if err := s.Pool().QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	if now != latest+1 {
		t.Errorf("the schema version is %d after the migration, want %d (left alone)", now, latest+1)
	}
}
