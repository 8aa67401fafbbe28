package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// usable says whether key k authenticates.
func usable(t *testing.T, s *store.Store, k apikey.Key) bool {
	t.Helper()
	_, err := s.Authenticate(context.Background(), k.Digest)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func TestUpsertTenantFromSpecWritesOnlyWhatDiffers(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	rec := store.TenantRecord{ID: "acme", DeveloperName: "Acme", Developers: []int64{3, 1, 3}}
	xmin := func() string {
		var x string
		if err := s.Pool().QueryRow(ctx, `SELECT xmin::text FROM tenants WHERE id = 'acme'`).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}

	if w, err := s.UpsertTenantFromSpec(ctx, rec); err != nil || !w.Wrote {
		t.Fatalf("create: wrote=%v err=%v", w.Wrote, err)
	}
	first := xmin()
	rec.Developers = []int64{1, 3} // the same set, in another order
	if w, err := s.UpsertTenantFromSpec(ctx, rec); err != nil || w.Wrote || xmin() != first {
		t.Fatalf("same spec: wrote=%v err=%v, row rewritten=%v", w.Wrote, err, xmin() != first)
	}
	rec.Suspended = true
	if w, err := s.UpsertTenantFromSpec(ctx, rec); err != nil || !w.Wrote {
		t.Fatalf("suspend: wrote=%v err=%v", w.Wrote, err)
	}
	var devs []int64
	var suspended bool
	if err := s.Pool().QueryRow(ctx, `SELECT developers, suspended FROM tenants WHERE id = 'acme'`).Scan(&devs, &suspended); err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0] != 1 || devs[1] != 3 || !suspended {
		t.Errorf("row developers=%v suspended=%v", devs, suspended)
	}
}

func TestOwnedKeysLifecycle(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	if _, err := s.UpsertTenantFromSpec(ctx, store.TenantRecord{ID: "acme", DeveloperName: "Acme"}); err != nil {
		t.Fatal(err)
	}
	const owner = "k8s:shop/backend"
	mint := func(state store.KeyState, revoke, retire []string, retireAt time.Time) (apikey.Key, store.OwnedKey) {
		t.Helper()
		k := apikey.New()
		row, err := s.MintOwnedKey(ctx, store.NewOwnedKey{TenantID: "acme", OwnerRef: owner, Digest: k.Digest, Prefix: k.Prefix, State: state}, revoke, retire, retireAt)
		if err != nil {
			t.Fatal(err)
		}
		return k, row
	}
	a, rowA := mint(store.KeyState{Label: "Shop"}, nil, nil, time.Time{})
	if !usable(t, s, a) {
		t.Fatal("a fresh key is not usable")
	}
	keys, err := s.KeysByOwner(ctx, owner)
	if err != nil || len(keys) != 1 || keys[0].Digest != a.Digest || keys[0].State.Label != "Shop" || keys[0].ID != rowA.ID {
		t.Fatalf("KeysByOwner = %+v, %v", keys, err)
	}

	// Equal state: no write. Disabled: unusable.
	if wrote, err := s.SetKeyState(ctx, rowA.ID, store.KeyState{Label: "Shop"}); err != nil || wrote {
		t.Errorf("same state: wrote=%v err=%v", wrote, err)
	}
	if wrote, err := s.SetKeyState(ctx, rowA.ID, store.KeyState{Label: "Shop", Disabled: true}); err != nil || !wrote || usable(t, s, a) {
		t.Errorf("disable: wrote=%v err=%v usable=%v", wrote, err, usable(t, s, a))
	}
	if _, err := s.SetKeyState(ctx, rowA.ID, store.KeyState{}); err != nil || !usable(t, s, a) {
		t.Errorf("enable: err=%v usable=%v", err, usable(t, s, a))
	}

	// Rotation: the retired key gets the grace expiry; an earlier expiry would be kept.
	graceEnd := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	b, _ := mint(store.KeyState{}, nil, []string{rowA.ID}, graceEnd)
	keys, _ = s.KeysByOwner(ctx, owner)
	if len(keys) != 2 || keys[0].State.ExpiresAt == nil || !keys[0].State.ExpiresAt.Equal(graceEnd) || !usable(t, s, a) || !usable(t, s, b) {
		t.Fatalf("after rotation: %+v", keys)
	}

	// Replacement: the old keys are revoked at once.
	c, _ := mint(store.KeyState{}, []string{keys[0].ID, keys[1].ID}, nil, time.Time{})
	if usable(t, s, a) || usable(t, s, b) || !usable(t, s, c) {
		t.Errorf("after replacement: a=%v b=%v c=%v", usable(t, s, a), usable(t, s, b), usable(t, s, c))
	}
	if n, err := s.CountActiveKeys(ctx, "acme"); err != nil || n != 1 {
		t.Errorf("CountActiveKeys = %d, %v", n, err)
	}

	// Expired keys are not usable nor counted.
	past := time.Now().Add(-time.Second)
	keys, _ = s.KeysByOwner(ctx, owner)
	if _, err := s.SetKeyState(ctx, keys[0].ID, store.KeyState{ExpiresAt: &past}); err != nil || usable(t, s, c) {
		t.Errorf("expired key: err=%v usable=%v", err, usable(t, s, c))
	}
	if n, _ := s.CountActiveKeys(ctx, "acme"); n != 0 {
		t.Errorf("CountActiveKeys with an expired key = %d", n)
	}

	// Deleting the tenant revokes every key, the CLI's too, and suspends the tenant.
	d, _ := mint(store.KeyState{}, nil, nil, time.Time{})
	if n, err := s.RevokeTenantKeys(ctx, "acme"); err != nil || n != 2 {
		t.Errorf("RevokeTenantKeys = %d, %v; want 2 (c and d)", n, err)
	}
	if usable(t, s, d) {
		t.Error("key usable after RevokeTenantKeys")
	}
	if n, err := s.RevokeOwnerKeys(ctx, owner); err != nil || n != 0 {
		t.Errorf("RevokeOwnerKeys after everything was revoked = %d, %v", n, err)
	}
}
