package controllers_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/testing/rbactest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// The operator runs as its ServiceAccount with the RBAC of config/rbac: it may touch Secrets only in the
// namespaces where a RoleBinding grants it the ClusterRole herald-operator-secrets, and it still works
// there, watch included; elsewhere the ApiKey says what to do.
func TestTheOperatorTouchesSecretsOnlyWhereGranted(t *testing.T) {
	id := rbactest.Install(t, k8s, restConfig, "herald-op-"+randomSuffix())
	// An hour: whatever happens within the test comes from watches, not from the periodic resync.
	h := start(t, operator.Options{RestConfig: id.Config, ResyncPeriod: time.Hour})
	id.GrantSecrets(h.ns)
	denied := "denied-" + h.suffix
	h.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: denied}})
	t.Cleanup(func() { _ = k8s.Delete(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: denied}}) })

	for _, c := range []struct {
		verb, ns string
		want     bool
	}{
		{"list", "", false}, {"watch", "", false}, {"get", "", false},
		{"get", "kube-system", false}, {"list", "kube-system", false},
		{"get", denied, false}, {"create", denied, false},
		{"get", h.ns, true}, {"list", h.ns, true}, {"watch", h.ns, true}, {"create", h.ns, true}, {"update", h.ns, true},
		{"delete", h.ns, false},
	} {
		where := "every namespace"
		if c.ns != "" {
			where = "namespace " + c.ns
		}
		if got := id.Can(c.verb, "", "secrets", c.ns); got != c.want {
			t.Errorf("the operator may %s Secrets in %s: %v, want %v", c.verb, where, got, c.want)
		}
	}

	tn := h.tenant("acme", func(tn *notifyv1alpha1.Tenant) { tn.Spec.ApiKeyNamespaces = []string{h.ns, denied} })
	granted := h.apiKey("app", tn.Name)
	h.waitKey(granted, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
	first := h.secretKey(granted)
	if !h.usable(first) {
		t.Fatal("the key in the Secret does not authenticate")
	}

	refused := &notifyv1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: denied, Name: "app"}, Spec: notifyv1alpha1.ApiKeySpec{Tenant: tn.Name}}
	h.create(refused)
	t.Cleanup(func() {
		_ = k8s.Delete(h.ctx, refused)
		wait.For(h.t, 10*time.Second, "ApiKey in "+denied+" gone", func() error {
			if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(refused), refused); !isNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})
	got := h.waitKey(refused, metav1.ConditionFalse, notifyv1alpha1.ReasonSecretAccessDenied)
	h.waitEvent(got, corev1.EventTypeWarning, notifyv1alpha1.ReasonSecretAccessDenied, "bind the ClusterRole herald-operator-secrets")
	if keys, err := h.st.KeysByOwner(h.ctx, got.OwnerRef()); err != nil || len(keys) != 0 {
		t.Errorf("keys minted for an ApiKey whose Secret cannot be written: %d (%v)", len(keys), err)
	}

	// The Secret deleted: the namespace's watch wakes the ApiKey, which mints a new key into a new Secret.
	if err := k8s.Delete(h.ctx, h.secret(granted)); err != nil {
		t.Fatal(err)
	}
	wait.For(h.t, 10*time.Second, "a new key in a new Secret", func() error {
		s := &corev1.Secret{}
		if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: granted.Name}, s); err != nil {
			return err
		}
		if k := string(s.Data[notifyv1alpha1.SecretKeyAPIKey]); k == "" || k == first || !h.usable(k) {
			return fmt.Errorf("the Secret holds no new working key")
		}
		return nil
	})
	h.waitEvent(granted, corev1.EventTypeWarning, "KeyReplaced", "was deleted")

	// Granted later: the next reconcile of the ApiKey (here: at once, as it changes) mints its key.
	id.GrantSecrets(denied)
	update(h, refused, func(k *notifyv1alpha1.ApiKey) { k.Labels = map[string]string{"touched": "yes"} })
	h.waitKey(refused, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive)
}
