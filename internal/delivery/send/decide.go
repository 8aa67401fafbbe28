package send

import (
	"net/http"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
)

// An attempt's side of the lifecycle. The state machine itself — every state, event and transition — is
// one table, internal/notification/lifecycle.go, rendered there as Go guards and as the store's SQL; this
// file decides which of an attempt's outcomes (notification.Outcomes) a platform answer means (Decide).
//
// Claiming is one UPDATE (store.ClaimDelivery) that accepts only the states notification.Status.Claimable allows
// (queued, a due retry, delivering with an expired lease; none after expires_at, which it moves to expired
// instead), so a redelivered Kafka message for anything else — a cancelled notification included — is
// dropped without a send. The states themselves are notification.Status; the transitions that are not an
// attempt's (release, cancel, expiry) are store's (lifecycle.go), run by the scheduler and the expiry sweep
// (internal/delivery/schedule.go) and by the tenant API.

// The gateway-side codes of the lifecycle (1100 no link, 1101 relinked) are internal/notification's; those
// for sends the platform did not answer are messenger.CodeTimeout (1001), CodeNetwork (1002),
// CodeBadResponse (1003) and CodeCanceled (1004).

// DefaultBackoff is the worker's retry schedule for transient failures that come without a retry_after
// (5xx, timeouts, network errors): 15 s × 2^(attempt-1), capped at 30 minutes, ±20 % at random. With 8
// attempts the seven waits add up to about 32 minutes.
var DefaultBackoff = notification.Backoff{Base: 15 * time.Second, Max: 30 * time.Minute, Jitter: 0.2}

// Throttle is what an answer asks of the rate limiter besides the notification's own retry.
type Throttle int

// What an answer asks of the rate limiter.
const (
	ThrottleNone Throttle = iota // nothing
	ThrottleChat                 // 429: hold this chat for retry_after
)

// Decision is what one attempt leads to.
type Decision struct {
	Result   notification.DeliveryResult
	Throttle Throttle
	// Wait is the platform's retry_after (429 only).
	Wait time.Duration
	// Cause is the attempt's error in full, for the log: Result.ErrorMessage, which tenants read, holds only
	// the platform's description or a fixed phrase (messenger.ErrorMessage).
	Cause error
}

// Decide maps the answer to an attempt onto the next state. messageID is the platform's message_id when
// err is nil; attempts counts this attempt; expired says that the notification's expires_at has passed
// (by the worker's clock, when the answer came): a transient failure then ends the notification as
// expired, since no attempt may start after expires_at. A delivered, blocked, unlinked or failed answer
// stands whenever it comes.
func Decide(messageID int64, err error, attempts, maxAttempts int, backoff notification.Backoff, expired bool) Decision {
	d := decide(messageID, err, attempts, maxAttempts, backoff, expired)
	d.Cause = err
	return d
}

func decide(messageID int64, err error, attempts, maxAttempts int, backoff notification.Backoff, expired bool) Decision {
	code, msg := messenger.ErrorCode(err), messenger.ErrorMessage(err)
	switch messenger.Classify(err) {
	case messenger.Delivered:
		return Decision{Result: notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: strconv.FormatInt(messageID, 10)}}
	case messenger.Blocked:
		return Decision{Result: notification.DeliveryResult{Status: notification.Blocked, ErrorCode: code, ErrorMessage: msg}}
	case messenger.Unlinked:
		return Decision{Result: notification.DeliveryResult{Status: notification.Unlinked, ErrorCode: code, ErrorMessage: msg, RemoveLink: true}}
	case messenger.Failed:
		return Decision{Result: notification.DeliveryResult{Status: notification.Failed, ErrorCode: code, ErrorMessage: msg}}
	}
	return transient(code, msg, messenger.RetryAfter(err), attempts, maxAttempts, backoff, expired)
}

// transient is the decision after a transient failure (code and msg its last_error) that asked to wait
// retryAfter (a 429's; 0 for none).
func transient(code int, msg string, retryAfter time.Duration, attempts, maxAttempts int, backoff notification.Backoff, expired bool) Decision {
	// Past expires_at there is no next attempt: expired, keeping the error that ended it (also on the last
	// allowed attempt: the contract names expiry as what ends it).
	if expired {
		d := Decision{Result: notification.DeliveryResult{Status: notification.Expired, ErrorCode: code, ErrorMessage: msg}}
		if retryAfter > 0 {
			d.Throttle, d.Wait = ThrottleChat, retryAfter // the chat is throttled whatever becomes of this one
		}
		return d
	}
	// The last allowed attempt fails for good, keeping the error that ended it.
	if attempts >= maxAttempts {
		return Decision{Result: notification.DeliveryResult{Status: notification.Failed, ErrorCode: code, ErrorMessage: msg}}
	}
	d := Decision{Result: notification.DeliveryResult{Status: notification.Retrying, ErrorCode: code, ErrorMessage: msg}}
	if wait := retryAfter; wait > 0 {
		// The platform said when: exactly then, never sooner, and the chat waits as long.
		d.Result.RetryIn, d.Throttle, d.Wait = wait, ThrottleChat, wait
	} else {
		d.Result.RetryIn = backoff.Delay(attempts)
	}
	return d
}

