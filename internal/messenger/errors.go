package messenger

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// Gateway-side error codes, recorded as last_error_code when the platform gave no answer Herald could read.
// They lie outside the HTTP range the platform uses for error_code, so the two never collide.
const (
	// CodeTimeout: no answer before the call's deadline. The message may or may not have been delivered.
	CodeTimeout = 1001
	// CodeNetwork: the request could not be sent or the connection broke (DNS, refused, reset, TLS).
	CodeNetwork = 1002
	// CodeBadResponse: an answer arrived but was not a Bot API response (not JSON, no "ok", bad result).
	CodeBadResponse = 1003
	// CodeCanceled: Herald itself gave up on the call (shutdown) before an answer arrived.
	CodeCanceled = 1004
)

// MaxErrorMessageLength bounds last_error_message, in code points.
const MaxErrorMessageLength = 500

// MaxRetryAfter bounds the wait a retry_after can ask for. The platform asks for seconds to minutes; an
// answer asking for more (or for a number that overflows a Duration) cannot stall a chat or the whole bot
// for longer than this.
const MaxRetryAfter = time.Hour

// retryAfter turns parameters.retry_after (seconds) into a wait within 0..MaxRetryAfter.
func retryAfter(seconds int64) time.Duration {
	if seconds <= 0 {
		return 0
	}
	if seconds >= int64(MaxRetryAfter/time.Second) {
		return MaxRetryAfter
	}
	return time.Duration(seconds) * time.Second
}

// APIError is a Bot API answer with "ok": false.
type APIError struct {
	Method      string
	Code        int    // the platform's error_code, usually the HTTP status
	Description string // e.g. "Forbidden: bot was blocked by the user"
	// RetryAfter is parameters.retry_after: how long to wait before the next attempt (429 only).
	RetryAfter time.Duration
	// MigrateToChatID is parameters.migrate_to_chat_id: the group became a supergroup with this id.
	MigrateToChatID int64
}

func (e *APIError) Error() string {
	return fmt.Sprintf("messenger %s: %d %s", e.Method, e.Code, e.Description)
}

// Sentinels for failures where the platform gave no answer; a *TransportError wraps exactly one of them.
var (
	ErrTimeout     = errors.New("no answer in time")
	ErrNetwork     = errors.New("network error")
	ErrBadResponse = errors.New("malformed answer")
	ErrCanceled    = errors.New("call canceled")
)

// TransportError is a call that got no usable answer from the platform. Its message never contains the bot
// token: the URL of a *url.Error is scrubbed before it is wrapped.
type TransportError struct {
	Method     string
	Code       int // CodeTimeout, CodeNetwork, CodeBadResponse or CodeCanceled
	HTTPStatus int // the HTTP status of a malformed answer, 0 when none arrived
	Err        error
}

func (e *TransportError) Error() string {
	kind := e.sentinel().Error()
	if e.HTTPStatus != 0 {
		return fmt.Sprintf("messenger %s: %s (HTTP %d): %v", e.Method, kind, e.HTTPStatus, e.Err)
	}
	return fmt.Sprintf("messenger %s: %s: %v", e.Method, kind, e.Err)
}

// Unwrap exposes both the sentinel (errors.Is(err, ErrTimeout)) and the cause (errors.Is(err,
// context.DeadlineExceeded)).
func (e *TransportError) Unwrap() []error { return []error{e.sentinel(), e.Err} }

func (e *TransportError) sentinel() error {
	switch e.Code {
	case CodeTimeout:
		return ErrTimeout
	case CodeBadResponse:
		return ErrBadResponse
	case CodeCanceled:
		return ErrCanceled
	}
	return ErrNetwork
}

// Outcome is what a send attempt means for the notification, in the terms of the delivery state machine.
type Outcome int

