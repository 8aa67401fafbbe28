package store_test

import (
	"context"
	"testing"

	"github.com/heraldhq/herald/internal/pgtest"
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
