package notification

import (
	"encoding/json"
	"math/rand/v2"
	"time"

	"github.com/heraldhq/herald/internal/quiet"
)

// Delivery is a notification a worker has claimed: everything it needs to send it.
type Delivery struct {
	TrackingID string
	Kind       string
	TenantID   string
	UserID     string
	// ChatID is where to send: a system message's own chat, or for a tenant notification the chat recorded
	// when it was accepted — the verified owner's — while the user's link still leads there; 0 when the
	// user has no link any more, or linked another account since (Relinked).
	ChatID int64
	// Relinked: the user's link now leads to another chat than the one the notification was accepted for
	// (a relink while this notification was being delivered), or to the same chat of another bot: nothing
	// may be sent (CodeRelinked).
	Relinked bool
	// Bot is the bot to send through: the one whose link the notification was accepted for (a tenant
	// notification), or the one a system message replies through. SharedBot for the shared bot.
	Bot BotID
	// BotTokenRefused: the platform refused Bot's token (the bot's state in the store is token_invalid):
	// nothing can be sent through it until the tenant gives a new token (CodeBotTokenRefused).
	BotTokenRefused bool
	// Blocked: the user's link (the one the notification goes through) is marked blocked — the user blocked
	// the bot (my_chat_member, or a 403) — and OptedOut: an opt-out of the tenant, or of the notification's
	// category, covers it. Either way nothing may be sent: Stopped gives the outcome.
	Blocked  bool
	OptedOut bool
	// Erased: the notification's user was erased after it was accepted, and the erasure's pass has not
	// cancelled it yet (it was waiting when the erasure committed): nothing may be sent, and it ends
	// cancelled (Erase), as the pass would have ended it.
	Erased      bool
	Priority    int
	Body        string
	ReplyMarkup json.RawMessage
	// Rich: a tenant notification's format, entities and send flags (zero for plain text and for system
	// messages).
	Rich
	// Quiet: the tenant's quiet hours when they apply to this notification — a tenant notification whose
	// send did not ignore them (§14) —, nil otherwise; UserZone: its user's time_zone (§12), "" when not
	// set (the window is then read in the tenant's zone: quiet.Hours.Location).
	Quiet    *quiet.Hours
	UserZone string
	// DigestKey: the send's digest key (§14), "" for none. Digest: the items the worker gathered to send in
	// one message with this one (this one included, in the order accepted); nil until gathered, and for a
	// notification without a digest.
	DigestKey string
	Digest    []DigestItem
	// Attempts counts this attempt too. It identifies the claim: a status write for an older attempt (a
	// worker whose lease ran out and was redriven) matches nothing.
	Attempts int
	// ExpiresAt is the tenant's expires_at (nil: none). The claim happened before it; an attempt that
	// fails transiently after it lapses (internal/delivery.Decide).
	ExpiresAt *time.Time
	// ReplaceKey is the send's replace_key ("" for none; §13), Edit the message it is to edit (nil: a new
	// message), and Superseded says that a notification of the same key accepted after it was delivered
	// already (CodeSuperseded).
	ReplaceKey string
	Edit       *EditTarget
	Superseded bool
}

// DeliveryResult is the status write that ends one attempt: the To of one of Outcomes.
type DeliveryResult struct {
	Status             Status // delivered, retrying, blocked, unlinked, failed, expired, or cancelled (Erase)
	MessengerMessageID string // delivered only
	ErrorCode          int    // 0 for delivered
	ErrorMessage       string
	RetryIn            time.Duration // retrying: next_attempt_at = now + RetryIn
	// RemoveLink (unlinked by the platform): delete the link the attempt used and reset the user's phone
	// verification, so the tenant must link again.
	RemoveLink bool
	// Release (retrying only): the attempt never reached the platform (shutdown before the send), so it
	// is not counted and the last error is left as it was.
	Release bool
	// DeliveredAs (delivered only): DeliveredSent or DeliveredEdited; "" reads as sent. MessageSentAt: when
	// the edited message was first sent (edited only; a new message's is the moment of the write).
	DeliveredAs   string
	MessageSentAt *time.Time
	// PaidBroadcast (delivered only): the send carried allow_paid_broadcast, counted in the tenant's usage.
	PaidBroadcast bool
}

