package controllers

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/store"
)

const (
	// ManagedByLabel marks the Secrets the operator writes; the operator watches only Secrets carrying it.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value.
	ManagedByValue = "herald-operator"
	// RotationAnnotation on a Secret records the spec.rotation.generation its key was minted for.
	RotationAnnotation = "notify.herald.dev/rotation-generation"

	tenantField = "spec.tenant"
	// tenantWait is how often an ApiKey waiting for its Tenant to reach the key store looks again (the
	// Tenant's status change normally wakes it first).
	tenantWait = 5 * time.Second
	// accessWait is how often an ApiKey whose Secret the operator may not touch looks again, so that a
	// RoleBinding added by a platform team takes effect soon (a change of the ApiKey wakes it at once).
	accessWait = 30 * time.Second
)

// ApiKeyReconciler mints the key of an ApiKey into a Secret and keeps its digest, and the columns
// authentication reads, in the key store.
type ApiKeyReconciler struct {
	Client client.Client
	// APIReader reads Secrets uncached: the Secret must be current when deciding to mint (a stale cache
	// would rotate twice) and may have lost the label the cache selects on.
	APIReader client.Reader
	Store     *store.Store
	Recorder  recorder.EventRecorder
	// Secrets watches the key Secrets of each namespace the operator could read a Secret in.
	Secrets *SecretWatcher
	// RotationGracePeriod is how long the previous key keeps working after a rotation.
	RotationGracePeriod time.Duration
	// ResyncPeriod is how often a reconciled ApiKey is checked again, to repair the key store.
	ResyncPeriod time.Duration
}

// +kubebuilder:rbac:groups=notify.herald.dev,resources=apikeys,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=notify.herald.dev,resources=apikeys/status,verbs=patch
// +kubebuilder:rbac:groups=notify.herald.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups=notify.herald.dev,resources=tenants,verbs=get;list;watch
// Secrets are not in the operator's ClusterRole: the ClusterRole herald-operator-secrets holds what it
// needs on them, and a platform team binds it in each namespace a Tenant lists (a RoleBinding), so the
// operator can touch no Secret elsewhere.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update,roleName=herald-operator-secrets
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the Secret and the key store to the ApiKey's spec.
func (r *ApiKeyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = audit.WithActor(ctx, audit.Operator)
	key := &notifyv1alpha1.ApiKey{}
	if err := r.Client.Get(ctx, req.NamespacedName, key); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if deleting, err := finalize(ctx, r.Client, r.APIReader, key, r.revokeKeys); deleting {
		return ctrl.Result{}, err
	}
	if err := ensureFinalizer(ctx, r.Client, key, defaultSecretName); err != nil {
		return ctrl.Result{}, err
	}

	orig := key.DeepCopy()
	result, err := r.sync(ctx, key, readyReason(orig))
	if !equality.Semantic.DeepEqual(orig.Status, key.Status) {
		if perr := r.Client.Status().Patch(ctx, key, client.MergeFrom(orig)); perr != nil && err == nil {
			err = fmt.Errorf("while updating the status: %w", perr)
		}
	}
	// controller-runtime logs a returned error and retries with backoff.
	return result, err
}

// defaultSecretName writes the default of spec.secretName into the spec, where it then stays (immutable).
func defaultSecretName(key *notifyv1alpha1.ApiKey) bool {
	if key.Spec.SecretName != "" {
		return false
	}
	key.Spec.SecretName = key.SecretNameOrDefault()
	return true
}

