package controllers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/controllers"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/testing/wait"
)

func TestApiKeyMintsAKeyIntoAnOwnedSecretAndOnlyItsDigestIntoTheKeyStore(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("acme")
	key := h.apiKey("billing", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "Acme Billing" })
	got := h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)

	if got.Spec.SecretName != "billing" {
		t.Errorf("spec.secretName defaulted to %q, want the ApiKey's name", got.Spec.SecretName)
	}
	if !controllerutil.ContainsFinalizer(got, controllers.Finalizer) {
		t.Errorf("finalizers %v", got.Finalizers)
	}
	s := h.secret(got)
	value := string(s.Data["apiKey"])
	if !apikey.LooksValid(value) {
		t.Fatalf("Secret apiKey %q is not a Herald key", value)
	}
	if string(s.Data["tenant"]) != tn.Name || string(s.Data["prefix"]) != value[:apikey.PrefixLen] {
		t.Errorf("Secret data tenant=%q prefix=%q", s.Data["tenant"], s.Data["prefix"])
	}
	if !metav1.IsControlledBy(s, got) {
		t.Errorf("Secret owner references %+v, want the ApiKey as controller", s.OwnerReferences)
	}
	if s.Labels[controllers.ManagedByLabel] != controllers.ManagedByValue {
		t.Errorf("Secret labels %v", s.Labels)
	}

	r := h.keyRow(value) // looked up by digest: the clear key is not stored
	if r.TenantID != tn.Name || r.Prefix != value[:apikey.PrefixLen] || r.Label == nil || *r.Label != "Acme Billing" ||
		r.OwnerRef == nil || *r.OwnerRef != "k8s:"+h.ns+"/billing" || r.Disabled || r.ExpiresAt != nil || r.RevokedAt != nil {
		t.Errorf("key row %+v", r)
	}
	clearRows := 0
	for _, k := range h.fx.APIKeys(t) {
		if strings.Contains(k.Prefix, value) || (k.Label != nil && strings.Contains(*k.Label, value)) {
			clearRows++
		}
	}
	if clearRows != 0 {
		t.Errorf("the clear key appears in the key store (%d rows)", clearRows)
	}
	if !h.usable(value) {
		t.Error("the minted key does not authenticate")
	}
	// The audit trail (§15): the Tenant's row and the key are the operator's, and name no key.
	events, _, err := h.st.AuditEvents(h.ctx, tn.Name, nil, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, e := range events {
		trail = append(trail, string(e.Type)+" "+e.Actor+" "+e.Target)
		if d := fmt.Sprint(e.Details); strings.Contains(d, value) || strings.Contains(d, r.Prefix) {
			t.Errorf("event %s's details name the key: %s", e.Type, d)
		}
	}
	if want := []string{"api_key.created operator " + r.ID, "tenant.updated operator " + tn.Name}; !slices.Equal(trail, want) {
		t.Errorf("the audit trail %q, want %q", trail, want)
	}

	st := got.Status
	if st.KeyPrefix != r.Prefix || st.SecretRef == nil || *st.SecretRef != (notifyv1alpha1.SecretKeyReference{Name: "billing", Key: "apiKey"}) ||
		st.LastRotationTime == nil || st.ObservedGeneration != got.Generation {
		t.Errorf("status %+v", st)
	}
	for _, c := range []string{notifyv1alpha1.ConditionTenantAccepted, notifyv1alpha1.ConditionKeyStoreSynced} {
		reason := map[string]string{notifyv1alpha1.ConditionTenantAccepted: notifyv1alpha1.ReasonAccepted, notifyv1alpha1.ConditionKeyStoreSynced: notifyv1alpha1.ReasonSynced}[c]
		if err := condition(st.Conditions, got.Generation, c, metav1.ConditionTrue, reason); err != nil {
			t.Error(err)
		}
	}
	h.waitEvent(got, "Normal", "KeyMinted", "minted a new key (prefix "+r.Prefix+")")

	// An explicit secretName is used as is.
	other := h.apiKey("other", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.SecretName = "other-credentials" })
	other = h.waitKey(other, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	if !h.usable(h.secretKey(other)) || other.Status.SecretRef.Name != "other-credentials" {
		t.Errorf("custom secretName: status %+v", other.Status)
	}
}

