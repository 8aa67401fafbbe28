package v1alpha1

import (
	"slices"
	"strconv"

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

// BotTokenSecret is the namespace/name of the Secret that holds the token of spec.bot; "" without one.
// The operator indexes Tenants by it, so that a change of the Secret wakes the Tenants naming it.
func (t *Tenant) BotTokenSecret() string {
	if t.Spec.Bot == nil {
		return ""
	}
	return t.Spec.Bot.TokenSecretRef.Namespace + "/" + t.Spec.Bot.TokenSecretRef.Name
}

// BotRateLimit is spec.bot.rateLimit, 0 for the workers' default.
func (t *Tenant) BotRateLimit() int {
	if t.Spec.Bot == nil || t.Spec.Bot.RateLimit == nil {
		return 0
	}
	return int(*t.Spec.Bot.RateLimit)
}

// SetBot records the own bot the tenant sends through now (id 0: the shared bot, status.bot absent).
func (t *Tenant) SetBot(id int64, username string) {
	if id == 0 {
		t.Status.Bot = nil
		return
	}
	t.Status.Bot = &TenantBotStatus{ID: strconv.FormatInt(id, 10), Username: username}
}

// SetBotReady records that spec.bot is registered and the tenant sends through it.
func (t *Tenant) SetBotReady(id int64, username string) {
	t.SetBot(id, username)
	t.SetCondition(ConditionBotReady, metav1.ConditionTrue, ReasonRegistered,
		"@"+username+" (bot "+strconv.FormatInt(id, 10)+") is registered: the tenant sends through it")
}

// SetBotNotReady records why spec.bot is not the working bot of the tenant: status Unknown for
// ReasonPlatformUnavailable (retried), False otherwise. status.bot is left as it is.
func (t *Tenant) SetBotNotReady(reason, message string) {
	status := metav1.ConditionFalse
	if reason == ReasonPlatformUnavailable {
		status = metav1.ConditionUnknown
	}
	t.SetCondition(ConditionBotReady, status, reason, message)
}

// ClearBot records that the tenant has no bot of its own: no status.bot, no BotReady.
func (t *Tenant) ClearBot() {
	t.Status.Bot = nil
	meta.RemoveStatusCondition(&t.Status.Conditions, ConditionBotReady)
}

// BotReadyReason is the reason of the BotReady condition, "" without one.
func (t *Tenant) BotReadyReason() string {
	if c := meta.FindStatusCondition(t.Status.Conditions, ConditionBotReady); c != nil {
		return c.Reason
	}
	return ""
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
