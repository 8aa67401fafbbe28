package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApiKeySpec declares one API key of a tenant. The operator mints the key, writes it to a Secret in the
// ApiKey's namespace and keeps only its SHA-256 digest in the key store.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.secretName) || has(self.secretName)",message="secretName cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.rotation) || (has(self.rotation) && self.rotation.generation >= oldSelf.rotation.generation)",message="rotation.generation may only increase"
type ApiKeySpec struct {
	// tenant is the name of the Tenant the key belongs to. The Tenant must list this namespace in
	// spec.apiKeyNamespaces.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tenant is immutable"
	Tenant string `json:"tenant"`

	// label is the branding label of messages sent with this key ("A message from <label>"); without it,
	// the Tenant's displayName is used.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[^\p{Cc}]+$`
	Label string `json:"label,omitempty"`

	// disabled makes the key fail authentication (401) within seconds, without revoking it.
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// expiresAt is when the key stops authenticating. Unset: it does not expire.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// secretName is the Secret, in the ApiKey's namespace, that receives the key. Defaults to the ApiKey's
	// name; immutable once set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="secretName is immutable"
	SecretName string `json:"secretName,omitempty"`

	// rotation requests new keys.
	// +optional
	Rotation *Rotation `json:"rotation,omitempty"`
}

// Rotation requests a new key whenever generation increases.
type Rotation struct {
	// generation: increase it to mint a new key. The previous key keeps working for the operator's
	// rotation grace period (--rotation-grace-period, 24h by default), then is revoked.
	// +required
	// +kubebuilder:validation:Minimum=0
	Generation int64 `json:"generation"`
}

// SecretKeyReference names the Secret, and the key in it, that holds an API key.
type SecretKeyReference struct {
	// name of the Secret in the ApiKey's namespace.
	// +required
	Name string `json:"name"`
	// key in the Secret's data that holds the API key.
	// +required
	Key string `json:"key"`
}

// ApiKeyStatus is what the operator observed.
type ApiKeyStatus struct {
	// conditions: Ready, TenantAccepted, KeyStoreSynced.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// keyPrefix is the first characters of the current key, to recognise it (the key itself is only in
	// the Secret).
	// +optional
	KeyPrefix string `json:"keyPrefix,omitempty"`

	// secretRef is where the current key is.
	// +optional
	SecretRef *SecretKeyReference `json:"secretRef,omitempty"`

	// lastRotationTime is when the current key was minted.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty"`

	// rotationGeneration is the spec.rotation.generation the current key was minted for.
	// +optional
	RotationGeneration int64 `json:"rotationGeneration,omitempty"`
}

// ApiKey is an API key of a Tenant, delivered as a Secret in the ApiKey's namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=hak,categories=herald
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.spec.tenant`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.status.keyPrefix`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretRef.name`,priority=1
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Rotated",type=date,JSONPath=`.status.lastRotationTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ApiKey struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ApiKeySpec `json:"spec"`
	// +optional
	Status ApiKeyStatus `json:"status,omitempty"`
}

// ApiKeyList is a list of ApiKeys.
//
// +kubebuilder:object:root=true
type ApiKeyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApiKey `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ApiKey{}, &ApiKeyList{})
}