func TestApiKeyIsRejectedWithoutATenantThatListsItsNamespace(t *testing.T) {
	h := start(t, operator.Options{})

	// A missing Tenant: Ready=False, a Warning event, no Secret, no key; creating the Tenant fixes it.
	missing := h.apiKey("early", "later-"+h.suffix)
	got := h.waitKey(missing, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantNotFound)
	if err := condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionTenantAccepted, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantNotFound); err != nil {
		t.Error(err)
	}
	h.waitEvent(got, "Warning", notifyv1alpha1.ReasonTenantNotFound, `Tenant "later-`+h.suffix+`" does not exist`)
	if got.Status.ObservedGeneration != 0 || got.Status.KeyPrefix != "" {
		t.Errorf("a rejected ApiKey reports observedGeneration %d and prefix %q", got.Status.ObservedGeneration, got.Status.KeyPrefix)
	}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "early"}, &corev1.Secret{}); !isNotFound(err) {
		t.Errorf("Secret of a rejected ApiKey: %v, want NotFound", err)
	}
	if n := len(h.fx.APIKeys(t)); n != 0 {
		t.Errorf("%d keys in the key store, want 0", n)
	}

	// A Tenant that does not list the namespace.
	elsewhere := h.tenant("later", func(tn *notifyv1alpha1.Tenant) { tn.Spec.ApiKeyNamespaces = []string{"somewhere-else"} })
	got = h.waitKey(missing, metav1.ConditionFalse, notifyv1alpha1.ReasonNamespaceNotAllowed)
	h.waitEvent(got, "Warning", notifyv1alpha1.ReasonNamespaceNotAllowed,
		fmt.Sprintf("Tenant %q does not list namespace %q in spec.apiKeyNamespaces", elsewhere.Name, h.ns))

	// Listing the namespace lets the key be minted.
	update(h, h.getTenant(elsewhere.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.ApiKeyNamespaces = append(tn.Spec.ApiKeyNamespaces, h.ns) })
	got = h.waitKey(missing, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	secret := h.secretKey(got)
	if !h.usable(secret) {
		t.Fatal("key not usable once the Tenant lists the namespace")
	}

	// Un-listing the namespace again revokes the key.
	update(h, h.getTenant(elsewhere.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.ApiKeyNamespaces = []string{"somewhere-else"} })
	h.waitKey(missing, metav1.ConditionFalse, notifyv1alpha1.ReasonNamespaceNotAllowed)
	h.waitUsable(secret, false, 5*time.Second)
}

