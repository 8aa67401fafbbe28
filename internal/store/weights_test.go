package store_test

import (
	"context"
	"maps"
	"testing"

	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// Only the tenants whose weight is set are read, each with its weight.
func TestDeliveryWeightsAreThoseSet(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	for _, id := range []string{"acme", "heavy", "light"} {
		if err := s.CreateTenant(ctx, id, id); err != nil {
			t.Fatal(err)
		}
	}
	for id, w := range map[string]int32{"heavy": 5, "light": 2} {
		if err := s.SetTenantLimits(ctx, id, store.TenantLimits{DeliveryWeight: &w}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.DeliveryWeights(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"heavy": 5, "light": 2}; !maps.Equal(got, want) {
		t.Errorf("DeliveryWeights = %v, want %v", got, want)
	}
}