// The gateway-side last_error_code and last_error_message of the outcomes that are the lifecycle's, not
// the platform's: a tenant notification that ends unlinked, or fails, without a send. They lie outside the HTTP range
// the platform's error_code uses, beside the codes of sends the platform did not answer
// (internal/messenger: 1001–1004).
const (
	// CodeNoLink: the user had no link when the notification's turn came (the link was removed after the
	// send was accepted).
	CodeNoLink    = 1100
	NoLinkMessage = "the user has no link to a messenger chat"
	// CodeRelinked: the user linked another messenger account after the notification was accepted. A
	// notification only ever reaches the chat whose owner was verified when it was accepted: the relink
	// ends the waiting ones (Relink); a claim that finds the link moved ends the one whose attempt was
	// running then (Delivery.Relinked).
	CodeRelinked    = 1101
	RelinkedMessage = "the user linked another messenger account"
	// CodeBotTokenRefused: the platform refused the token of the bot the notification goes through (its 401),
	// so nothing can be sent through that bot until its tenant gives a new token: the notification fails
	// without a retry.
	CodeBotTokenRefused    = 1102
	BotTokenRefusedMessage = "the bot's token was refused by the messaging platform"
	// CodeBotChanged: the tenant changed its bot (or went back to the shared one) after the notification was
	// accepted through the old bot's link: the links made through the old bot end, and the user must link
	// again through the new one (ChangeBot).
	CodeBotChanged    = 1103
	BotChangedMessage = "the tenant changed its bot; the user must link again"
	// CodeBotUnavailable: the worker could not send through the tenant's bot (it cannot open the bot's
	// token: a worker configured without the key it was sealed under). Retried like a platform's 5xx, for
	// a worker that can; its cause is in the worker's log, not here.
	CodeBotUnavailable    = 1104
	BotUnavailableMessage = "the gateway could not send through the tenant's bot; its operator has been told"
	// CodeBlocked: the claim found the user's link marked blocked (the user blocked the bot: a my_chat_member
	// update, or an earlier 403): the notification ends blocked without a call to the platform.
	CodeBlocked    = 1105
	BlockedMessage = "the user blocked the bot"
	// CodeOptedOut: an opt-out of the tenant, or of the notification's category, covers it (§9): the waiting
	// ones end with the opt-out, in its transaction (OptOut); a claim that finds one ends the one it took.
	CodeOptedOut    = 1106
	OptedOutMessage = "opted out"
)

// Stopped returns the outcome of a claimed tenant notification that must end without a call to the
// platform because its user blocked the bot or opted out of it (the Block outcome, with the lifecycle's own
// code), and false when neither holds. An opt-out comes first: it says more than the block does.
func (d Delivery) Stopped() (DeliveryResult, bool) {
	switch {
	case d.OptedOut:
		return DeliveryResult{Status: Block.To(), ErrorCode: CodeOptedOut, ErrorMessage: OptedOutMessage}, true
	case d.Blocked:
		return DeliveryResult{Status: Block.To(), ErrorCode: CodeBlocked, ErrorMessage: BlockedMessage}, true
	}
	return DeliveryResult{}, false
}

// Backoff is a retry schedule, a notification's after transient failures that come without a retry_after
// (5xx, timeouts, network errors) and a callback event's after its endpoint failed: after the attempt n
// fails, the next one waits Base × 2^(n−1), at most Max, spread by ±Jitter at random so that a burst of
// failures does not come back as a burst.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64 // a fraction: 0.2 is ±20 %
}

// Delay is the wait after the given failed attempt (1 = the first attempt failed).
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.Base
	for i := 1; i < attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		d = time.Duration(float64(d) * (1 + b.Jitter*(2*rand.Float64()-1)))
	}
	return d
}

// Rich is how a tenant notification is shown beyond its text (spec v1-extensions §10), as the door
// validated it and sendMessage receives it: the text is the body, whose entities these are.
type Rich struct {
	Format         string // FormatHTML, or "" for plain text
	Entities       string // the entities of the body (offsets past the brand line) in richtext's compact form, "" for none
	Silent         bool   // disable_notification
	ProtectContent bool   // protect_content
	NoLinkPreview  bool   // link_preview_options.is_disabled
}

// The formats of a send (v1 extensions §10). Plain text is the default, "" in the store.
const (
	FormatText = "text"
	FormatHTML = "html"
)
