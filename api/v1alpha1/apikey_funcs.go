package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of the Secret an ApiKey's key is written to.
const (
	SecretKeyAPIKey = "apiKey"
	SecretKeyTenant = "tenant"
	SecretKeyPrefix = "prefix"
)

// OwnerRef is how the key store records that a key is managed by this ApiKey.
func (k *ApiKey) OwnerRef() string {
	return "k8s:" + k.Namespace + "/" + k.Name
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

// IsExpired reports whether spec.expiresAt has passed at now.
func (k *ApiKey) IsExpired(now metav1.Time) bool {
	return k.Spec.ExpiresAt != nil && !k.Spec.ExpiresAt.After(now.Time)
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
