package v1alpha1

// Condition types. Ready summarises; the others say which part is not.
const (
	// ConditionReady is True when the object is reflected in the key store and its keys can authenticate.
	ConditionReady = "Ready"
	// ConditionKeyStoreSynced is True when the key store (PostgreSQL) matches the spec.
	ConditionKeyStoreSynced = "KeyStoreSynced"
	// ConditionSuspended mirrors spec.suspended on a Tenant.
	ConditionSuspended = "Suspended"
	// ConditionTenantAccepted is True when an ApiKey's Tenant exists and lists the ApiKey's namespace.
	ConditionTenantAccepted = "TenantAccepted"
	// ConditionBotReady is True when a Tenant's own bot (spec.bot) is registered with the platform and the
	// tenant sends through it; absent without spec.bot.
	ConditionBotReady = "BotReady"
)

// Condition reasons.
const (
	ReasonSynced              = "Synced"
	ReasonKeyStoreUnavailable = "KeyStoreUnavailable"
	ReasonSuspended           = "Suspended"
	ReasonActive              = "Active"
	ReasonAccepted            = "Accepted"
	ReasonTenantNotFound      = "TenantNotFound"
	ReasonTenantDeleting      = "TenantDeleting"
	ReasonTenantNotReady      = "TenantNotReady"
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	ReasonSecretConflict      = "SecretConflict"
	ReasonSecretAccessDenied  = "SecretAccessDenied"
	ReasonKeyActive           = "KeyActive"
	ReasonDisabled            = "Disabled"
	ReasonExpired             = "Expired"
	ReasonTenantSuspended     = "TenantSuspended"
	// ReasonInvalidQuietHours: spec.quietHours passed the CRD's validation but not the operator's (a zone
	// the API server knows and the operator's zone database does not); the key store keeps the tenant's
	// previous hours.
	ReasonInvalidQuietHours = "InvalidQuietHours"
	// The reasons of BotReady: Registered when True; the others when False (NotConfigured: the operator
	// lacks HERALD_BOT_TOKEN_KEY or HERALD_PUBLIC_URL), or Unknown (PlatformUnavailable: retried with
	// backoff). SecretAccessDenied serves BotReady too.
	ReasonRegistered          = "Registered"
	ReasonTokenInvalid        = "TokenInvalid"
	ReasonWebhookFailed       = "WebhookFailed"
	ReasonSecretNotFound      = "SecretNotFound"
	ReasonNotConfigured       = "NotConfigured"
	ReasonPlatformUnavailable = "PlatformUnavailable"
	// ReasonConflictingSettings: another Tenant sends through the bot the token names with other settings
	// (rateLimit, paidBroadcast); a bot's settings are the bot's, so this Tenant does not take it up (or,
	// already on it, does not change them) until they agree.
	ReasonConflictingSettings = "ConflictingSettings"
)