func readyReason(key *notifyv1alpha1.ApiKey) string {
	if c := meta.FindStatusCondition(key.Status.Conditions, notifyv1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// reject records that the Tenant does not accept this ApiKey and revokes whatever key it had.
func (r *ApiKeyReconciler) reject(ctx context.Context, key *notifyv1alpha1.ApiKey, prevReason, reason, msg string) (ctrl.Result, error) {
	n, err := r.Store.RevokeOwnerKeys(ctx, key.OwnerRef())
	if err != nil {
		return r.unavailable(key, prevReason, err)
	}
	if n > 0 {
		msg = fmt.Sprintf("%s: revoked %d key(s)", msg, n)
	}
	key.SetAsRejected(reason, msg)
	r.warnOnTransition(key, prevReason, reason, msg)
	return ctrl.Result{RequeueAfter: r.ResyncPeriod}, nil
}

// unavailable records a key store outage; the error makes controller-runtime retry with backoff.
func (r *ApiKeyReconciler) unavailable(key *notifyv1alpha1.ApiKey, prevReason string, err error) (ctrl.Result, error) {
	msg := "the key store is unavailable: " + err.Error()
	key.SetAsFailed(notifyv1alpha1.ConditionKeyStoreSynced, notifyv1alpha1.ReasonKeyStoreUnavailable, msg)
	r.warnOnTransition(key, prevReason, notifyv1alpha1.ReasonKeyStoreUnavailable, msg)
	return ctrl.Result{}, fmt.Errorf("while reconciling ApiKey %s/%s into the key store: %w", key.Namespace, key.Name, err)
}

// secretAccessDenied records that the operator may not read or write Secrets in the ApiKey's namespace: a
// platform team must grant it (docs/operator.md, "Permissions"). Nothing is minted or revoked; the
// ApiKey is looked at again after accessWait (the resync period if shorter), and at once when it or its
// Tenant changes.
func (r *ApiKeyReconciler) secretAccessDenied(key *notifyv1alpha1.ApiKey, prevReason string, err error) (ctrl.Result, error) {
	r.Secrets.Forget(key.Namespace)
	msg := fmt.Sprintf("the operator may not read or write Secrets in namespace %q: bind the ClusterRole herald-operator-secrets "+
		"(<release>-operator-secrets with the Helm chart) to its ServiceAccount there with a RoleBinding (%v)", key.Namespace, err)
	key.SetAsFailed(notifyv1alpha1.ConditionReady, notifyv1alpha1.ReasonSecretAccessDenied, msg)
	r.warnOnTransition(key, prevReason, notifyv1alpha1.ReasonSecretAccessDenied, msg)
	return ctrl.Result{RequeueAfter: min(accessWait, r.ResyncPeriod)}, nil
}

// warnOnTransition emits a Warning event when Ready takes a new reason, not at every retry: a steady
// state makes no writes.
func (r *ApiKeyReconciler) warnOnTransition(key *notifyv1alpha1.ApiKey, prevReason, reason, msg string) {
	if prevReason != reason {
		r.Recorder.Eventf(key, nil, corev1.EventTypeWarning, reason, "Reconcile", "%s", msg)
	}
}

func (r *ApiKeyReconciler) readSecret(ctx context.Context, key *notifyv1alpha1.ApiKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Spec.SecretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("while reading Secret %s/%s: %w", key.Namespace, key.Spec.SecretName, err)
	}
	return secret, nil
}

// writeSecret creates the Secret or brings it to what it should hold; it writes only when it differs.
func (r *ApiKeyReconciler) writeSecret(ctx context.Context, key *notifyv1alpha1.ApiKey, secret *corev1.Secret, value, prefix string) error {
	create := secret == nil
	if create {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Spec.SecretName}, Type: corev1.SecretTypeOpaque}
	}
	orig := secret.DeepCopy()
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[ManagedByLabel] = ManagedByValue
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[RotationAnnotation] = key.FormatRotation()
	data := map[string][]byte{
		notifyv1alpha1.SecretKeyAPIKey: []byte(value),
		notifyv1alpha1.SecretKeyTenant: []byte(key.Spec.Tenant),
		notifyv1alpha1.SecretKeyPrefix: []byte(prefix),
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	maps.Copy(secret.Data, data)
	if err := controllerutil.SetControllerReference(key, secret, r.Client.Scheme()); err != nil {
		return fmt.Errorf("while setting the owner of Secret %s: %w", secret.Name, err)
	}
	if create {
		if err := r.Client.Create(ctx, secret); err != nil {
			return fmt.Errorf("while creating Secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		return nil
	}
	if equality.Semantic.DeepEqual(orig, secret) {
		return nil
	}
	if err := r.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("while updating Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

func (r *ApiKeyReconciler) revokeKeys(ctx context.Context, key *notifyv1alpha1.ApiKey) error {
	n, err := r.Store.RevokeOwnerKeys(ctx, key.OwnerRef())
	if err != nil {
		return fmt.Errorf("while revoking the keys of deleted ApiKey %s/%s: %w", key.Namespace, key.Name, err)
	}
	log.FromContext(ctx).Info("ApiKey deleted: keys revoked", "revoked", n)
	r.Recorder.Eventf(key, nil, corev1.EventTypeNormal, "KeysRevoked", "Delete", "ApiKey deleted: revoked %d key(s) in the key store", n)
	return nil
}

// SetupWithManager registers the reconciler: ApiKeys, the Secrets they own (through r.Secrets, namespace
// by namespace), and their Tenants.
func (r *ApiKeyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts ControllerOptions) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &notifyv1alpha1.ApiKey{}, tenantField, func(obj client.Object) []string {
		return []string{obj.(*notifyv1alpha1.ApiKey).Spec.Tenant}
	}); err != nil {
		return fmt.Errorf("while indexing ApiKeys by tenant: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&notifyv1alpha1.ApiKey{}).
		WatchesRawSource(source.Channel(r.Secrets.Events(), handler.EnqueueRequestForOwner(
			mgr.GetScheme(), mgr.GetRESTMapper(), &notifyv1alpha1.ApiKey{}, handler.OnlyControllerOwner()))).
		Watches(&notifyv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.keysOfTenant)).
		WithOptions(opts.controller(1)).
		Named("apikey").
		Complete(r)
}

func (r *ApiKeyReconciler) keysOfTenant(ctx context.Context, obj client.Object) []reconcile.Request {
	var keys notifyv1alpha1.ApiKeyList
	if err := r.Client.List(ctx, &keys, client.MatchingFields{tenantField: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "while listing the ApiKeys of a Tenant", "tenant", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(keys.Items))
	for _, k := range keys.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&k)})
	}
	return reqs
}
