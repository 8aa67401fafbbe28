package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantSpec is what a platform team declares about a tenant: a third-party application that sends
// notifications through Herald. The Tenant's name is its id in the key store and in the API.
// The Secret of spec.bot's token must be in one of spec.apiKeyNamespaces: the operator reads Secrets only
// in the namespaces a Tenant lists, where a platform team granted it them.
//
// +kubebuilder:validation:XValidation:rule="!has(self.bot) || (has(self.apiKeyNamespaces) && self.bot.tokenSecretRef.namespace in self.apiKeyNamespaces)",message="bot.tokenSecretRef.namespace must be one of apiKeyNamespaces (the namespaces where the operator is granted Secrets)",fieldPath=".bot.tokenSecretRef.namespace"
type TenantSpec struct {
	// displayName is the developer name: the branding fallback ("A message from <displayName>") for keys
	// without a label.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[^\p{Cc}]+$`
	DisplayName string `json:"displayName"`

	// suspended makes every API key of the tenant fail authentication (401) within seconds, without
	// revoking them.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

	// developers are the messenger user ids allowed the /dev_* bot commands for this tenant.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:Minimum=1
	Developers []int64 `json:"developers,omitempty"`

	// apiKeyNamespaces are the namespaces whose ApiKeys may mint keys for this tenant.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ApiKeyNamespaces []string `json:"apiKeyNamespaces,omitempty"`

	// limits cap the tenant's share of the gateway. Each one left out takes the installation's default
	// (the ingress's HERALD_TENANT_* settings).
	// +optional
	Limits *TenantLimits `json:"limits,omitempty"`

	// bot is the tenant's own bot (spec v1-extensions §11): its notifications, links and verifications go
	// through it instead of the installation's shared bot. Without it the tenant uses the shared bot.
	// Adding it, changing it to another bot, or removing it ends the links made through the previous bot:
	// those users must link again.
	// +optional
	Bot *TenantBot `json:"bot,omitempty"`

	// quietHours are the tenant's quiet hours (spec v1-extensions §14): a daily window, read in each user's
	// time_zone (set through PATCH /v1/users) or else in timeZone, inside which a notification is held
	// until the window ends (mode hold) or delivered without a sound (mode silent). Sends at priority 7
	// and above ignore them unless they say quiet_hours "respect"; below 7, unless they say "ignore".
	// +optional
	QuietHours *TenantQuietHours `json:"quietHours,omitempty"`
}

// TenantQuietHours is a daily window of wall-clock time: [start, end), wrapping midnight when end is
// earlier than start (22:00-08:00). Daylight-saving changes follow the zone.
//
// +kubebuilder:validation:XValidation:rule="self.start != self.end",message="quietHours.start and quietHours.end must differ"
// +kubebuilder:validation:XValidation:rule="timestamp('2000-01-01T00:00:00Z').getHours(self.timeZone) >= 0",message="quietHours.timeZone must be an IANA time zone name, like Europe/Berlin",fieldPath=".timeZone"
type TenantQuietHours struct {
	// start of the window, HH:MM (24 hours) in the zone.
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`

	// end of the window, HH:MM (24 hours): the first minute outside it.
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	End string `json:"end"`

	// timeZone is the tenant's IANA time zone, for users without a time_zone of their own.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+/-]*$`
	TimeZone string `json:"timeZone"`

	// mode: hold (the notification waits in scheduled until the window ends) or silent (delivered at once
	// without a sound).
	// +optional
	// +kubebuilder:default=hold
	// +kubebuilder:validation:Enum=hold;silent
	Mode string `json:"mode,omitempty"`
}

// TenantBot is a tenant's own bot: where its token is, and how fast it may send.
type TenantBot struct {
	// tokenSecretRef is the key of a Secret that holds the bot's token, as @BotFather gives it. The Secret
	// must be in one of spec.apiKeyNamespaces. A change of the token (in the Secret, or another Secret)
	// registers the bot again.
	// +required
	TokenSecretRef BotTokenSecretReference `json:"tokenSecretRef"`

	// rateLimit is the bot's messages per second, for every worker together. Default: the workers'
	// HERALD_MESSENGER_RATE_LIMIT.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	RateLimit *int32 `json:"rateLimit,omitempty"`

	// paidBroadcast: sends past 30 per second carry the platform's allow_paid_broadcast, up to rateLimit
	// (the platform charges the bot's owner for them).
	// +optional
	PaidBroadcast bool `json:"paidBroadcast,omitempty"`
}

