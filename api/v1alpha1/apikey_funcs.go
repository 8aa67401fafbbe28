package v1alpha1

import (
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Keys of the Secret an ApiKey's key is written to.
const (
	SecretKeyAPIKey = "apiKey"
	SecretKeyTenant = "tenant"
	SecretKeyPrefix = "prefix"
)

// OwnerRefPrefix starts the owner_ref of every key the operator manages in the key store; keys made with
// the admin CLI have none (NULL).
const OwnerRefPrefix = "k8s:"

// expiryMargin is how long after an expiry the operator looks at a key again, so that the expiry has
// passed when it does.
const expiryMargin = 100 * time.Millisecond

// OwnerRef is how the key store records that a key is managed by this ApiKey.
func (k *ApiKey) OwnerRef() string {
	return OwnerRefPrefix + k.Namespace + "/" + k.Name
}

// ParseOwnerRef is OwnerRef's inverse: the namespace and name of the ApiKey that manages a key. ok is
// false for anything OwnerRef cannot have written (no prefix, names that are not valid Kubernetes names),
// so such keys are never mistaken for keys of an ApiKey.
func ParseOwnerRef(ref string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(ref, OwnerRefPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, "/")
	if !found || len(validation.IsDNS1123Label(namespace)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}

// SecretNameOrDefault is spec.secretName, or the default the operator writes there: the ApiKey's name.
func (k *ApiKey) SecretNameOrDefault() string {
	if k.Spec.SecretName != "" {
		return k.Spec.SecretName
	}
	return k.Name
}

// RotationGeneration is spec.rotation.generation, 0 without a rotation block.
func (k *ApiKey) RotationGeneration() int64 {
	if k.Spec.Rotation == nil {
		return 0
	}
	return k.Spec.Rotation.Generation
}

// RotationDue reports whether spec.rotation asks for a newer key than the one minted for the rotation
// generation recorded (the Secret's annotation, as written by FormatRotation). A missing or unreadable
// record counts as current: no rotation is started on a guess.
func (k *ApiKey) RotationDue(recorded string) bool {
	g, err := strconv.ParseInt(recorded, 10, 64)
	return err == nil && k.RotationGeneration() > g
}

// FormatRotation is the record of the rotation generation the current key was minted for.
func (k *ApiKey) FormatRotation() string {
	return strconv.FormatInt(k.RotationGeneration(), 10)
}

// IsExpired reports whether spec.expiresAt has passed at now.
func (k *ApiKey) IsExpired(now metav1.Time) bool {
	return k.Spec.ExpiresAt != nil && !k.Spec.ExpiresAt.After(now.Time)
}

// ExpiryCheckAfter is how long after now the operator should look at the key again so that its expiry
// shows within limit: just after spec.expiresAt, never later than limit. It is limit for a key without
// expiry or already expired.
func (k *ApiKey) ExpiryCheckAfter(now time.Time, limit time.Duration) time.Duration {
	if k.Spec.ExpiresAt == nil || !k.Spec.ExpiresAt.After(now) {
		return limit
	}
	return CheckAfter(now, k.Spec.ExpiresAt.Time, limit)
}

// CheckAfter is how long after now to look again for something due at `at` to have happened: just after
// at, and never later than limit. It is positive when limit is, also for an `at` further away than a
// Duration reaches (at.Sub saturates; adding the margin to it must not wrap around).
func CheckAfter(now, at time.Time, limit time.Duration) time.Duration {
	d := max(at.Sub(now), 0)
	if d >= limit-expiryMargin {
		return limit
	}
	return d + expiryMargin
}

// SetCondition sets one condition for the current generation; LastTransitionTime changes only when the
// status does.
func (k *ApiKey) SetCondition(condType string, status metav1.ConditionStatus, reason, message string) {
	setCondition(&k.Status.Conditions, k.Generation, condType, status, reason, message)
}

// SetAsRejected records that the Tenant does not accept this ApiKey (missing, deleting, or not listing
// the namespace): no key is kept.
func (k *ApiKey) SetAsRejected(reason, message string) {
	k.SetCondition(ConditionTenantAccepted, metav1.ConditionFalse, reason, message)
	k.SetCondition(ConditionReady, metav1.ConditionFalse, reason, message)
	k.Status.KeyPrefix = ""
	k.Status.SecretRef = nil
	k.Status.LastRotationTime = nil
}

// SetAsFailed records a failed reconcile; observedGeneration is left alone.
func (k *ApiKey) SetAsFailed(condType, reason, message string) {
	k.SetCondition(condType, metav1.ConditionFalse, reason, message)
	k.SetCondition(ConditionReady, metav1.ConditionFalse, reason, message)
}
