// Package audit is who changed what a tenant configures or holds (v1 extensions §15): the event types, the
// actors, and the actor of a change, carried by its context from the path that makes it — the tenant API
// (the key), the admin CLI, the operator, the user in the chat — down to the store, which appends the event
// in the transaction of the change. The store renders the types into its SQL; the schema's CHECK lists the
// same (TestStatesMatchTheSchema). It stays below the store.
package audit

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Type is the type of an audit event.
type Type string

// The event types of §15.
const (
	APIKeyCreated         Type = "api_key.created"
	APIKeyRevoked         Type = "api_key.revoked"
	TenantUpdated         Type = "tenant.updated" // limits, developer name, suspension, bot, quiet hours; never a token
	CallbackCreated       Type = "callback.created"
	CallbackDeleted       Type = "callback.deleted"
	CallbackSecretRotated Type = "callback.secret_rotated"
	TemplateSaved         Type = "template.saved"
	TemplateDeleted       Type = "template.deleted"
	UserOptedOut          Type = "user.opted_out" // by the tenant or the user
	UserOptedIn           Type = "user.opted_in"  // by the tenant or the user
	UserErased            Type = "user.erased"
)

// Types lists every event type, in the contract's order.
var Types = []Type{APIKeyCreated, APIKeyRevoked, TenantUpdated, CallbackCreated, CallbackDeleted,
	CallbackSecretRotated, TemplateSaved, TemplateDeleted, UserOptedOut, UserOptedIn, UserErased}

// ParseType returns the type named s.
func ParseType(s string) (Type, bool) {
	if i := slices.Index(Types, Type(s)); i >= 0 {
		return Types[i], true
	}
	return "", false
}

// TypeNames lists the types, for messages.
func TypeNames() string {
	names := make([]string, len(Types))
	for i, t := range Types {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// The actors that are not a key.
const (
	Operator = "operator"  // the operator's reconcilers (a Tenant's or an ApiKey's spec)
	AdminCLI = "admin_cli" // herald tenant …, herald apikey …
	User     = "user"      // the end user, in the chat
	// Unknown is the actor of a change whose path named none: a test, or a developer tool, calling the store
	// directly. Every product path names its actor (the tests of each path hold it to that).
	Unknown = "unknown"
)

// APIKeyPrefix starts the actor of a change made through the tenant API: "api_key:<key id>".
const APIKeyPrefix = "api_key:"

// APIKey is the actor of a change made through the tenant API with the key id.
func APIKey(id string) string { return APIKeyPrefix + id }

type actorKey struct{}

// WithActor is ctx carrying the actor of the changes made with it.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf is the actor ctx carries, Unknown when none.
func ActorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return Unknown
}

// Event is one audited change. Details name what changed — never a secret, a token, a phone number or a
// message body.
type Event struct {
	ID       int64          `json:"id"`
	TenantID string         `json:"tenant_id,omitempty"` // herald audit only; the tenant API's answer is the caller's
	Type     Type           `json:"type"`
	Actor    string         `json:"actor"`
	Target   string         `json:"target"`
	At       time.Time      `json:"at"`
	Details  map[string]any `json:"details"`
}

// Retention is how long events are kept (§15).
const Retention = 400 * 24 * time.Hour
