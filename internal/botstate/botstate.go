// Package botstate is a tenant's bot's state (spec v1-extensions §11): whether the platform takes it, as
// data below the store. The registration (internal/bot), the operator (controllers) and a send that finds
// the token refused (internal/delivery/send) write it; the claim reads it (a refused bot's messages skip
// their waits). The CHECK constraint on bots.state holds the same list (TestStatesMatchTheSchema in
// internal/store).
package botstate

// State is a bot's state: whether it can send.
type State string

// The states of a bot.
const (
	Ready         State = "ready"          // registered: getMe and setWebhook succeeded
	TokenInvalid  State = "token_invalid"  // the platform refused the token (getMe, or a send's 401)
	WebhookFailed State = "webhook_failed" // the platform refused setWebhook, or the webhook was deleted
)

// States lists every state.
var States = []State{Ready, TokenInvalid, WebhookFailed}

// SQL is s as a SQL literal.
func (s State) SQL() string { return "'" + string(s) + "'" }
