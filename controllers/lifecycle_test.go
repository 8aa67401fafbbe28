package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/controllers"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// linkVerifiedUser makes user a linked user of tenant with a verified phone, as the webhook would after a
// /start and a shared contact, with the link token it redeemed.
func (h *harness) linkVerifiedUser(tenant, user string, chatID int64) {
	h.t.Helper()
	h.fx.VerifiedUser(h.t, tenant, user, chatID, fixture.PhoneLast4("1234"))
	now := time.Now()
	h.fx.LinkToken(h.t, tenant, user, fixture.TokenLabel("Acme"), fixture.TokenExpiredAt(now), fixture.TokenUsedAt(now))
	if v, err := h.st.GetVerification(h.ctx, tenant, user); err != nil || v.Status != "verified" {
		h.t.Fatalf("setting up user %s: verification %+v, %v", user, v, err)
	}
}

func (h *harness) queueNotification(tenant, user string) string {
	h.t.Helper()
	return h.fx.Notification(h.t, fixture.For(tenant, user), fixture.Body("hi"))
}

// resumeTenant lifts the suspension of a tenant's row, as the purge of a deleted Tenant leaves it.
func (h *harness) resumeTenant(name string) {
	h.t.Helper()
	if err := h.st.SetTenantSuspended(h.ctx, name, false); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) deleteTenant(name string) {
	h.t.Helper()
	h.deleteAndWait(&notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// recreateTenant creates a Tenant of the same name as tn, with tn's spec, and waits until it is ready.
func (h *harness) recreateTenant(tn *notifyv1alpha1.Tenant) *notifyv1alpha1.Tenant {
	h.t.Helper()
	again := &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tn.Name}, Spec: tn.Spec}
	h.create(again)
	got := h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	if got.UID == tn.UID {
		h.t.Fatalf("the re-created Tenant has the old UID %s", tn.UID)
	}
	return got
}

// assertFreshTenant checks that the re-created tenant knows nothing of the old one's user, and works.
func (h *harness) assertFreshTenant(tenant, user string, oldKeys []string, queued string, key *notifyv1alpha1.ApiKey) {
	h.t.Helper()
	if v, err := h.st.GetVerification(h.ctx, tenant, user); !errors.Is(err, store.ErrNotFound) {
		h.t.Errorf("GetVerification(%s, %s) after the Tenant was re-created = %+v, %v; want not found", tenant, user, v, err)
	}
	if left := h.fx.EndUserRecords(h.t, tenant); left != 0 {
		h.t.Errorf("%d user, link, link token or verification rows of the old tenant left", left)
	}
	for _, k := range oldKeys {
		if h.usable(k) {
			h.t.Errorf("key %s of the old tenant authenticates for the new one", k[:apikey.PrefixLen])
		}
	}
	// A notification queued for the old tenant's user finds no link when a worker claims it: it ends
	// unlinked (worker: a tenant notification without chat), it never reaches the old chat.
	d, err := h.st.ClaimDelivery(h.ctx, queued, time.Minute)
	if err != nil {
		h.t.Fatalf("claiming the notification queued before the deletion: %v", err)
	}
	if d.ChatID != 0 {
		h.t.Errorf("the notification queued before the deletion would go to chat %d, want none", d.ChatID)
	}

	// The new tenant works: its ApiKey gets a new key, which authenticates, and the same user id can
	// start over.
	var fresh string
	wait.For(h.t, 10*time.Second, "a new key for the re-created tenant", func() error {
		got := h.getKey(key)
		if err := condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionReady, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive); err != nil {
			return err
		}
		fresh = h.secretKey(key)
		if !h.usable(fresh) {
			return fmt.Errorf("the key in the Secret (%s) does not authenticate", fresh[:apikey.PrefixLen])
		}
		return nil
	})
	tok := apikey.New()
	if _, err := h.st.CreateLinkToken(h.ctx, tenant, user, tok.Digest, "Acme"); err != nil {
		h.t.Fatalf("a link token for %s under the re-created tenant: %v", user, err)
	}
	if v, err := h.st.GetVerification(h.ctx, tenant, user); err != nil || v.Status != "unverified" {
		h.t.Errorf("the user starting over: verification %+v, %v; want unverified", v, err)
	}
}

