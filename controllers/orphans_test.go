package controllers_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/rbactest"
)

// consistently polls check for the whole of d and fails the test at its first error.
func (h *harness) consistently(d time.Duration, what string, check func() error) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			h.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cliKey inserts a key the way `herald apikey create` does: no owner_ref.
func (h *harness) cliKey(tenant string) apikey.Key {
	h.t.Helper()
	k := apikey.New()
	if _, err := h.st.InsertAPIKey(h.ctx, tenant, k.Digest, k.Prefix, nil, nil); err != nil {
		h.t.Fatalf("a key of the admin CLI: %v", err)
	}
	return k
}

// An ApiKey deleted while the operator was down, its finalizer removed by hand, leaves a live key in the
// key store. The operator that starts next (cold caches) revokes it once the ApiKey has been missing for
// the orphan grace period, and says so on the Tenant; the keys of ApiKeys that exist, and the admin CLI's,
// are left alone. The operator runs as its ServiceAccount: config/rbac allows what the sweep does.
func TestKeysOfAnApiKeyDeletedWithoutItsFinalizerAreRevokedAfterTheGracePeriod(t *testing.T) {
	const grace = 3 * time.Second
	id := rbactest.Install(t, k8s, restConfig, "herald-orphan-"+randomSuffix())
	opts := operator.Options{OrphanGracePeriod: grace, RestConfig: id.Config}
	h := start(t, opts)
	id.GrantSecrets(h.ns)
	tn := h.tenant("acme")
	gone := h.apiKey("gone", tn.Name)
	stays := h.apiKey("stays", tn.Name)
	h.waitKey(gone, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	h.waitKey(stays, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	goneKey, staysKey := h.secretKey(gone), h.secretKey(stays)
	cli := h.cliKey(tn.Name)

	h.stop() // the operator is down
	if err := k8s.Patch(h.ctx, gone, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))); err != nil {
		t.Fatal(err)
	}
	h.deleteAndWait(gone)
	if !h.usable(goneKey) {
		t.Fatal("setting up: the key of the force-deleted ApiKey should still authenticate")
	}

	restarted := time.Now()
	h.run(opts) // a new operator process
	h.waitUsable(goneKey, false, grace+15*time.Second)
	if took := time.Since(restarted); took < grace {
		t.Errorf("the orphaned key was revoked %s after the operator started, before the %s grace period", took, grace)
	}
	for name, k := range map[string]string{"the existing ApiKey's": staysKey, "the admin CLI's": cli.Secret} {
		if !h.usable(k) {
			t.Errorf("%s key was revoked by the orphan sweep", name)
		}
	}
	h.waitEvent(h.getTenant(tn.Name), corev1.EventTypeWarning, "OrphanedKeysRevoked",
		fmt.Sprintf("(prefix %s) of ApiKey %s/gone", goneKey[:apikey.PrefixLen], h.ns))
	h.waitKey(stays, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
}

// The sweep runs on the leader only: while another replica holds the Lease nothing is revoked, however
// long the orphan has been there; once this operator leads, the orphan goes after the grace period. Keys
// whose owner_ref the operator did not write are never touched.
func TestOnlyTheLeaderSweepsOrphanedKeys(t *testing.T) {
	const grace = time.Second
	leaseID := "herald-orphans-" + randomSuffix()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: leaseID},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("another-replica"),
			LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	if err := k8s.Create(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(t.Context(), lease) })
	h := start(t, operator.Options{OrphanGracePeriod: grace, LeaderElection: true,
		LeaderElectionNamespace: metav1.NamespaceDefault, LeaderElectionID: leaseID})

	tenant := "orphans-" + h.suffix
	if _, err := h.st.UpsertTenantFromSpec(h.ctx, store.TenantRecord{ID: tenant, DeveloperName: "Orphans"}); err != nil {
		t.Fatal(err)
	}
	owned := func(owner string) apikey.Key {
		t.Helper()
		k := apikey.New()
		if _, err := h.st.MintOwnedKey(h.ctx, store.NewOwnedKey{TenantID: tenant, OwnerRef: owner, Digest: k.Digest, Prefix: k.Prefix}, nil, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
		return k
	}
	ghost := owned("k8s:" + h.ns + "/ghost") // an ApiKey that does not exist
	untouchable := map[string]apikey.Key{
		"the admin CLI's (no owner)":           h.cliKey(tenant),
		"another tool's (owner terraform:…)":   owned("terraform:acme/key"),
		"an owner_ref the operator never made": owned("k8s:Not_A_Namespace/x"),
	}

	h.consistently(3*grace+time.Second, "while another replica leads", func() error {
		if !h.usable(ghost.Secret) {
			return fmt.Errorf("the orphan was revoked by an operator that does not lead")
		}
		return nil
	})
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(lease), lease); err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != "another-replica" {
		t.Fatalf("the Lease changed hands during the check (%v): %+v", err, lease.Spec)
	}

	if err := k8s.Delete(h.ctx, lease); err != nil { // the other replica is gone
		t.Fatal(err)
	}
	h.waitUsable(ghost.Secret, false, grace+20*time.Second)
	for name, k := range untouchable {
		if !h.usable(k.Secret) {
			t.Errorf("%s key was revoked by the orphan sweep", name)
		}
	}
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(lease), lease); err != nil || ptr.Deref(lease.Spec.HolderIdentity, "another-replica") == "another-replica" {
		t.Errorf("the sweep ran, yet this operator does not hold the Lease (%v): %+v", err, lease.Spec)
	}
}
