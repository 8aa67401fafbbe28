package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldhq/herald/internal/store"
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
					return tx.SaveIdempotencyResults(ctx, claim.IdempotencyKey, []byte(`[{"tracking_id":"t"}]`))
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