func TestApiKeyChangesReachTheKeyStoreWithinSeconds(t *testing.T) {
	h := start(t, operator.Options{})
	_, key, secret := h.activeKey()
	future := metav1.NewTime(time.Now().Add(48 * time.Hour).Truncate(time.Second))

	steps := []struct {
		name   string
		mutate func(*notifyv1alpha1.ApiKey)
		reason string
		check  func(keyRow) error
	}{
		{"label", func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "Acme Shop" }, notifyv1alpha1.ReasonKeyActive, func(r keyRow) error {
			if r.Label == nil || *r.Label != "Acme Shop" {
				return fmt.Errorf("label %v", r.Label)
			}
			return nil
		}},
		{"label removed", func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "" }, notifyv1alpha1.ReasonKeyActive, func(r keyRow) error {
			if r.Label != nil {
				return fmt.Errorf("label %q, want NULL (the Tenant's displayName brands)", *r.Label)
			}
			return nil
		}},
		{"disabled", func(k *notifyv1alpha1.ApiKey) { k.Spec.Disabled = true }, notifyv1alpha1.ReasonDisabled, func(r keyRow) error {
			if !r.Disabled {
				return fmt.Errorf("not disabled")
			}
			return nil
		}},
		{"enabled", func(k *notifyv1alpha1.ApiKey) { k.Spec.Disabled = false }, notifyv1alpha1.ReasonKeyActive, func(r keyRow) error {
			if r.Disabled {
				return fmt.Errorf("still disabled")
			}
			return nil
		}},
		{"expiry", func(k *notifyv1alpha1.ApiKey) { k.Spec.ExpiresAt = &future }, notifyv1alpha1.ReasonKeyActive, func(r keyRow) error {
			if r.ExpiresAt == nil || !r.ExpiresAt.Equal(future.Time) {
				return fmt.Errorf("expires_at %v, want %v", r.ExpiresAt, future)
			}
			return nil
		}},
		{"expiry removed", func(k *notifyv1alpha1.ApiKey) { k.Spec.ExpiresAt = nil }, notifyv1alpha1.ReasonKeyActive, func(r keyRow) error {
			if r.ExpiresAt != nil {
				return fmt.Errorf("expires_at %v, want NULL", r.ExpiresAt)
			}
			return nil
		}},
	}
	for _, s := range steps {
		update(h, h.getKey(key), s.mutate)
		wait.For(h.t, 5*time.Second, s.name+" in the key store", func() error { return s.check(h.keyRow(secret)) })
		got := h.waitKey(key, map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[s.reason == notifyv1alpha1.ReasonKeyActive], s.reason)
		if got.Status.ObservedGeneration != got.Generation {
			t.Errorf("%s: observedGeneration %d, generation %d", s.name, got.Status.ObservedGeneration, got.Generation)
		}
		if h.secretKey(key) != secret {
			t.Fatalf("%s minted a new key", s.name)
		}
	}

	// An expiry a moment away: the key stops working then, and Ready turns False by itself.
	soon := metav1.NewTime(time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second))
	update(h, h.getKey(key), func(k *notifyv1alpha1.ApiKey) { k.Spec.ExpiresAt = &soon })
	h.waitUsable(secret, true, 2*time.Second)
	h.waitUsable(secret, false, 6*time.Second)
	h.waitKey(key, metav1.ConditionFalse, notifyv1alpha1.ReasonExpired)
}

func TestDeletingAnApiKeyRevokesItsKeysBeforeItGoes(t *testing.T) {
	h := start(t, operator.Options{})
	_, key, secret := h.activeKey()

	h.deleteAndWait(key)
	if r := h.keyRow(secret); r.RevokedAt == nil {
		t.Error("the key was not revoked before the ApiKey went")
	}
	if h.usable(secret) {
		t.Error("the key of a deleted ApiKey still authenticates")
	}
}

func TestALostOrAlteredSecretGetsANewKeyAndTheOldOneIsRevoked(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("acme")
	key := h.apiKey("app", tn.Name)
	got := h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	first := h.secretKey(key)

	// Deleted Secret.
	if err := k8s.Delete(h.ctx, h.secret(key)); err != nil {
		t.Fatal(err)
	}
	var second string
	wait.For(h.t, 10*time.Second, "a new Secret with a new key", func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "app"}, s); err != nil {
			return err
		}
		if second = string(s.Data["apiKey"]); second == first {
			return fmt.Errorf("same key")
		}
		return nil
	})
	h.waitUsable(second, true, 5*time.Second)
	if r := h.keyRow(first); r.RevokedAt == nil {
		t.Error("the key of the deleted Secret was not revoked")
	}
	h.waitEvent(got, "Warning", "KeyReplaced", `Secret "app" was deleted: minted a new key and revoked the previous one`)
	wait.For(h.t, 5*time.Second, "status shows the new prefix", func() error {
		if p := h.getKey(key).Status.KeyPrefix; p != second[:apikey.PrefixLen] {
			return fmt.Errorf("keyPrefix %q", p)
		}
		return nil
	})

	// Altered key in the Secret.
	update(h, h.secret(key), func(s *corev1.Secret) { s.Data["apiKey"] = []byte(apikey.New().Secret) })
	var third string
	wait.For(h.t, 10*time.Second, "the altered key replaced", func() error {
		third = h.secretKey(key)
		if third == second || !h.usable(third) {
			return fmt.Errorf("Secret holds %s, usable=%v", third[:apikey.PrefixLen], h.usable(third))
		}
		return nil
	})
	if r := h.keyRow(second); r.RevokedAt == nil {
		t.Error("the key replaced in the Secret was not revoked")
	}
	h.waitEvent(got, "Warning", "KeyReplaced", "is not an active key of this ApiKey")

	// Other fields of the Secret are repaired without a new key.
	update(h, h.secret(key), func(s *corev1.Secret) { s.Data["tenant"] = []byte("someone-else"); delete(s.Data, "prefix") })
	wait.For(h.t, 10*time.Second, "Secret fields repaired", func() error {
		s := h.secret(key)
		if string(s.Data["tenant"]) != tn.Name || string(s.Data["prefix"]) != third[:apikey.PrefixLen] {
			return fmt.Errorf("data tenant=%q prefix=%q", s.Data["tenant"], s.Data["prefix"])
		}
		return nil
	})
	if h.secretKey(key) != third {
		t.Error("repairing the Secret's other fields minted a new key")
	}
}

