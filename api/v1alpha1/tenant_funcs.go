package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AllowsNamespace reports whether ApiKeys in namespace ns may mint keys for this tenant.
func (t *Tenant) AllowsNamespace(ns string) bool {
	return slices.Contains(t.Spec.ApiKeyNamespaces, ns)
}

// KeyStoreDevelopers is spec.developers as the key store keeps it: sorted, each id once (the list is a
// set), never nil.
func (t *Tenant) KeyStoreDevelopers() []int64 {
	devs := slices.Clone(t.Spec.Developers)
	if devs == nil {
		devs = []int64{}
	}
	slices.Sort(devs)
	return slices.Compact(devs)
}

// IsInKeyStore reports whether the operator has written the tenant to the key store at least once (a
// generation was reconciled successfully), so keys can reference it. The row is never deleted, so this
// stays true through a later key store outage.
func (t *Tenant) IsInKeyStore() bool {
	return t.Status.ObservedGeneration > 0
}

// SetCondition sets one condition for the current generation; LastTransitionTime changes only when the
// status does.
func (t *Tenant) SetCondition(condType string, status metav1.ConditionStatus, reason, message string) {
	setCondition(&t.Status.Conditions, t.Generation, condType, status, reason, message)
}

// SetAsSynced records a successful reconcile: the key store matches the spec.
func (t *Tenant) SetAsSynced(activeKeys int32) {
	t.Status.ActiveKeys = activeKeys
	t.SetCondition(ConditionKeyStoreSynced, metav1.ConditionTrue, ReasonSynced, "the tenant is up to date in the key store")
	if t.Spec.Suspended {
		t.SetCondition(ConditionSuspended, metav1.ConditionTrue, ReasonSuspended, "every key of the tenant fails authentication")
		t.SetCondition(ConditionReady, metav1.ConditionFalse, ReasonSuspended, "the tenant is suspended: every key of the tenant fails authentication")
	} else {
		t.SetCondition(ConditionSuspended, metav1.ConditionFalse, ReasonActive, "the tenant is not suspended")
		t.SetCondition(ConditionReady, metav1.ConditionTrue, ReasonSynced, "the tenant is up to date in the key store")
	}
	t.Status.ObservedGeneration = t.Generation
}

// SetAsFailed records a failed reconcile; observedGeneration is left alone.
func (t *Tenant) SetAsFailed(reason, message string) {
	t.SetCondition(ConditionKeyStoreSynced, metav1.ConditionFalse, reason, message)
	t.SetCondition(ConditionReady, metav1.ConditionFalse, reason, message)
}

func setCondition(conds *[]metav1.Condition, generation int64, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: generation,
	})
}