// BotTokenSecretReference names a key of a Secret.
type BotTokenSecretReference struct {
	// namespace of the Secret: one of spec.apiKeyNamespaces.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key in the Secret's data that holds the token.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// TenantLimits cap what one tenant may do, for the tenant as a whole however many ingress replicas serve
// it.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || !has(self.sendsPerSecond) || self.burst >= self.sendsPerSecond",message="burst must be at least sendsPerSecond"
type TenantLimits struct {
	// sendsPerSecond is how many notifications the tenant may have accepted per second (the items of a
	// batch count one by one). Default: HERALD_TENANT_SENDS_PER_SECOND (100).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	SendsPerSecond *int32 `json:"sendsPerSecond,omitempty"`

	// burst is how many sends may be accepted at once after a quiet period. Default: twice the rate.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Burst *int32 `json:"burst,omitempty"`

	// requestsPerSecond caps every other /v1 request (status, lists, link tokens, verification, …).
	// Default: HERALD_TENANT_REQUESTS_PER_SECOND (50).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	RequestsPerSecond *int32 `json:"requestsPerSecond,omitempty"`

	// deliveryWeight is the tenant's share of the bot's rate against other tenants with notifications
	// waiting in the same priority class: a tenant of weight 2 is served twice as often as one of weight 1.
	// Default: 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DeliveryWeight *int32 `json:"deliveryWeight,omitempty"`
}

// TenantStatus is what the operator observed.
type TenantStatus struct {
	// conditions: Ready, KeyStoreSynced, Suspended; BotReady with spec.bot.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation last reconciled successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// activeKeys counts the tenant's keys in the key store that are neither disabled, revoked nor expired
	// (keys minted by ApiKeys and by the admin CLI alike).
	// +optional
	ActiveKeys int32 `json:"activeKeys,omitempty"`

	// bot is the tenant's own bot that it sends through now; absent while it uses the shared bot. The
	// BotReady condition says whether spec.bot is this bot, registered and working.
	// +optional
	Bot *TenantBotStatus `json:"bot,omitempty"`

	// usage is what the tenant sent in about the last day, read from Herald's usage counts (GET /v1/usage,
	// herald usage): re-read at most once a minute, and written only when it changed.
	// +optional
	Usage *TenantUsageStatus `json:"usage,omitempty"`
}

// TenantUsageStatus counts the tenant's notifications over the whole UTC hours from since to now: the
// hour updatedAt is in and the 23 before it (between 23 and 24 hours).
type TenantUsageStatus struct {
	// accepted24h counts the sends (and batch items) accepted since since.
	// +required
	Accepted24h int64 `json:"accepted24h"`
	// delivered24h counts the notifications delivered since since (whenever they were accepted).
	// +required
	Delivered24h int64 `json:"delivered24h"`
	// since is the start of the first hour counted.
	// +required
	Since metav1.Time `json:"since"`
	// updatedAt is when the operator read these counts. It reads them again once a minute has passed, and
	// writes them (with a new updatedAt) only when they or since changed: since moves every hour.
	// +required
	UpdatedAt metav1.MicroTime `json:"updatedAt"`
}

// TenantBotStatus is a bot as the platform names it.
type TenantBotStatus struct {
	// id is the bot's numeric id on the platform (getMe), in decimal: its webhook is
	// HERALD_PUBLIC_URL/messenger/webhook/{id}.
	// +required
	ID string `json:"id"`
	// username is the bot's username, without @: the tenant's link tokens deep-link to it.
	// +required
	Username string `json:"username"`
}

// Tenant is a third-party application allowed to send notifications through Herald.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tnt,categories=herald
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (at most 63 characters: lowercase letters, digits and '-')"
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspended`
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.activeKeys`
// +kubebuilder:printcolumn:name="Accepted 24h",type=integer,JSONPath=`.status.usage.accepted24h`
// +kubebuilder:printcolumn:name="Delivered 24h",type=integer,JSONPath=`.status.usage.delivered24h`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Bot",type=string,JSONPath=`.status.bot.username`,priority=1
// +kubebuilder:printcolumn:name="Bot Ready",type=string,JSONPath=`.status.conditions[?(@.type=="BotReady")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Tenant struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantSpec `json:"spec"`
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
//
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Tenant{}, &TenantList{})
}