func TestASecretNotOwnedByTheApiKeyIsLeftAlone(t *testing.T) {
	h := start(t, operator.Options{})
	tn := h.tenant("acme")
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "taken"}, StringData: map[string]string{"password": "hunter2"}})
	key := h.apiKey("app", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.SecretName = "taken" })

	got := h.waitKey(key, metav1.ConditionFalse, notifyv1alpha1.ReasonSecretConflict)
	h.waitEvent(got, "Warning", notifyv1alpha1.ReasonSecretConflict, `Secret "taken" exists and is not owned by this ApiKey`)
	s := h.secret(got)
	if string(s.Data["password"]) != "hunter2" || len(s.Data) != 1 {
		t.Errorf("the foreign Secret was changed: %v", s.Data)
	}
	if n := len(h.fx.APIKeys(t)); n != 0 {
		t.Errorf("%d keys minted, want 0", n)
	}
}

func TestRotationKeepsTheOldKeyForTheGracePeriodThenRevokesIt(t *testing.T) {
	const grace = 3 * time.Second
	h := start(t, operator.Options{RotationGracePeriod: grace, ResyncPeriod: time.Minute})
	tn := h.tenant("acme")
	key := h.apiKey("app", tn.Name)
	before := h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	old := h.secretKey(key)

	time.Sleep(1100 * time.Millisecond) // lastRotationTime has a one-second resolution
	rotatedAt := time.Now()
	update(h, h.getKey(key), func(k *notifyv1alpha1.ApiKey) { k.Spec.Rotation = &notifyv1alpha1.Rotation{Generation: 1} })
	var fresh string
	wait.For(h.t, 5*time.Second, "a new key in the Secret", func() error {
		if fresh = h.secretKey(key); fresh == old {
			return fmt.Errorf("same key")
		}
		return nil
	})
	if !h.usable(fresh) || !h.usable(old) {
		t.Fatalf("during the grace period: new usable=%v, old usable=%v; want both", h.usable(fresh), h.usable(old))
	}
	r := h.keyRow(old)
	if r.ExpiresAt == nil || r.ExpiresAt.Sub(rotatedAt) > grace+time.Second || r.ExpiresAt.Before(rotatedAt) {
		t.Errorf("old key expires at %v, want about %v", r.ExpiresAt, rotatedAt.Add(grace))
	}
	if s := h.secret(key); s.Annotations[controllers.RotationAnnotation] != "1" {
		t.Errorf("Secret annotations %v", s.Annotations)
	}
	got := h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	if got.Status.RotationGeneration != 1 || got.Status.KeyPrefix != fresh[:apikey.PrefixLen] ||
		got.Status.LastRotationTime == nil || !got.Status.LastRotationTime.After(before.Status.LastRotationTime.Time) {
		t.Errorf("status after rotation %+v (before: %v)", got.Status, before.Status.LastRotationTime)
	}
	h.waitEvent(got, "Normal", "KeyRotated", "rotation 1: minted a new key; the previous key "+old[:apikey.PrefixLen]+" stays valid for 3s")

	// After the grace period: the old key fails and is revoked (the reconciler wakes up for it, long
	// before the one-minute resync), the new one works.
	h.waitUsable(old, false, grace+2*time.Second)
	wait.For(h.t, 3*time.Second, "old key revoked", func() error {
		if h.keyRow(old).RevokedAt == nil {
			return fmt.Errorf("not revoked")
		}
		return nil
	})
	if !h.usable(fresh) {
		t.Error("the new key stopped working")
	}
	h.waitEvent(got, "Normal", "KeyRevoked", "revoked 1 previous key(s) at the end of the rotation grace period")
}

