package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// The worker's batched claim and status write, planned once under store.StablePlans, read the rows they
// name through the primary key even when the statistics describe notifications as nearly empty and the
// table has since grown (the first minutes of a deployment, a burst after a quiet period): a plan made
// from such statistics hashed the outcomes and read the whole table at each status write (make bench-bots,
// part soak).
func TestStablePlansReadTheNamedRowsByKey(t *testing.T) {
	ctx := context.Background()
	s, url := pgtest.NewStore(t)
	if err := s.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "acme", "ok", 1)
	// A table of ten rows, its statistics taken, and no analyze after it grows.
	exec(t, s, `ALTER TABLE notifications SET (autovacuum_enabled = false)`)
	insert := `INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, chat_id)
		SELECT gen_random_uuid(), 'tenant', 'acme', 'ok', 5, 'hello', 'queued', 1 FROM generate_series(1, $1)`
	exec(t, s, insert, 10)
	exec(t, s, `ANALYZE notifications`)

	stable, err := store.Open(ctx, url, 1, store.StablePlans)
	if err != nil {
		t.Fatal(err)
	}
	defer stable.Close()
	conn, err := stable.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	explain := func(name, args string) string {
		t.Helper()
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE `+name+`(`+args+`)`)
		if err != nil {
			t.Fatalf("EXPLAIN EXECUTE %s: %v", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("EXPLAIN EXECUTE %s: %v", name, err)
		}
		return strings.Join(lines, "\n")
	}
	id := `ARRAY['` + newID() + `']::uuid[]`
	statements := []struct{ name, sql, args string }{
		{"claim", store.ClaimManySQLForTest, id + `, 60, ARRAY[]::uuid[]`},
		{"finish", store.FinishSQLForTest, id + `, ARRAY[1], ARRAY['delivered'], ARRAY[NULL]::text[], ARRAY[0], ARRAY[NULL]::text[],
			ARRAY[0]::float8[], ARRAY[false], ARRAY['sent'], ARRAY[NULL]::timestamptz[], ARRAY[false]`},
	}
	// Each statement is planned on the small table, as a worker that starts with the deployment plans it,
	// and the connection keeps the plan while the table grows.
	for _, p := range statements {
		if _, err := conn.Exec(ctx, `PREPARE `+p.name+` AS `+p.sql); err != nil {
			t.Fatalf("PREPARE %s: %v", p.name, err)
		}
		explain(p.name, p.args)
	}
	exec(t, s, insert, 20000)
	for _, p := range statements {
		got := explain(p.name, p.args)
		// A generic plan names the arguments ($1), a custom one their values.
		if !strings.Contains(got, "ANY ($1)") {
			t.Errorf("%s: not the generic plan:\n%s", p.name, got)
		}
		if strings.Contains(got, "Seq Scan on notifications") || !strings.Contains(got, "notifications_pkey") {
			t.Errorf("%s: the rows named are not read by key:\n%s", p.name, got)
		}
	}
}

// A statement with no index to use keeps its sequential scan under store.StablePlans, and the penalty
// enable_seqscan = off adds to its cost must not make PostgreSQL compile it at each execution (JIT): the
// worker reads the tenants' weights and the endings due every few seconds, and each read cost 200–800 ms
// of the server's CPU when it was compiled.
func TestStablePlansCompileNothing(t *testing.T) {
	ctx := context.Background()
	s, url := pgtest.NewStore(t)
	if err := s.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	stable, err := store.Open(ctx, url, 1, store.StablePlans)
	if err != nil {
		t.Fatal(err)
	}
	defer stable.Close()
	rows, err := stable.Pool().Query(ctx, `EXPLAIN (ANALYZE, FORMAT TEXT) SELECT id, delivery_weight FROM tenants WHERE delivery_weight IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "Seq Scan on tenants") {
		t.Fatalf("expected the weights' read to scan tenants (no index serves it):\n%s", plan)
	}
	if strings.Contains(plan, "JIT:") {
		t.Errorf("the weights' read was compiled at execution:\n%s", plan)
	}
}
