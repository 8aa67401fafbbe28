package controllers

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/store"
)

func TestOrphanTrackerRevokesOnlyWhatStayedMissingForTheWholeGracePeriod(t *testing.T) {
	const grace = 10 * time.Minute
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	key := func(id, owner string) store.OperatorKey {
		return store.OperatorKey{ID: id, OwnerRef: owner, TenantID: "acme", Prefix: "hk_" + id}
	}
	a1, a2 := key("a1", "k8s:shop/a"), key("a2", "k8s:shop/a")
	b1 := key("b1", "k8s:shop/b")
	bad := key("x1", "k8s:Shop/x") // not a name the operator writes

	type sweep struct {
		at      time.Duration // after t0
		keys    []store.OperatorKey
		present []string
		want    map[string][]string // owner -> key ids due
	}
	for _, tc := range []struct {
		name   string
		sweeps []sweep
	}{
		{"missing for the whole grace period: revoked", []sweep{
			{0, []store.OperatorKey{a1, b1}, []string{"k8s:shop/b"}, nil},
			{grace - time.Second, []store.OperatorKey{a1, b1}, []string{"k8s:shop/b"}, nil},
			{grace, []store.OperatorKey{a1, b1}, []string{"k8s:shop/b"}, map[string][]string{"k8s:shop/a": {"a1"}}},
		}},
		{"seen again in between: the grace period starts over", []sweep{
			{0, []store.OperatorKey{a1}, nil, nil},
			{5 * time.Minute, []store.OperatorKey{a1}, []string{"k8s:shop/a"}, nil},
			{6 * time.Minute, []store.OperatorKey{a1}, nil, nil},
			{grace + time.Minute, []store.OperatorKey{a1}, nil, nil},
			{grace + 6*time.Minute, []store.OperatorKey{a1}, nil, map[string][]string{"k8s:shop/a": {"a1"}}},
		}},
		{"a key minted after the owner went missing is not revoked", []sweep{
			{0, []store.OperatorKey{a1}, nil, nil},
			{time.Minute, []store.OperatorKey{a1, a2}, nil, nil},
			{grace, []store.OperatorKey{a1, a2}, nil, map[string][]string{"k8s:shop/a": {"a1"}}},
		}},
		{"keys revoked meanwhile: forgotten", []sweep{
			{0, []store.OperatorKey{a1}, nil, nil},
			{time.Minute, nil, nil, nil},
			{grace, []store.OperatorKey{a1}, nil, nil},
		}},
		{"owner refs the operator does not write are ignored", []sweep{
			{0, []store.OperatorKey{bad}, nil, nil},
			{2 * grace, []store.OperatorKey{bad}, nil, nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr orphanTracker
			for i, s := range tc.sweeps {
				present := map[string]bool{}
				for _, p := range s.present {
					present[p] = true
				}
				due := tr.observe(t0.Add(s.at), s.keys, present, grace)
				got := map[string][]string{}
				for owner, ks := range due {
					for _, k := range ks {
						got[owner] = append(got[owner], k.ID)
					}
				}
				if len(got) == 0 {
					got = nil
				}
				if !maps.EqualFunc(got, s.want, slices.Equal[[]string]) {
					t.Errorf("sweep %d at +%s: due %v, want %v", i, s.at, got, s.want)
				}
			}
		})
	}
}