func TestKeyStoreDriftIsRepairedOnResync(t *testing.T) {
	h := start(t, operator.Options{ResyncPeriod: time.Second})
	tn := h.tenant("acme", func(tn *notifyv1alpha1.Tenant) { tn.Spec.Developers = []int64{1} })
	key := h.apiKey("app", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "Acme" })
	got := h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	secret := h.secretKey(key)

	// Hand edits of the key row: disabled flipped, label changed, an expiry added.
	h.exec(`UPDATE api_keys SET disabled = true, label = 'Mallory', expires_at = now() + interval '1 day' WHERE digest = $1`, digestOf(secret))
	wait.For(h.t, 5*time.Second, "key row repaired", func() error {
		r := h.keyRow(secret)
		if r.Disabled || r.Label == nil || *r.Label != "Acme" || r.ExpiresAt != nil {
			return fmt.Errorf("row %+v", r)
		}
		return nil
	})
	h.waitEvent(got, "Warning", "KeyStoreRepaired", "changed by hand")

	// Hand edits of the tenant row.
	h.exec(`UPDATE tenants SET suspended = true, developer_name = 'Evil', developers = '{666}' WHERE id = $1`, tn.Name)
	h.waitTenantRow(tn.Name, tenantRow{DeveloperName: "Acme Corp", Developers: []int64{1}})

	// A key revoked by hand cannot come back: a new one is minted into the Secret.
	h.exec(`UPDATE api_keys SET revoked_at = now() WHERE digest = $1`, digestOf(secret))
	wait.For(h.t, 5*time.Second, "a new key replaces the revoked one", func() error {
		if s := h.secretKey(key); s == secret || !h.usable(s) {
			return fmt.Errorf("Secret still holds %s", s[:apikey.PrefixLen])
		}
		return nil
	})
	h.waitEvent(got, "Warning", "KeyReplaced", "is not an active key of this ApiKey")
}

