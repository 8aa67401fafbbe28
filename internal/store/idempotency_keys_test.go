package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// Sixteen concurrent requests claim one key: exactly one gets it; the others, once it committed, find it
// taken (they replay its answer).
func TestConcurrentClaimsOfOneKey(t *testing.T) {
	s := fixture(t)
	claim := store.KeyClaim{IdempotencyKey: store.IdempotencyKey{TenantID: "acme", Key: "order-1"}, RequestHash: [32]byte{1}}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			err := s.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
				got, err := tx.ClaimIdempotencyKeys(ctx, []store.KeyClaim{claim})
				if err != nil {
					return err
				}
				if got[claim.IdempotencyKey] {
					won.Add(1)
					return tx.SaveIdempotencyResults(ctx, []store.KeyResults{{IdempotencyKey: claim.IdempotencyKey, Results: []byte(`[{"tracking_id":"t"}]`)}})
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d requests claimed the key, want exactly 1", won.Load())
	}
	rec, err := s.ReadIdempotencyKey(context.Background(), claim.IdempotencyKey)
	if err != nil || string(rec.Results) != `[{"tracking_id": "t"}]` || rec.RequestHash != claim.RequestHash {
		t.Fatalf("record = %+v (%s), %v", rec, rec.Results, err)
	}
	if rec.Settled {
		t.Error("a key whose request was not marked answered reads as settled")
	}
	if err := s.MarkIdempotencyPublished(context.Background(), []store.IdempotencyKey{claim.IdempotencyKey}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.ReadIdempotencyKey(context.Background(), claim.IdempotencyKey); !rec.Settled {
		t.Error("a key marked answered does not read as settled")
	}
}

// A key older than the window is taken over by the next request that names it; a key written before
// answers were kept reads as a one-item answer.
func TestOldKeysAreTakenOverAndOldFormatReads(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	k := store.IdempotencyKey{TenantID: "acme", Key: "old"}
	exec(t, s, `INSERT INTO idempotency_keys (tenant_id, key, request_hash, tracking_id, created_at)
		VALUES ('acme', 'old', '\x01', '0195d000-0000-7000-8000-000000000001', now() - interval '25 hours')`)
	rec, err := s.ReadIdempotencyKey(ctx, k)
	if err != nil || string(rec.Results) != `[{"status": "queued", "tracking_id": "0195d000-0000-7000-8000-000000000001"}]` || !rec.Settled {
		t.Fatalf("old-format key reads %s (settled %v), %v", rec.Results, rec.Settled, err)
	}
	err = s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		got, err := tx.ClaimIdempotencyKeys(ctx, []store.KeyClaim{{IdempotencyKey: k, RequestHash: [32]byte{2}}})
		if err == nil && !got[k] {
			err = errors.New("a key older than the window was not taken over")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A batch saves the answers of all its keys in one statement, each under its own key; marking them
// answered settles exactly those keys.
func TestAnswersOfSeveralKeysAreSavedAndMarkedTogether(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	a := store.IdempotencyKey{TenantID: "acme", Key: "a"}
	b := store.IdempotencyKey{TenantID: "acme", Key: "b"}
	c := store.IdempotencyKey{TenantID: "acme", Key: "c"}
	err := s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		claims := []store.KeyClaim{{IdempotencyKey: a, RequestHash: [32]byte{1}}, {IdempotencyKey: b, RequestHash: [32]byte{2}}, {IdempotencyKey: c, RequestHash: [32]byte{3}}}
		if _, err := tx.ClaimIdempotencyKeys(ctx, claims); err != nil {
			return err
		}
		return tx.SaveIdempotencyResults(ctx, []store.KeyResults{
			{IdempotencyKey: a, Results: []byte(`[{"tracking_id":"ta"}]`)},
			{IdempotencyKey: b, Results: []byte(`[{"error":"phone_unverified"}]`)},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIdempotencyPublished(ctx, []store.IdempotencyKey{a, b}); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[store.IdempotencyKey]string{a: `[{"tracking_id": "ta"}]`, b: `[{"error": "phone_unverified"}]`} {
		rec, err := s.ReadIdempotencyKey(ctx, k)
		if err != nil || string(rec.Results) != want || !rec.Settled {
			t.Errorf("key %s: %s (settled %v), %v; want %s, settled", k.Key, rec.Results, rec.Settled, err, want)
		}
	}
	if rec, err := s.ReadIdempotencyKey(ctx, c); err != nil || rec.Settled {
		t.Errorf("key c, neither saved nor marked, reads settled %v, %v", rec.Settled, err)
	}
}

// The mark commits without waiting for the WAL flush, and that choice stays with its own transaction: the
// pooled connection it ran on stays synchronous for the next insert, whose commit is the 202's promise.
func TestMarkingAnsweredLeavesTheConnectionSynchronous(t *testing.T) {
	s := oneConnStore(t) // the mark and the SHOW share its connection
	ctx := context.Background()
	// The test cluster runs with synchronous_commit off; the session here runs as production's does.
	exec(t, s, `SET synchronous_commit = on`)
	k := store.IdempotencyKey{TenantID: "acme", Key: "k"}
	err := s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		_, err := tx.ClaimIdempotencyKeys(ctx, []store.KeyClaim{{IdempotencyKey: k, RequestHash: [32]byte{1}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIdempotencyPublished(ctx, []store.IdempotencyKey{k}); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := s.Pool().QueryRow(ctx, `SHOW synchronous_commit`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "on" {
		t.Fatalf("after the mark the connection's synchronous_commit is %q, want on", mode)
	}
	if rec, err := s.ReadIdempotencyKey(ctx, k); err != nil || !rec.Settled {
		t.Fatalf("key not settled after the mark: %+v, %v", rec, err)
	}
}

// The statements that find a batch's keys by joining them to idempotency_keys are planned for each call,
// never kept as prepared statements: a generic plan made while the table was small scans it whole, and
// would be kept as the table grows (see planEachTime).
func TestKeyStatementsAreNotPrepared(t *testing.T) {
	s := oneConnStore(t) // its connection's prepared statements are the ones checked
	ctx := context.Background()
	k := store.IdempotencyKey{TenantID: "acme", Key: "k"}
	for range 8 { // past the five runs after which PostgreSQL may keep a generic plan
		err := s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			if _, err := tx.ClaimIdempotencyKeys(ctx, []store.KeyClaim{{IdempotencyKey: k, RequestHash: [32]byte{1}}}); err != nil {
				return err
			}
			if err := tx.SaveIdempotencyResults(ctx, []store.KeyResults{{IdempotencyKey: k, Results: []byte(`[]`)}}); err != nil {
				return err
			}
			if err := tx.MarkIdempotencyPublished(ctx, []store.IdempotencyKey{k}); err != nil {
				return err
			}
			return tx.DeleteIdempotencyKeys(ctx, []store.IdempotencyKey{k})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkIdempotencyPublished(ctx, []store.IdempotencyKey{k}); err != nil {
			t.Fatal(err)
		}
	}
	var prepared []string
	rows, err := s.Pool().Query(ctx, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%idempotency_keys k%' AND statement NOT LIKE '%pg_prepared_statements%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			t.Fatal(err)
		}
		prepared = append(prepared, st)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(prepared) != 0 {
		t.Fatalf("%d key statements are prepared on the connection: %q", len(prepared), prepared)
	}
}

// oneConnStore is a store with tenant acme whose pool holds a single connection, so that a test sees what
// a statement leaves on the connection the next one gets.
func oneConnStore(t *testing.T) *store.Store {
	t.Helper()
	_, url := pgtest.NewStore(t)
	s, err := store.Open(context.Background(), url, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.CreateTenant(context.Background(), "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	return s
}
