package controllers_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/controllers"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/testing/wait"
)

type tenantRow struct {
	DeveloperName string
	Suspended     bool
	Developers    []int64
	Xmin          string
}

func (h *harness) tenantRow(id string) (tenantRow, error) {
	var r tenantRow
	err := h.st.Pool().QueryRow(h.ctx, `SELECT developer_name, suspended, developers, xmin::text FROM tenants WHERE id = $1`, id).
		Scan(&r.DeveloperName, &r.Suspended, &r.Developers, &r.Xmin)
	return r, err
}

func (h *harness) waitTenantRow(id string, want tenantRow) {
	h.t.Helper()
	wait.For(h.t, 10*time.Second, "tenant row "+id, func() error {
		got, err := h.tenantRow(id)
		if err != nil {
			return err
		}
		if got.DeveloperName != want.DeveloperName || got.Suspended != want.Suspended || !slices.Equal(got.Developers, want.Developers) {
			return fmt.Errorf("row %+v, want %+v", got, want)
		}
		return nil
	})
}

func TestTenantIsWrittenToTheKeyStore(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("acme", func(tn *notifyv1alpha1.Tenant) { tn.Spec.Developers = []int64{42, 7} })

	got := h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	h.waitTenantRow(tn.Name, tenantRow{DeveloperName: "Acme Corp", Developers: []int64{7, 42}})
	if !controllerutil.ContainsFinalizer(got, controllers.Finalizer) {
		t.Errorf("finalizers %v, want %s", got.Finalizers, controllers.Finalizer)
	}
	if got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d, want 1", got.Status.ObservedGeneration)
	}
	if err := condition(got.Status.Conditions, 1, notifyv1alpha1.ConditionKeyStoreSynced, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced); err != nil {
		t.Error(err)
	}
	if err := condition(got.Status.Conditions, 1, notifyv1alpha1.ConditionSuspended, metav1.ConditionFalse, notifyv1alpha1.ReasonActive); err != nil {
		t.Error(err)
	}

	update(h, got, func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.DisplayName = "Acme Inc."
		tn.Spec.Developers = []int64{99}
	})
	h.waitTenantRow(tn.Name, tenantRow{DeveloperName: "Acme Inc.", Developers: []int64{99}})
	got = h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	if got.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d after an update, want 2", got.Status.ObservedGeneration)
	}
}

func TestTenantCountsActiveKeys(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("acme")
	h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	a := h.apiKey("a", tn.Name)
	h.apiKey("b", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.Disabled = true })
	h.apiKey("c", tn.Name)

	wait.For(h.t, 10*time.Second, "activeKeys = 2", func() error {
		if n := h.getTenant(tn.Name).Status.ActiveKeys; n != 2 {
			return fmt.Errorf("activeKeys = %d", n)
		}
		return nil
	})
	// A key made with the admin CLI counts too; the resync picks it up.
	h.cliKey(tn.Name)
	if err := k8s.Delete(h.ctx, a); err != nil {
		t.Fatal(err)
	}
	wait.For(h.t, 10*time.Second, "activeKeys = 2 (one deleted, one added by the CLI)", func() error {
		if n := h.getTenant(tn.Name).Status.ActiveKeys; n != 2 {
			return fmt.Errorf("activeKeys = %d", n)
		}
		return nil
	})
}

func TestSuspendingATenantMakesItsKeysFailWithinSeconds(t *testing.T) {
	h := start(t, operator.Options{})
	tn, key, secret := h.activeKey()
	if !h.usable(secret) {
		t.Fatal("the key does not authenticate before suspension")
	}

	update(h, h.getTenant(tn.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.Suspended = true })
	h.waitUsable(secret, false, 5*time.Second)
	got := h.waitTenant(tn.Name, metav1.ConditionFalse, notifyv1alpha1.ReasonSuspended)
	if err := condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionSuspended, metav1.ConditionTrue, notifyv1alpha1.ReasonSuspended); err != nil {
		t.Error(err)
	}
	h.waitKey(key, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantSuspended)
	if r := h.keyRow(secret); r.RevokedAt != nil || r.Disabled {
		t.Errorf("suspension changed the key itself: %+v", r)
	}

	update(h, h.getTenant(tn.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.Suspended = false })
	h.waitUsable(secret, true, 5*time.Second)
	h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
}

