// Package apierror is the catalogue of every client-facing error: code, HTTP status and default message,
// declared once as data. Handlers return errors; Write turns any error into the JSON body
// {"error": "<code>", "message": "<text>", "request_id": "<id>"}. Anything not from the catalogue becomes internal_error, and its
// text is logged, never sent.
package apierror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is a catalogued error with an optional specific message.
type Error struct {
	Code       string
	Status     int
	Message    string
	RetryAfter time.Duration // for rate_limited
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches errors by code, so errors.Is(err, apierror.NotFound) works on customised copies.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// After returns a copy that tells the client when to retry (Retry-After, in whole seconds, at least 1).
func (e *Error) After(d time.Duration) *Error {
	c := *e
	c.RetryAfter = max(d, time.Second)
	return &c
}

// With returns a copy with a specific message.
func (e *Error) With(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// The catalogue: the spec's codes (v1-extensions' included: not_cancellable, not_deletable, limit_reached, invalid_format,
// §9's user_opted_out and opted_out_by_user, §12's template_*) and the ones the design brief adds.
var (
	Unauthorized        = &Error{Code: "unauthorized", Status: http.StatusUnauthorized, Message: "missing, invalid or inactive credentials: send the API key as Authorization: Bearer <key>"}
	InvalidRequest      = &Error{Code: "invalid_request", Status: http.StatusBadRequest, Message: "the request is malformed"}
	MessageTooLong      = &Error{Code: "message_too_long_after_branding", Status: http.StatusBadRequest, Message: "the branded message exceeds the messaging platform's limit of 4096 characters"}
	InvalidFormat       = &Error{Code: "invalid_format", Status: http.StatusBadRequest, Message: "the message is not valid in the format it declares"}
	PhoneUnverified     = &Error{Code: "phone_unverified", Status: http.StatusConflict, Message: "the user has no verified phone"}
	UserOptedOut        = &Error{Code: "user_opted_out", Status: http.StatusConflict, Message: "the user opted out of these notifications"}
	OptedOutByUser      = &Error{Code: "opted_out_by_user", Status: http.StatusConflict, Message: "the user stopped these notifications in the chat; only the user can resume them, with /resume"}
	QueueError          = &Error{Code: "queue_error", Status: http.StatusBadGateway, Message: "the notification could not be queued; nothing was stored, retry later"}
	NotFound            = &Error{Code: "not_found", Status: http.StatusNotFound, Message: "not found"}
	IdempotencyConflict = &Error{Code: "idempotency_conflict", Status: http.StatusConflict, Message: "this Idempotency-Key was used with a different request body"}
	NotCancellable      = &Error{Code: "not_cancellable", Status: http.StatusConflict, Message: "only scheduled, queued or retrying notifications can be cancelled"}
	// NotDeletable is a DELETE /v1/notifications/{id}/message refused (§13); the message says why.
	NotDeletable = &Error{Code: "not_deletable", Status: http.StatusConflict, Message: "only a message delivered less than 48 hours ago and not deleted yet can be deleted"}
	// EndpointExists is a callback URL the tenant registered already, with other events: one URL is one
	// endpoint (a second would get every event twice). The message names the endpoint.
	EndpointExists = &Error{Code: "endpoint_exists", Status: http.StatusConflict, Message: "this URL is registered already"}
	LimitReached   = &Error{Code: "limit_reached", Status: http.StatusConflict, Message: "a limit on the number of these resources is reached"}
	// The templates of v1 extensions §12.
	TemplateInvalid      = &Error{Code: "template_invalid", Status: http.StatusBadRequest, Message: "the template does not parse"}
	TemplateNotFound     = &Error{Code: "template_not_found", Status: http.StatusNotFound, Message: "no such template or version"}
	TemplateDataMissing  = &Error{Code: "template_data_missing", Status: http.StatusBadRequest, Message: "the data misses paths the template reads"}
	TemplateRenderFailed = &Error{Code: "template_render_failed", Status: http.StatusBadRequest, Message: "the template could not be rendered with this data"}
	RateLimited          = &Error{Code: "rate_limited", Status: http.StatusTooManyRequests, Message: "too many requests"}
	MethodNotAllowed     = &Error{Code: "invalid_request", Status: http.StatusMethodNotAllowed, Message: "method not allowed"}
	// PayloadTooLarge is a body over a route's limit: the request is malformed (invalid_request), and its
	// status says which way, so a client can tell it from a schema error without reading the message.
	// UnsupportedMediaType is a body without Content-Type: application/json: invalid_request with status 415,
	// as the simulator (and the HTTP status it names) answers.
	UnsupportedMediaType = &Error{Code: "invalid_request", Status: http.StatusUnsupportedMediaType, Message: "Content-Type must be application/json"}
	PayloadTooLarge      = &Error{Code: "invalid_request", Status: http.StatusRequestEntityTooLarge, Message: "the request body is too large"}
	Internal             = &Error{Code: "internal_error", Status: http.StatusInternalServerError, Message: "internal error"}
	Unavailable          = &Error{Code: "unavailable", Status: http.StatusServiceUnavailable, Message: "the service is temporarily unavailable"}
	// Overloaded is unavailable, with a hint when to come back: the replica sheds load it cannot serve now.
	Overloaded = &Error{Code: "unavailable", Status: http.StatusServiceUnavailable, Message: "the service is overloaded; retry shortly", RetryAfter: time.Second}
)

// catalogue lists every error by code, for ByCode (Overloaded shares its code with Unavailable;
// MethodNotAllowed and PayloadTooLarge with InvalidRequest).
var catalogue = map[string]*Error{}

func init() {
	for _, e := range []*Error{EndpointExists, Unauthorized, InvalidRequest, MessageTooLong, InvalidFormat, PhoneUnverified, UserOptedOut, OptedOutByUser, QueueError,
		NotFound, IdempotencyConflict, NotCancellable, NotDeletable, LimitReached, RateLimited, Internal, Unavailable,
		TemplateInvalid, TemplateNotFound, TemplateDataMissing, TemplateRenderFailed} {
		catalogue[e.Code] = e
	}
}

// ByCode returns the catalogue entry of a code, or Internal for a code that is not in it.
func ByCode(code string) *Error {
	if e, ok := catalogue[code]; ok {
		return e
	}
	return Internal
}

// Body is the JSON error body.
type Body struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// RequestID is the X-Request-Id of the answer (the caller's, when it sent a sane one): the line to
	// quote to an operator, who finds it in the access log. Omitted only outside the server's middleware.
	RequestID string `json:"request_id,omitempty"`
}

// From maps any error to a catalogued one; the second result is false when err was not catalogued (and
// so is an internal error whose details must be logged, not returned).
func From(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return Internal, false
}

// Write sends err as the JSON error body with its status.
func Write(w http.ResponseWriter, err error) {
	e, _ := From(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(e.Status)
	b, _ := EncodeJSON(Body{Error: e.Code, Message: e.Message, RequestID: h.Get("X-Request-Id")})
	_, _ = w.Write(b)
}

// EncodeJSON is how every response body is encoded (the API's, the webhook's, the simulator's): JSON
// followed by a newline, without HTML escaping. Messages quote what the caller sent, HTML tags included
// ("<b> is never closed"), and people read them: encoding/json's default would turn them into \u003cb\u003e.
// No response is ever embedded in an HTML page.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