// Expired reports whether a claimed notification's expires_at has passed at now.
func Expired(d notification.Delivery, now time.Time) bool {
	return d.ExpiresAt != nil && !now.Before(*d.ExpiresAt)
}

// NoLink is the decision for a tenant notification whose user has no link at delivery time. The link is
// already gone, so there is nothing to remove.
func NoLink() Decision {
	return Decision{Result: notification.DeliveryResult{Status: notification.Unlinked, ErrorCode: notification.CodeNoLink,
		ErrorMessage: notification.NoLinkMessage}}
}

// Relinked is the decision for a tenant notification whose user linked another messenger account after it
// was accepted: it is not sent to the new account, whose owner nobody verified (notification.CodeRelinked).
func Relinked() Decision {
	return Decision{Result: notification.DeliveryResult{Status: notification.Unlinked, ErrorCode: notification.CodeRelinked,
		ErrorMessage: notification.RelinkedMessage}}
}

// Erased is the decision for a tenant notification whose user was erased after it was accepted (the claim
// read the erasure: Delivery.Erased): cancelled, without a send, as the erasure's pass ends the others.
func Erased() Decision {
	return Decision{Result: notification.DeliveryResult{Status: notification.Erase.To()}}
}

// TokenRefused is the decision for a notification through a tenant's own bot whose token the platform
// refused (a 401, for this send or an earlier one: notification.CodeBotTokenRefused): it fails without a
// retry, since no attempt can succeed before the tenant gives a new token.
func TokenRefused() Decision {
	return Decision{Result: notification.DeliveryResult{Status: notification.Failed, ErrorCode: notification.CodeBotTokenRefused,
		ErrorMessage: notification.BotTokenRefusedMessage}}
}

// BotUnavailable is the decision for a notification through a tenant's own bot that this worker cannot
// send through now (cause: its token does not open under this worker's HERALD_BOT_TOKEN_KEY, or the bot
// could not be read): a failure on Herald's side, retried as one of the platform's 5xx would be, so that a
// worker that can send it does once the configuration is right.
func BotUnavailable(cause error, attempts, maxAttempts int, backoff notification.Backoff, expired bool) Decision {
	d := transient(notification.CodeBotUnavailable, notification.BotUnavailableMessage, 0, attempts, maxAttempts, backoff, expired)
	d.Cause = cause
	return d
}

// Unreadable is the decision for a notification whose stored entities do not read back (cause): it
// fails without a send or a retry, with the code of the platform's refusal of a message it cannot parse.
func Unreadable(cause error) Decision {
	return Decision{Result: notification.DeliveryResult{Status: notification.Failed, ErrorCode: http.StatusBadRequest,
		ErrorMessage: UnreadableMessage}, Cause: cause}
}

// UnreadableMessage is the error_message of a notification Unreadable ends.
const UnreadableMessage = "the message's formatting could not be read back as it was stored; nothing was sent"

// Release is the decision for a claimed notification that shutdown interrupted: retry at once (another
// worker, or this one after a restart, picks it up). sent says whether the request had left, in which
// case the platform may have delivered it and the attempt counts.
func Release(sent bool) Decision {
	r := notification.DeliveryResult{Status: notification.Retrying, Release: !sent}
	if sent {
		r.ErrorCode, r.ErrorMessage = messenger.CodeCanceled, "the worker shut down before the platform answered"
	}
	return Decision{Result: r}
}

// Edited is the decision for a notification delivered by editing its key's message e (§13), or whose edit
// the platform answered "message is not modified": the message shows it.
func Edited(e *notification.EditTarget) Decision {
	sentAt := e.SentAt
	return Decision{Result: notification.DeliveryResult{Status: notification.Delivered,
		MessengerMessageID: strconv.FormatInt(e.MessageID, 10), DeliveredAs: notification.DeliveredEdited, MessageSentAt: &sentAt}}
}

// Superseded is the decision for a notification with a replace_key whose turn came after a later one of
// its key was delivered (notification.CodeSuperseded): it fails without a call.
func Superseded() Decision {
	return Decision{Result: notification.DeliveryResult{Status: notification.Failed, ErrorCode: notification.CodeSuperseded,
		ErrorMessage: notification.SupersededMessage}}
}

// editOutcome names an edit's answer for herald_worker_edits_total (nil or "not modified").
func editOutcome(err error) string {
	if err == nil {
		return "edited"
	}
	return "not_modified"
}