func TestDeletingATenantRevokesEveryKeyBeforeItGoes(t *testing.T) {
	h := start(t, operator.Options{})
	tn, key, secret := h.activeKey()
	cli := h.cliKey(tn.Name) // a key made with the admin CLI: revoked as well
	uid := h.getTenant(tn.Name).UID

	h.deleteTenant(tn.Name)
	// The finalizer is removed only after the revocation committed: by now every key is revoked.
	for _, s := range []string{secret, cli.Secret} {
		if r := h.keyRow(s); r.RevokedAt == nil {
			t.Errorf("key %s not revoked when the Tenant went", r.Prefix)
		}
		if h.usable(s) {
			t.Errorf("key %s still authenticates", s[:apikey.PrefixLen])
		}
	}
	h.waitEvent(&notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name, UID: types.UID(uid)}},
		"Normal", "KeysRevoked", "tenant deleted: revoked")
	// The ApiKey now has no Tenant: not ready, and it mints nothing.
	h.waitKey(key, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantNotFound)
	active := 0
	for _, k := range h.fx.APIKeys(t) {
		if !k.Revoked {
			active++
		}
	}
	if active != 0 {
		t.Errorf("%d unrevoked keys after the Tenant went, want 0", active)
	}
}

// spec.limits reach the key store (where every ingress replica reads them with the authentication cache);
// a limit removed from the spec falls back to the installation's default (NULL).
func TestTenantLimitsAreWrittenToTheKeyStore(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("limited", func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.Limits = &notifyv1alpha1.TenantLimits{SendsPerSecond: ptr.To(int32(20)), Burst: ptr.To(int32(40)), DeliveryWeight: ptr.To(int32(3))}
	})
	limits := func() (string, error) {
		row, err := h.st.GetTenant(h.ctx, tn.Name)
		var set []string
		for _, l := range []*int32{row.Limits.SendsPerSecond, row.Limits.Burst, row.Limits.RequestsPerSecond, row.Limits.DeliveryWeight} {
			if l != nil {
				set = append(set, strconv.Itoa(int(*l)))
			}
		}
		return strings.Join(set, ","), err
	}
	wait.For(h.t, 10*time.Second, "limits written", func() error {
		if got, err := limits(); err != nil || got != "20,40,3" {
			return fmt.Errorf("limits %q (%v), want 20,40,3", got, err)
		}
		return nil
	})
	got := h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	update(h, got, func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.Limits = &notifyv1alpha1.TenantLimits{RequestsPerSecond: ptr.To(int32(5))}
	})
	wait.For(h.t, 10*time.Second, "limits changed", func() error {
		if got, err := limits(); err != nil || got != "5" {
			return fmt.Errorf("limits %q (%v), want only requests 5", got, err)
		}
		return nil
	})
}

// spec.quietHours (§14) reach the key store, mode hold by default; a change follows, and removing them
// clears them.
func TestTenantQuietHoursAreWrittenToTheKeyStore(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("quiet", func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.QuietHours = &notifyv1alpha1.TenantQuietHours{Start: "22:00", End: "08:00", TimeZone: "Europe/Berlin"}
	})
	hours := func() (string, error) {
		row, err := h.st.GetTenant(h.ctx, tn.Name)
		if q := row.Quiet; q != nil {
			return fmt.Sprintf("%d,%d,%s,%s", q.Start, q.End, q.Zone, q.Mode), err
		}
		return "", err
	}
	waitHours := func(want string) {
		wait.For(h.t, 10*time.Second, "quiet hours "+want, func() error {
			if got, err := hours(); err != nil || got != want {
				return fmt.Errorf("quiet hours %q (%v), want %q", got, err, want)
			}
			return nil
		})
	}
	waitHours("1320,480,Europe/Berlin,hold")
	got := h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	update(h, got, func(tn *notifyv1alpha1.Tenant) {
		tn.Spec.QuietHours = &notifyv1alpha1.TenantQuietHours{Start: "12:30", End: "14:00", TimeZone: "America/New_York", Mode: "silent"}
	})
	waitHours("750,840,America/New_York,silent")
	got = h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	update(h, got, func(tn *notifyv1alpha1.Tenant) { tn.Spec.QuietHours = nil })
	waitHours("")
}
