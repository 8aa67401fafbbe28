package controllers

// An ApiKey's reconcile, step by step (sync): the Tenant accepts it (acceptingTenant), its Secret is read
// and owned, a key is minted when one is needed (mintDecision, mint), the key store is kept to the spec
// (keepToSpec, reportRepair), and the status says what is now true (setSynced).

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/store"
)

func (r *ApiKeyReconciler) sync(ctx context.Context, key *notifyv1alpha1.ApiKey, prevReason string) (ctrl.Result, error) {
	now := time.Now()
	tenant, res, err := r.acceptingTenant(ctx, key, prevReason)
	if tenant == nil {
		return res, err
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

	m := r.mintDecision(key, secret, owned, current)
	if m.why != "" {
		k, secretNow, err := r.mint(ctx, key, m, desired, now)
		if err != nil {
			return r.unavailable(key, prevReason, err)
		}
		if owned, err = r.Store.KeysByOwner(ctx, key.OwnerRef()); err != nil {
			return r.unavailable(key, prevReason, err)
		}
		current, secretValue = &k, secretNow
		log.FromContext(ctx).Info(m.why, "prefix", k.Prefix)
		r.Recorder.Eventf(key, nil, m.eventType, m.eventReason, "Mint", "%s (prefix %s)", m.why, k.Prefix)
	}
	if err := r.writeSecret(ctx, key, secret, secretValue, current.Prefix); apierrors.IsForbidden(err) {
		return r.secretAccessDenied(key, prevReason, err)
	} else if err != nil {
		return ctrl.Result{}, err
	}

	requeue, repaired, err := r.keepToSpec(ctx, key, current, owned, desired, now)
	if err != nil {
		return r.unavailable(key, prevReason, err)
	}
	if repaired {
		r.reportRepair(ctx, key, m.why != "", current.Prefix)
	}
	return ctrl.Result{RequeueAfter: setSynced(key, tenant, current, now, requeue)}, nil
}

// acceptingTenant is the ApiKey's Tenant when it exists, stays, lists this namespace and is in the key
// store; otherwise nil, with what the reconcile returns (no key is kept for a Tenant that refuses it).
func (r *ApiKeyReconciler) acceptingTenant(ctx context.Context, key *notifyv1alpha1.ApiKey, prevReason string) (*notifyv1alpha1.Tenant, ctrl.Result, error) {
	tenant := &notifyv1alpha1.Tenant{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: key.Spec.Tenant}, tenant); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, ctrl.Result{}, fmt.Errorf("while reading Tenant %s: %w", key.Spec.Tenant, err)
		}
		res, err := r.reject(ctx, key, prevReason, notifyv1alpha1.ReasonTenantNotFound,
			fmt.Sprintf("Tenant %q does not exist", key.Spec.Tenant))
		return nil, res, err
	}
	switch {
	case !tenant.DeletionTimestamp.IsZero():
		res, err := r.reject(ctx, key, prevReason, notifyv1alpha1.ReasonTenantDeleting,
			fmt.Sprintf("Tenant %q is being deleted", key.Spec.Tenant))
		return nil, res, err
	case !tenant.AllowsNamespace(key.Namespace):
		res, err := r.reject(ctx, key, prevReason, notifyv1alpha1.ReasonNamespaceNotAllowed,
			fmt.Sprintf("Tenant %q does not list namespace %q in spec.apiKeyNamespaces", key.Spec.Tenant, key.Namespace))
		return nil, res, err
	}
	key.SetCondition(notifyv1alpha1.ConditionTenantAccepted, metav1.ConditionTrue, notifyv1alpha1.ReasonAccepted,
		fmt.Sprintf("Tenant %q lists namespace %q", key.Spec.Tenant, key.Namespace))
	if !tenant.IsInKeyStore() {
		key.SetCondition(notifyv1alpha1.ConditionReady, metav1.ConditionFalse, notifyv1alpha1.ReasonTenantNotReady,
			fmt.Sprintf("waiting for Tenant %q to be written to the key store", key.Spec.Tenant))
		return nil, ctrl.Result{RequeueAfter: tenantWait}, nil
	}
	return tenant, ctrl.Result{}, nil
}

// minting is a decision to mint a new key: why (empty: none is needed), the event that says so, and the
// keys it revokes at once or retires after the rotation grace period.
type minting struct {
	eventType, eventReason, why string
	revoke, retire              []string
}