func TestASteadyStateMakesNoWrites(t *testing.T) {
	const resync = time.Second
	h := start(t, operator.Options{ResyncPeriod: resync})
	tn := h.tenant("acme", func(tn *notifyv1alpha1.Tenant) { tn.Spec.Developers = []int64{3, 1, 2} })
	keyA := h.apiKey("a", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "A" })
	future := metav1.NewTime(time.Now().Add(time.Hour))
	keyB := h.apiKey("b", tn.Name, func(k *notifyv1alpha1.ApiKey) { k.Spec.Disabled = true; k.Spec.ExpiresAt = &future })
	h.waitKey(keyA, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	h.waitKey(keyB, metav1.ConditionFalse, notifyv1alpha1.ReasonDisabled)
	h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	wait.For(h.t, 5*time.Second, "activeKeys settles", func() error {
		if n := h.getTenant(tn.Name).Status.ActiveKeys; n != 1 {
			return fmt.Errorf("activeKeys %d", n)
		}
		return nil
	})

	type snapshot struct {
		rv     map[string]string
		rows   string
		events int
	}
	take := func() snapshot {
		s := snapshot{rv: map[string]string{}}
		s.rv["tenant"] = h.getTenant(tn.Name).ResourceVersion
		for _, k := range []*notifyv1alpha1.ApiKey{keyA, keyB} {
			s.rv["apikey/"+k.Name] = h.getKey(k).ResourceVersion
			s.rv["secret/"+k.Name] = h.secret(k).ResourceVersion
		}
		// xmin changes with every row version: it proves no UPDATE happened, even one writing equal values.
		rows, err := h.st.Pool().Query(h.ctx, `
SELECT 'tenant:' || xmin::text || ':' || updated_at::text FROM tenants
UNION ALL SELECT 'key:' || xmin::text || ':' || updated_at::text FROM api_keys
UNION ALL SELECT 'audit_events:' || count(*)::text FROM audit_events ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		s.rows = strings.Join(vals, ",")
		s.events = len(h.events(keyA)) + len(h.events(keyB)) + len(h.events(h.getTenant(tn.Name)))
		return s
	}
	time.Sleep(2 * resync) // let the last status writes' own reconciles pass
	before := take()
	reconciles := reconcileCount(t)
	time.Sleep(4 * resync)
	after := take()

	// Three objects resynced every second for four seconds: about twelve reconciles.
	if n := reconcileCount(t) - reconciles; n < 8 {
		t.Fatalf("only %.0f reconciles in %s: the resync is not running, the test proves nothing", n, 4*resync)
	}
	for k, v := range before.rv {
		if after.rv[k] != v {
			t.Errorf("%s: resourceVersion %s -> %s in a steady state", k, v, after.rv[k])
		}
	}
	if before.rows != after.rows {
		t.Errorf("key store rows changed in a steady state:\n before %s\n after  %s", before.rows, after.rows)
	}
	if before.events != after.events {
		t.Errorf("%d events emitted in a steady state", after.events-before.events)
	}
}

func TestAKeyStoreOutageIsReportedAndRecoveredFrom(t *testing.T) {
	h := start(t, operator.Options{ResyncPeriod: time.Second})
	tn, key, secret := h.activeKey()
	generation := h.getKey(key).Generation

	admin := strings.Replace(h.dbURL, h.dbName()+"?", "postgres?", 1)
	conn, err := pgx.Connect(h.ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(h.ctx) }) // after up(), registered below
	down := func() {
		t.Helper()
		for _, q := range []string{
			`ALTER DATABASE "` + h.dbName() + `" ALLOW_CONNECTIONS false`,
			`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '` + h.dbName() + `'`,
		} {
			if _, err := conn.Exec(h.ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	up := func() {
		t.Helper()
		if _, err := conn.Exec(h.ctx, `ALTER DATABASE "`+h.dbName()+`" ALLOW_CONNECTIONS true`); err != nil {
			t.Fatal(err)
		}
	}
	down()
	t.Cleanup(up)

	update(h, h.getKey(key), func(k *notifyv1alpha1.ApiKey) { k.Spec.Label = "During the outage" })
	update(h, h.getTenant(tn.Name), func(tn *notifyv1alpha1.Tenant) { tn.Spec.DisplayName = "Acme During" })
	var got *notifyv1alpha1.ApiKey
	wait.For(h.t, 10*time.Second, "KeyStoreUnavailable on the ApiKey", func() error {
		got = h.getKey(key)
		if err := condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionKeyStoreSynced, metav1.ConditionFalse, notifyv1alpha1.ReasonKeyStoreUnavailable); err != nil {
			return err
		}
		return condition(got.Status.Conditions, got.Generation, notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonKeyStoreUnavailable)
	})
	if got.Status.ObservedGeneration != generation {
		t.Errorf("observedGeneration moved to %d during the outage, want %d (only on success)", got.Status.ObservedGeneration, generation)
	}
	h.waitEvent(got, "Warning", notifyv1alpha1.ReasonKeyStoreUnavailable, "the key store is unavailable")
	wait.For(h.t, 10*time.Second, "KeyStoreUnavailable on the Tenant", func() error {
		tnNow := h.getTenant(tn.Name)
		return condition(tnNow.Status.Conditions, tnNow.Generation, notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonKeyStoreUnavailable)
	})

	up()
	got = h.waitKey(key, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d after recovery, want %d", got.Status.ObservedGeneration, got.Generation)
	}
	h.waitTenant(tn.Name, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced)
	if r := h.keyRow(secret); r.Label == nil || *r.Label != "During the outage" {
		t.Errorf("label after recovery %v", r.Label)
	}
	if h.secretKey(key) != secret {
		t.Error("the outage caused a new key")
	}
	h.waitTenantRow(tn.Name, tenantRow{DeveloperName: "Acme During", Developers: []int64{}})
}

func (h *harness) dbName() string {
	rest := h.dbURL[strings.LastIndex(h.dbURL, "/")+1:]
	name, _, _ := strings.Cut(rest, "?")
	return name
}

func digestOf(secret string) []byte {
	d := apikey.Digest(secret)
	return d[:]
}