// A Tenant deleted and re-created under the same name is a new tenant: the deletion revokes the keys and
// purges the users, their links, link tokens and verifications, so the new Tenant inherits none of them.
func TestARecreatedTenantInheritsNothingOfTheDeletedOne(t *testing.T) {
	h := start(t, operator.Options{})
	tn, key, old := h.activeKey()
	cli := h.cliKey(tn.Name)
	h.linkVerifiedUser(tn.Name, "user-1", 5001)
	queued := h.queueNotification(tn.Name, "user-1")
	tn = h.getTenant(tn.Name)

	h.deleteTenant(tn.Name)
	// The finalizer purged before the Tenant went.
	if _, err := h.st.GetVerification(h.ctx, tn.Name, "user-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetVerification after the Tenant went: %v, want not found", err)
	}
	h.waitEvent(tn, "Normal", "KeysRevoked", "removed 1 user(s)")

	h.recreateTenant(tn)
	h.assertFreshTenant(tn.Name, "user-1", []string{old, cli.Secret}, queued, key)
}

// Whatever outlived the deleted Tenant in the key store (its finalizer removed by hand, a namespace
// force-deleted, a request authenticated just before the keys were revoked) is purged when a Tenant of
// the same name appears: the key store records which Tenant object (UID) its row belongs to.
func TestARecreatedTenantPurgesWhatOutlivedTheDeletedOne(t *testing.T) {
	h := start(t, operator.Options{})
	tn, key, old := h.activeKey()
	tn = h.getTenant(tn.Name)
	h.deleteTenant(tn.Name)

	// Written after the purge, as if the Tenant had gone without it.
	h.resumeTenant(tn.Name)
	cli := h.cliKey(tn.Name)
	h.linkVerifiedUser(tn.Name, "user-1", 5001)
	queued := h.queueNotification(tn.Name, "user-1")
	if !h.usable(cli.Secret) {
		t.Fatal("setting up: the leftover key does not authenticate")
	}

	again := h.recreateTenant(tn)
	h.assertFreshTenant(tn.Name, "user-1", []string{old, cli.Secret}, queued, key)
	h.waitEvent(again, "Warning", "PreviousTenantPurged", "revoked 1 key(s), removed 1 user(s)")
}

// staleTenants answers Get for one Tenant with a copy the informer cache could still hold after the
// Tenant went: deletion requested, finalizer still on. Everything else goes to the API server.
type staleTenants struct {
	client.Client
	stale *notifyv1alpha1.Tenant
}

func (c staleTenants) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if t, ok := obj.(*notifyv1alpha1.Tenant); ok && key.Name == c.stale.Name {
		c.stale.DeepCopyInto(t)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// A reconcile of a deleted Tenant's stale cached copy (an ApiKey event can bring one after the finalizer
// went) must not purge again: by then the name may hold a re-created Tenant's first users. This is what
// made TestARecreatedTenantPurgesWhatOutlivedTheDeletedOne fail now and then (a foreign key error while
// it seeded a user between the purge and its stale repeat).
func TestAStaleCopyOfADeletedTenantPurgesNothing(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("acme")
	h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	stale := h.getTenant(tn.Name)
	h.deleteTenant(tn.Name)
	now := metav1.Now()
	stale.DeletionTimestamp = &now
	if !controllerutil.ContainsFinalizer(stale, controllers.Finalizer) {
		t.Fatalf("setting up: the live Tenant had no finalizer: %v", stale.Finalizers)
	}

	// What the same name holds after the real purge.
	h.resumeTenant(tn.Name)
	h.linkVerifiedUser(tn.Name, "user-1", 5001)

	rec := events.NewFakeRecorder(10)
	r := &controllers.TenantReconciler{Client: staleTenants{Client: k8s, stale: stale}, APIReader: k8s, Store: h.st, Recorder: rec}
	if _, err := r.Reconcile(h.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: tn.Name}}); err != nil {
		t.Fatalf("Reconcile of the stale copy: %v", err)
	}
	if v, err := h.st.GetVerification(h.ctx, tn.Name, "user-1"); err != nil || v.Status != "verified" {
		t.Errorf("after a reconcile of the deleted Tenant's stale copy, user-1's verification = %+v, %v; want it kept (verified)", v, err)
	}
	if n := len(rec.Events); n != 0 {
		t.Errorf("the stale copy's reconcile recorded %d event(s), want none: %s", n, <-rec.Events)
	}
}