// mintDecision decides whether a new key is needed: none yet, the clear key is lost (Secret deleted or
// altered, or its key revoked in the key store), or a rotation was asked for.
func (r *ApiKeyReconciler) mintDecision(key *notifyv1alpha1.ApiKey, secret *corev1.Secret, owned []store.OwnedKey, current *store.OwnedKey) minting {
	var m minting
	switch {
	case current == nil && secret == nil && len(owned) == 0:
		m.eventType, m.eventReason, m.why = corev1.EventTypeNormal, "KeyMinted", "minted a new key"
	case current == nil:
		m.eventType, m.eventReason = corev1.EventTypeWarning, "KeyReplaced"
		if secret == nil {
			m.why = fmt.Sprintf("Secret %q was deleted", key.Spec.SecretName)
		} else {
			m.why = fmt.Sprintf("the key in Secret %q is not an active key of this ApiKey (the Secret was altered or the key revoked in the key store)", key.Spec.SecretName)
		}
		m.why += ": minted a new key and revoked the previous one"
		for _, k := range owned {
			m.revoke = append(m.revoke, k.ID)
		}
	case secret != nil && key.RotationDue(secret.Annotations[RotationAnnotation]):
		m.eventType, m.eventReason = corev1.EventTypeNormal, "KeyRotated"
		m.why = fmt.Sprintf("rotation %d: minted a new key; the previous key %s stays valid for %s, then is revoked",
			key.RotationGeneration(), current.Prefix, r.RotationGracePeriod)
		m.retire = []string{current.ID}
	}
	return m
}

// mint mints the key m decided on and records it in the key store, revoking and retiring as m says; it
// returns the new key and its clear value, for the Secret.
func (r *ApiKeyReconciler) mint(ctx context.Context, key *notifyv1alpha1.ApiKey, m minting, desired store.KeyState, now time.Time) (store.OwnedKey, string, error) {
	minted := apikey.New()
	k, err := r.Store.MintOwnedKey(ctx, store.NewOwnedKey{
		TenantID: key.Spec.Tenant, OwnerRef: key.OwnerRef(), Digest: minted.Digest, Prefix: minted.Prefix, State: desired,
	}, m.revoke, m.retire, now.Add(r.RotationGracePeriod))
	if err != nil {
		return k, "", err
	}
	return k, minted.Secret, nil
}

// keepToSpec keeps every unrevoked key of this ApiKey equal to the spec: the current one exactly; the
// previous ones (in their rotation grace period) with the same label and disabled flag and an expiry no
// later than their grace period and the spec's, revoked once passed. It returns when to look again and
// whether it had to write anything.
func (r *ApiKeyReconciler) keepToSpec(ctx context.Context, key *notifyv1alpha1.ApiKey, current *store.OwnedKey, owned []store.OwnedKey,
	desired store.KeyState, now time.Time) (requeue time.Duration, repaired bool, err error) {
	requeue = r.ResyncPeriod
	if !current.State.Equal(desired) {
		wrote, err := r.Store.SetKeyState(ctx, current.ID, desired)
		if err != nil {
			return 0, false, err
		}
		repaired = wrote
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
			return 0, false, err
		}
		repaired = repaired || wrote
	}
	if len(expired) > 0 {
		n, err := r.Store.RevokeKeys(ctx, expired)
		if err != nil {
			return 0, false, err
		}
		log.FromContext(ctx).Info("revoked previous keys after their rotation grace period", "revoked", n)
		r.Recorder.Eventf(key, nil, corev1.EventTypeNormal, "KeyRevoked", "Revoke",
			"revoked %d previous key(s) at the end of the rotation grace period", n)
	}
	return requeue, repaired, nil
}

// reportRepair logs that the key store was brought to the spec and, when nothing was minted and the spec
// did not change since it was last reconciled, warns that someone changed the key store by hand.
func (r *ApiKeyReconciler) reportRepair(ctx context.Context, key *notifyv1alpha1.ApiKey, minted bool, prefix string) {
	// The cached copy may predate the status of the reconcile that synced this generation (a reconcile
	// queued behind it reads the cache before that status arrives): the API server says.
	observed := key.Status.ObservedGeneration
	if !minted && observed != key.Generation {
		live := &notifyv1alpha1.ApiKey{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(key), live); err == nil && live.Generation == key.Generation {
			observed = live.Status.ObservedGeneration
		}
	}
	byHand := !minted && observed == key.Generation
	log.FromContext(ctx).Info("brought the key store to the spec", "prefix", prefix, "changedByHand", byHand,
		"observedGeneration", observed, "generation", key.Generation)
	if byHand {
		r.Recorder.Eventf(key, nil, corev1.EventTypeWarning, "KeyStoreRepaired", "Repair",
			"the key store differed from the spec (changed by hand?): repaired")
	}
}

// setSynced records in the status the key now current and whether it authenticates, and returns when to
// look again (at the latest requeue; sooner when the key expires before).
func setSynced(key *notifyv1alpha1.ApiKey, tenant *notifyv1alpha1.Tenant, current *store.OwnedKey, now time.Time, requeue time.Duration) time.Duration {
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
	return requeue
}
