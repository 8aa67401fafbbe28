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
	"github.com/heraldhq/herald/internal/apikey"
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

func (r *ApiKeyReconciler) sync(ctx context.Context, key *notifyv1alpha1.ApiKey, prevReason string) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	now := time.Now()

	// The Tenant must exist, stay, and list this namespace; otherwise no key is kept.
	tenant := &notifyv1alpha1.Tenant{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: key.Spec.Tenant}, tenant); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("while reading Tenant %s: %w", key.Spec.Tenant, err)
		}
		return r.reject(ctx, key, prevReason, notifyv1alpha1.ReasonTenantNotFound,
			fmt.Sprintf("Tenant %q does not exist", key.Spec.Tenant))
	}
	switch {
	case !tenant.DeletionTimestamp.IsZero():
		return r.reject(ctx, key, prevReason, notifyv1alpha1.ReasonTenantDeleting,
			fmt.Sprintf("Tenant %q is being deleted", key.Spec.Tenant))
	case !tenant.AllowsNamespace(key.Namespace):
		return r.reject(ctx, key, prevReason, notifyv1alpha1.ReasonNamespaceNotAllowed,
			fmt.Sprintf("Tenant %q does not list namespace %q in spec.apiKeyNamespaces", key.Spec.Tenant, key.Namespace))
	}
	key.SetCondition(notifyv1alpha1.ConditionTenantAccepted, metav1.ConditionTrue, notifyv1alpha1.ReasonAccepted,
		fmt.Sprintf("Tenant %q lists namespace %q", key.Spec.Tenant, key.Namespace))
	if !tenant.IsInKeyStore() {
		key.SetCondition(notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantNotReady,
			fmt.Sprintf("waiting for Tenant %q to be written to the key store", key.Spec.Tenant))
		return ctrl.Result{RequeueAfter: tenantWait}, nil
	}

	secret, err := r.readSecret(ctx, key)
	if apierrors.IsForbidden(err) {
		return r.secretAccessDenied(key, prevReason, err)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	r.Secrets.Watch(key.Namespace)
	if secret != nil && !metav1.IsControlledBy(secret, key) {
		msg := fmt.Sprintf("Secret %q exists and is not owned by this ApiKey; choose another spec.secretName", secret.Name)
		key.SetAsFailed(notifyv1alpha1.ConditionReady, notifyv1alpha1.ReasonSecretConflict, msg)
		r.warnOnTransition(key, prevReason, notifyv1alpha1.ReasonSecretConflict, msg)
		return ctrl.Result{RequeueAfter: r.ResyncPeriod}, nil
	}

	owned, err := r.Store.KeysByOwner(ctx, key.OwnerRef())
	if err != nil {
		return r.unavailable(key, prevReason, err)
	}
	var current *store.OwnedKey
	secretValue := ""
	if secret != nil {
		secretValue = string(secret.Data[notifyv1alpha1.SecretKeyAPIKey])
		digest := apikey.Digest(secretValue)
		for i := range owned {
			if owned[i].Digest == digest && owned[i].TenantID == key.Spec.Tenant {
				current = &owned[i]
			}
		}
	}

	desired := store.KeyState{Label: key.Spec.Label, Disabled: key.Spec.Disabled}
	if key.Spec.ExpiresAt != nil {
		desired.ExpiresAt = &key.Spec.ExpiresAt.Time
	}

	// Decide whether a new key is needed: none yet, the clear key is lost (Secret deleted or altered, or
	// its key revoked in the key store), or a rotation was asked for.
	var (
		eventType, eventReason, why string
		revoke, retire              []string
	)
	switch {
	case current == nil && secret == nil && len(owned) == 0:
		eventType, eventReason, why = corev1.EventTypeNormal, "KeyMinted", "minted a new key"
	case current == nil:
		eventType, eventReason = corev1.EventTypeWarning, "KeyReplaced"
		if secret == nil {
			why = fmt.Sprintf("Secret %q was deleted", key.Spec.SecretName)
		} else {
			why = fmt.Sprintf("the key in Secret %q is not an active key of this ApiKey (the Secret was altered or the key revoked in the key store)", key.Spec.SecretName)
		}
		why += ": minted a new key and revoked the previous one"
		for _, k := range owned {
			revoke = append(revoke, k.ID)
		}
	case secret != nil && key.RotationDue(secret.Annotations[RotationAnnotation]):
		eventType, eventReason = corev1.EventTypeNormal, "KeyRotated"
		why = fmt.Sprintf("rotation %d: minted a new key; the previous key %s stays valid for %s, then is revoked",
			key.RotationGeneration(), current.Prefix, r.RotationGracePeriod)
		retire = []string{current.ID}
	}
	if why != "" {
		minted := apikey.New()
		k, err := r.Store.MintOwnedKey(ctx, store.NewOwnedKey{
			TenantID: key.Spec.Tenant, OwnerRef: key.OwnerRef(), Digest: minted.Digest, Prefix: minted.Prefix, State: desired,
		}, revoke, retire, now.Add(r.RotationGracePeriod))
		if err != nil {
			return r.unavailable(key, prevReason, err)
		}
		if owned, err = r.Store.KeysByOwner(ctx, key.OwnerRef()); err != nil {
			return r.unavailable(key, prevReason, err)
		}
		current, secretValue = &k, minted.Secret
		logger.Info(why, "prefix", k.Prefix)
		r.Recorder.Eventf(key, nil, eventType, eventReason, "Mint", "%s (prefix %s)", why, k.Prefix)
	}
	if err := r.writeSecret(ctx, key, secret, secretValue, current.Prefix); apierrors.IsForbidden(err) {
		return r.secretAccessDenied(key, prevReason, err)
	} else if err != nil {
		return ctrl.Result{}, err
	}

	// Keep every unrevoked key of this ApiKey equal to the spec: the current one exactly; the previous
	// ones (in their rotation grace period) with the same label and disabled flag and an expiry no later
	// than their grace period and the spec's, revoked once passed.
	requeue := r.ResyncPeriod
	repaired := false
	if current.State.Equal(desired) {
		// nothing to write
	} else if wrote, err := r.Store.SetKeyState(ctx, current.ID, desired); err != nil {
		return r.unavailable(key, prevReason, err)
	} else {
		repaired = repaired || wrote
	}
	var expired []string
	for _, k := range owned {
		if k.ID == current.ID {
			continue
		}
		limit := now.Add(r.RotationGracePeriod)
		exp := k.State.ExpiresAt
		if exp == nil || exp.After(limit) {
			exp = &limit
		}
		if desired.ExpiresAt != nil && desired.ExpiresAt.Before(*exp) {
			exp = desired.ExpiresAt
		}
		if !exp.After(now) {
			expired = append(expired, k.ID)
			continue
		}
		requeue = notifyv1alpha1.CheckAfter(now, *exp, requeue)
		want := store.KeyState{Label: desired.Label, Disabled: desired.Disabled, ExpiresAt: exp}
		if k.State.Equal(want) {
			continue
		}
		wrote, err := r.Store.SetKeyState(ctx, k.ID, want)
		if err != nil {
			return r.unavailable(key, prevReason, err)
		}
		repaired = repaired || wrote
	}
	if len(expired) > 0 {
		n, err := r.Store.RevokeKeys(ctx, expired)
		if err != nil {
			return r.unavailable(key, prevReason, err)
		}
		logger.Info("revoked previous keys after their rotation grace period", "revoked", n)
		r.Recorder.Eventf(key, nil, corev1.EventTypeNormal, "KeyRevoked", "Revoke",
			"revoked %d previous key(s) at the end of the rotation grace period", n)
	}
	if repaired {
		// The spec did not change since it was last reconciled, yet the key store differed: someone changed
		// it by hand. The cached copy may predate the status of the reconcile that synced this generation (a
		// reconcile queued behind it reads the cache before that status arrives): the API server says.
		observed := key.Status.ObservedGeneration
		if why == "" && observed != key.Generation {
			live := &notifyv1alpha1.ApiKey{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(key), live); err == nil && live.Generation == key.Generation {
				observed = live.Status.ObservedGeneration
			}
		}
		byHand := why == "" && observed == key.Generation
		logger.Info("brought the key store to the spec", "prefix", current.Prefix, "changedByHand", byHand,
			"observedGeneration", observed, "generation", key.Generation)
		if byHand {
			r.Recorder.Eventf(key, nil, corev1.EventTypeWarning, "KeyStoreRepaired", "Repair",
				"the key store differed from the spec (changed by hand?): repaired")
		}
	}

	key.Status.KeyPrefix = current.Prefix
	key.Status.SecretRef = &notifyv1alpha1.SecretKeyReference{Name: key.Spec.SecretName, Key: notifyv1alpha1.SecretKeyAPIKey}
	rotated := metav1.NewTime(current.CreatedAt.Truncate(time.Second))
	key.Status.LastRotationTime = &rotated
	key.Status.RotationGeneration = key.RotationGeneration()
	key.SetCondition(notifyv1alpha1.ConditionKeyStoreSynced, metav1.ConditionTrue, notifyv1alpha1.ReasonSynced,
		"the key store matches the spec")
	switch {
	case key.Spec.Disabled:
		key.SetCondition(notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonDisabled,
			"the key is disabled: it fails authentication")
	case key.IsExpired(metav1.NewTime(now)):
		key.SetCondition(notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonExpired,
			"the key expired at "+key.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	case tenant.Spec.Suspended:
		key.SetCondition(notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantSuspended,
			fmt.Sprintf("Tenant %q is suspended: the key fails authentication", key.Spec.Tenant))
	default:
		key.SetCondition(notifyv1alpha1.ConditionReady, metav1.ConditionTrue, notifyv1alpha1.ReasonKeyActive,
			fmt.Sprintf("key %s is active", current.Prefix))
		requeue = key.ExpiryCheckAfter(now, requeue)
	}
	key.Status.ObservedGeneration = key.Generation
	return ctrl.Result{RequeueAfter: requeue}, nil
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