// The outcomes of an attempt.
const (
	Delivered Outcome = iota // the platform accepted the message
	Retry                    // transient: 429, 5xx, timeout, network, malformed answer; try again later
	Blocked                  // the user blocked the bot or deleted the account
	Unlinked                 // the chat is gone or was never opened: the link is void
	Failed                   // any other permanent error
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Blocked:
		return "blocked"
	case Unlinked:
		return "unlinked"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Descriptions that decide the outcome of a 4xx. The platform's error_code is coarse (403 covers both a block
// and "can't initiate conversation"), so the description is the only signal; matching is on lower-cased
// substrings because the prefix ("Forbidden: ", "Bad Request: ") is not part of the meaning.
var (
	blockedDescriptions = []string{
		"bot was blocked by the user",
		"user is deactivated",
	}
	unlinkedDescriptions = []string{
		"chat not found",
		"bot can't initiate conversation with a user",
		"user not found",
	}
)

// unformattableDescriptions are (lower-cased) parts of the description of a 400 refusing a message as it is
// formatted: its entities or its keyboard cannot be parsed ("Bad Request: can't parse entities: …", "can't
// parse inline keyboard button"), there are too many entities ("entities too long", MTProto's
// ENTITIES_TOO_LONG), an entity or a button's URL is refused (ENTITY_BOUNDS_INVALID and the other ENTITY_…
// errors the Bot API passes on as they are, BUTTON_URL_INVALID, "inline keyboard button URL '…' is
// invalid"). Herald parses and validates every message at the door (internal/richtext), so each means the
// two disagree: retrying would meet it again, and the worker counts it for the alert.
var unformattableDescriptions = []string{
	"can't parse",
	"entities too long",
	"entities_too_long",
	"entity_",
	"button_url_invalid",
	"inline keyboard button url",
}

// Unparsable reports whether err is the platform's answer that it cannot send the message as it is
// formatted (unformattableDescriptions): the send fails without a retry (Failed, like any other 4xx), and
// the worker counts it apart, since it should never happen.
func Unparsable(err error) bool { return badRequestSays(err, unformattableDescriptions) }

// Classify maps the error of a send to its outcome. Errors this package did not produce count as Retry:
// they are most likely local and transient, and the attempt limit bounds the cost of being wrong.
func Classify(err error) Outcome {
	if err == nil {
		return Delivered
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return Retry
	}
	if apiErr.Code == http.StatusTooManyRequests || apiErr.Code >= 500 {
		return Retry
	}
	if Unparsable(err) {
		return Failed
	}
	desc := strings.ToLower(apiErr.Description)
	for _, s := range blockedDescriptions {
		if strings.Contains(desc, s) {
			return Blocked
		}
	}
	for _, s := range unlinkedDescriptions {
		if strings.Contains(desc, s) {
			return Unlinked
		}
	}
	if apiErr.Code >= 400 && apiErr.Code < 500 {
		return Failed
	}
	// A platform error outside 4xx/5xx (it has none today) is not known to be permanent.
	return Retry
}

// RetryAfter is the wait the platform asked for (parameters.retry_after), 0 when it asked for none.
func RetryAfter(err error) time.Duration {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.RetryAfter
	}
	return 0
}

// ErrorCode is the last_error_code of an attempt: 0 for success, the platform's error_code, or one of the
// gateway-side Code* constants.
func ErrorCode(err error) int {
	if err == nil {
		return 0
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code
	}
	var tErr *TransportError
	if errors.As(err, &tErr) {
		return tErr.Code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return CodeTimeout
	}
	if errors.Is(err, context.Canceled) {
		return CodeCanceled
	}
	return CodeNetwork
}

// Fixed last_error_message phrases of the gateway-side codes: what happened, never how (the cause of a
// transport failure names hosts, addresses, ports and proxies of Herald's own network, and tenants read
// this field). The full error goes to the worker's log.
var gatewayMessages = map[int]string{
	CodeTimeout:     "no answer from the messaging platform in time",
	CodeNetwork:     "the messaging platform could not be reached",
	CodeBadResponse: "the messaging platform's answer could not be read",
	CodeCanceled:    "the call to the messaging platform was canceled before it answered",
}

// ErrorMessage is the last_error_message of an attempt ("" for success): the platform's own description
// (without control characters, at most MaxErrorMessageLength code points), or the fixed phrase of the
// gateway-side code. It never contains the bot token, nor anything about Herald's network.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		if d := cleanDescription(apiErr.Description); d != "" {
			return d
		}
		return fmt.Sprintf("the messaging platform answered error %d", apiErr.Code)
	}
	return gatewayMessages[ErrorCode(err)]
}

// cleanDescription keeps printable text of a description, at most MaxErrorMessageLength code points.
func cleanDescription(d string) string {
	d = strings.ToValidUTF8(d, "")
	var b strings.Builder
	n := 0
	for _, r := range d {
		if n == MaxErrorMessageLength {
			break
		}
		if unicode.IsControl(r) {
			continue
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}

// The platform's answers to an edit or a deletion that Herald reads (spec v1-extensions §13), as parts of
// the (lower-cased) description of a 400.
var (
	// notModifiedDescriptions: the edit changes nothing — the message already shows it (a repeated edit,
	// or a worker's retry after the platform had applied it): delivered.
	notModifiedDescriptions = []string{"message is not modified"}
	// uneditableDescriptions: the message cannot be edited (the user deleted it, or it is too old or not
	// the bot's): a new message goes instead.
	uneditableDescriptions = []string{"message to edit not found", "message can't be edited", "message_id_invalid"}
	// goneDescriptions: the message to delete is not there (the user deleted it, or it was deleted
	// already): counted as deleted.
	goneDescriptions = []string{"message to delete not found", "message_id_invalid"}
	// undeletableDescriptions: the platform will not delete the message (past its 48 hours).
	undeletableDescriptions = []string{"message can't be deleted"}
)

// badRequestSays reports whether err is the platform's 400 whose description contains one of parts.
func badRequestSays(err error, parts []string) bool {
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest {
		return false
	}
	desc := strings.ToLower(apiErr.Description)
	for _, s := range parts {
		if strings.Contains(desc, s) {
			return true
		}
	}
	return false
}

// NotModified reports whether an edit was refused because it changes nothing: the message shows it.
func NotModified(err error) bool { return badRequestSays(err, notModifiedDescriptions) }

// Uneditable reports whether an edit was refused because the message cannot be edited or is gone.
func Uneditable(err error) bool { return badRequestSays(err, uneditableDescriptions) }

// MessageGone reports whether a deletion was refused because the message is not there.
func MessageGone(err error) bool { return badRequestSays(err, goneDescriptions) }

// Undeletable reports whether a deletion was refused because the platform will not delete the message.
func Undeletable(err error) bool { return badRequestSays(err, undeletableDescriptions) }
