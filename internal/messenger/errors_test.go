package messenger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
)

func apiErr(code int, desc string) error {
	return &messenger.APIError{Method: "sendMessage", Code: code, Description: desc}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want messenger.Outcome
	}{
		{"success", nil, messenger.Delivered},
		// Transient: the platform or the path to it.
		{"flood control", &messenger.APIError{Code: 429, Description: "Too Many Requests: retry after 5", RetryAfter: 5 * time.Second}, messenger.Retry},
		{"internal server error", apiErr(500, "Internal Server Error"), messenger.Retry},
		{"bad gateway", apiErr(502, "Bad Gateway"), messenger.Retry},
		{"timeout", &messenger.TransportError{Code: messenger.CodeTimeout, Err: context.DeadlineExceeded}, messenger.Retry},
		{"network", &messenger.TransportError{Code: messenger.CodeNetwork, Err: errors.New("connection refused")}, messenger.Retry},
		{"malformed answer", &messenger.TransportError{Code: messenger.CodeBadResponse, HTTPStatus: 502, Err: errors.New("invalid character '<'")}, messenger.Retry},
		{"canceled by shutdown", &messenger.TransportError{Code: messenger.CodeCanceled, Err: context.Canceled}, messenger.Retry},
		{"foreign error", context.DeadlineExceeded, messenger.Retry},
		// Blocked.
		{"bot blocked", apiErr(403, "Forbidden: bot was blocked by the user"), messenger.Blocked},
		{"user deactivated", apiErr(403, "Forbidden: user is deactivated"), messenger.Blocked},
		// Unlinked.
		{"chat not found", apiErr(400, "Bad Request: chat not found"), messenger.Unlinked},
		{"can't initiate conversation", apiErr(403, "Forbidden: bot can't initiate conversation with a user"), messenger.Unlinked},
		{"user not found", apiErr(400, "Bad Request: user not found"), messenger.Unlinked},
		// Any other 4xx is permanent.
		{"empty text", apiErr(400, "Bad Request: message text is empty"), messenger.Failed},
		{"text too long", apiErr(400, "Bad Request: message is too long"), messenger.Failed},
		{"bad markup", apiErr(400, "Bad Request: can't parse reply keyboard markup JSON object"), messenger.Failed},
		{"group migrated", &messenger.APIError{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: -1001234567890}, messenger.Failed},
		{"kicked from group", apiErr(403, "Forbidden: bot was kicked from the group chat"), messenger.Failed},
		{"bot to bot", apiErr(403, "Forbidden: bot can't send messages to bots"), messenger.Failed},
		{"bad token", apiErr(401, "Unauthorized"), messenger.Failed},
		{"no such method", apiErr(404, "Not Found"), messenger.Failed},
		{"polling conflict", apiErr(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"), messenger.Failed},
		// Wrapping does not hide the platform's answer.
		{"wrapped block", fmt.Errorf("while delivering: %w", apiErr(403, "Forbidden: bot was blocked by the user")), messenger.Blocked},
		{"wrapped flood", fmt.Errorf("while delivering: %w", apiErr(429, "Too Many Requests: retry after 1")), messenger.Retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := messenger.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestErrorCodeMessageAndRetryAfter(t *testing.T) {
	flood := fmt.Errorf("wrapped: %w", &messenger.APIError{Code: 429, Description: "Too Many Requests: retry after 7", RetryAfter: 7 * time.Second})
	tests := []struct {
		name       string
		err        error
		code       int
		message    string
		retryAfter time.Duration
	}{
		{"success", nil, 0, "", 0},
		{"platform error", apiErr(403, "Forbidden: bot was blocked by the user"), 403, "Forbidden: bot was blocked by the user", 0},
		{"flood", flood, 429, "Too Many Requests: retry after 7", 7 * time.Second},
		{"timeout", &messenger.TransportError{Code: messenger.CodeTimeout, Err: context.DeadlineExceeded}, messenger.CodeTimeout, "no answer from the messaging platform in time", 0},
		{"network", &messenger.TransportError{Code: messenger.CodeNetwork, Err: errors.New("connection refused")}, messenger.CodeNetwork, "the messaging platform could not be reached", 0},
		{"bad response", &messenger.TransportError{Code: messenger.CodeBadResponse, Err: errors.New("x")}, messenger.CodeBadResponse, "the messaging platform's answer could not be read", 0},
		{"bare deadline", context.DeadlineExceeded, messenger.CodeTimeout, "no answer from the messaging platform in time", 0},
		{"bare cancel", context.Canceled, messenger.CodeCanceled, "the call to the messaging platform was canceled before it answered", 0},
		{"a foreign error", errors.New("dial tcp 10.0.0.1:443: i/o timeout"), messenger.CodeNetwork, "the messaging platform could not be reached", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := messenger.ErrorCode(tt.err); got != tt.code {
				t.Errorf("ErrorCode = %d, want %d", got, tt.code)
			}
			if got := messenger.ErrorMessage(tt.err); got != tt.message {
				t.Errorf("ErrorMessage = %q, want %q", got, tt.message)
			}
			if got := messenger.RetryAfter(tt.err); got != tt.retryAfter {
				t.Errorf("RetryAfter = %v, want %v", got, tt.retryAfter)
			}
		})
	}
}

func TestGatewayCodesStayOutsideHTTPRange(t *testing.T) {
	codes := []int{messenger.CodeTimeout, messenger.CodeNetwork, messenger.CodeBadResponse, messenger.CodeCanceled}
	seen := map[int]bool{}
	for _, c := range codes {
		if c < 1000 || seen[c] {
			t.Errorf("gateway code %d must be ≥ 1000 and unique", c)
		}
		seen[c] = true
	}
}

func TestTransportErrorUnwrapsToSentinelAndCause(t *testing.T) {
	err := error(&messenger.TransportError{Method: "sendMessage", Code: messenger.CodeTimeout, Err: context.DeadlineExceeded})
	if !errors.Is(err, messenger.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v must match ErrTimeout and context.DeadlineExceeded", err)
	}
	if errors.Is(err, messenger.ErrNetwork) {
		t.Errorf("%v must not match ErrNetwork", err)
	}
}

// Every answer of the platform that a message cannot be sent as it is formatted is a parse failure (the
// worker counts them for HeraldEntityParseFailures): its entities or keyboard cannot be parsed, there are too
// many entities, an entity or a button's URL is refused. Other refusals are not, nor is a 5xx or a 403.
func TestUnparsableCoversEveryAnswerThatTheFormattingIsRefused(t *testing.T) {
	for _, desc := range []string{
		"Bad Request: can't parse entities: unsupported start tag \"br\" at byte offset 3",
		"Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard",
		"Bad Request: can't parse reply keyboard markup JSON object",
		"Bad Request: entities too long",
		"Bad Request: ENTITIES_TOO_LONG",
		"Bad Request: ENTITY_BOUNDS_INVALID",
		"Bad Request: ENTITY_MENTION_USER_INVALID",
		"Bad Request: BUTTON_URL_INVALID",
		"Bad Request: inline keyboard button URL 'javascript:x' is invalid: Unsupported URL protocol",
	} {
		err := fmt.Errorf("while delivering: %w", apiErr(400, desc))
		if !messenger.Unparsable(err) || messenger.Classify(err) != messenger.Failed {
			t.Errorf("%q: Unparsable %v, Classify %v; want a parse failure that ends failed", desc, messenger.Unparsable(err), messenger.Classify(err))
		}
	}
	for _, err := range []error{
		apiErr(400, "Bad Request: message is too long"),
		apiErr(400, "Bad Request: message text is empty"),
		apiErr(400, "Bad Request: chat not found"),
		apiErr(403, "Forbidden: bot was blocked by the user"),
		apiErr(500, "Internal Server Error: can't parse entities"),
		errors.New("can't parse entities"),
	} {
		if messenger.Unparsable(err) {
			t.Errorf("%v: Unparsable, want not", err)
		}
	}
}
