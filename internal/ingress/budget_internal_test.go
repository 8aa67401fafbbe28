package ingress

import (
	"testing"
	"time"
)

// A tenant takes at most three quarters of the requests and half of the batches and bytes, and at least a
// full batch of bytes; the bytes of every tenant
// stay within the budget; what is given back leaves nothing behind, so the table holds only the tenants
// with requests in flight.
func TestAdmissionHoldsEachTenantToHalfAndForgetsIdleTenants(t *testing.T) {
	ad := newAdmission(8, 4, MinMaxInFlightBytes)
	if ad.share.bytes != MaxBatchBodyBytes || ad.share.requests != 6 || ad.share.batches != 2 {
		t.Fatalf("share %+v, want 6 requests, 2 batches, a full batch of bytes", ad.share)
	}
	batch := load{requests: 1, batches: 1, bytes: MaxBatchBodyBytes}
	if ok, _ := ad.take("a", batch); !ok {
		t.Fatal("a full batch was refused")
	}
	if ok, overShare := ad.take("a", load{requests: 1, bytes: 1}); ok || !overShare {
		t.Errorf("one byte past the tenant's share: ok %v, over its share %v; want refused for its share", ok, overShare)
	}
	if ok, _ := ad.take("b", batch); !ok {
		t.Fatal("another tenant's full batch was refused while the first holds its share")
	}
	if ok, overShare := ad.take("c", load{requests: 1, bytes: 1}); ok || overShare {
		t.Errorf("one byte past the budget: ok %v, over its share %v; want refused for the budget", ok, overShare)
	}
	if ok, _ := ad.take("c", load{requests: 1}); !ok {
		t.Error("a request without a body was refused: it takes no bytes")
	}
	ad.give("a", batch)
	ad.give("b", batch)
	ad.give("c", load{requests: 1})
	if ad.bytes != 0 || len(ad.tenants) != 0 {
		t.Errorf("after every request was answered: %d bytes, %d tenants held", ad.bytes, len(ad.tenants))
	}
}

// The lookup budget for throttled addresses spends its burst, then one lookup per 1/rate.
func TestLookupBudgetRefillsAtItsRate(t *testing.T) {
	b := newLookupBudget(10, 2)
	now := time.Now()
	for i := range 2 {
		if _, ok := b.take(now); !ok {
			t.Fatalf("lookup %d of a burst of 2 refused", i+1)
		}
	}
	wait, ok := b.take(now)
	if ok || wait != 100*time.Millisecond {
		t.Errorf("past the burst: ok %v, wait %v; want refused for 100ms", ok, wait)
	}
	if _, ok := b.take(now.Add(100 * time.Millisecond)); !ok {
		t.Error("refused a tenth of a second later at 10 a second")
	}
}
