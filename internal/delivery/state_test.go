package delivery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/store"
)

func TestDecideFollowsTheStateMachine(t *testing.T) {
	b := Backoff{Base: time.Second, Max: time.Minute}
	apiErr := func(code int, desc string, retryAfter time.Duration) error {
		return &messenger.APIError{Method: "sendMessage", Code: code, Description: desc, RetryAfter: retryAfter}
	}
	cases := []struct {
		name       string
		err        error
		attempts   int
		status     store.Status
		code       int
		retryIn    time.Duration
		removeLink bool
		throttle   Throttle
	}{
		{"success is delivered", nil, 1, store.StatusDelivered, 0, 0, false, ThrottleNone},
		{"429 retries after retry_after and throttles the chat", apiErr(429, "Too Many Requests: retry after 7", 7*time.Second), 1, store.StatusRetrying, 429, 7 * time.Second, false, ThrottleChat},
		{"500 retries with backoff", apiErr(500, "Internal Server Error", 0), 1, store.StatusRetrying, 500, time.Second, false, ThrottleNone},
		{"502 on the third attempt waits four times the base", apiErr(502, "Bad Gateway", 0), 3, store.StatusRetrying, 502, 4 * time.Second, false, ThrottleNone},
		{"a timeout retries with the gateway code", &messenger.TransportError{Method: "sendMessage", Code: messenger.CodeTimeout, Err: context.DeadlineExceeded}, 1, store.StatusRetrying, messenger.CodeTimeout, time.Second, false, ThrottleNone},
		{"a network error retries with the gateway code", &messenger.TransportError{Method: "sendMessage", Code: messenger.CodeNetwork, Err: errors.New("connection refused")}, 2, store.StatusRetrying, messenger.CodeNetwork, 2 * time.Second, false, ThrottleNone},
		{"the last attempt of a transient failure fails", apiErr(500, "Internal Server Error", 0), 8, store.StatusFailed, 500, 0, false, ThrottleNone},
		{"a 429 on the last attempt fails", apiErr(429, "Too Many Requests: retry after 1", time.Second), 8, store.StatusFailed, 429, 0, false, ThrottleNone},
		{"blocked by the user", apiErr(403, "Forbidden: bot was blocked by the user", 0), 1, store.StatusBlocked, 403, 0, false, ThrottleNone},
		{"user deactivated", apiErr(403, "Forbidden: user is deactivated", 0), 1, store.StatusBlocked, 403, 0, false, ThrottleNone},
		{"chat not found unlinks and removes the link", apiErr(400, "Bad Request: chat not found", 0), 1, store.StatusUnlinked, 400, 0, true, ThrottleNone},
		{"can't initiate unlinks and removes the link", apiErr(403, "Forbidden: bot can't initiate conversation with a user", 0), 1, store.StatusUnlinked, 403, 0, true, ThrottleNone},
		{"another 4xx fails", apiErr(400, "Bad Request: message is too long", 0), 1, store.StatusFailed, 400, 0, false, ThrottleNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(42, c.err, c.attempts, 8, b)
			r := d.Result
			if r.Status != c.status || r.ErrorCode != c.code || r.RetryIn != c.retryIn || r.RemoveLink != c.removeLink || d.Throttle != c.throttle {
				t.Fatalf("Decide = %+v throttle %v; want status %s code %d retry in %v remove link %v throttle %v",
					r, d.Throttle, c.status, c.code, c.retryIn, c.removeLink, c.throttle)
			}
			if c.err == nil && r.MessengerMessageID != "42" {
				t.Errorf("messenger_message_id = %q, want the platform's message_id as a string", r.MessengerMessageID)
			}
			if c.err != nil && r.ErrorMessage == "" {
				t.Error("an error must leave a last_error_message")
			}
		})
	}
}

func TestDefaultBackoffSpansAboutHalfAnHour(t *testing.T) {
	b := DefaultBackoff
	b.Jitter = 0
	var total time.Duration
	for attempt := 1; attempt < 8; attempt++ {
		total += b.Delay(attempt)
	}
	if total < 25*time.Minute || total > 35*time.Minute {
		t.Errorf("the seven waits of eight attempts add up to %v, want about 30 minutes", total)
	}
	jittered := DefaultBackoff
	for range 100 {
		d := jittered.Delay(1)
		if d < 12*time.Second || d > 18*time.Second {
			t.Fatalf("first delay %v is outside 15 s ± 20 %%", d)
		}
	}
	if capped := (Backoff{Base: time.Second, Max: 5 * time.Second}).Delay(30); capped != 5*time.Second {
		t.Errorf("delay after many attempts = %v, want the cap", capped)
	}
}

func TestReleaseCountsOnlyAttemptsThatLeft(t *testing.T) {
	if r := Release(false).Result; r.Status != store.StatusRetrying || !r.Release || r.ErrorCode != 0 {
		t.Errorf("release before the send = %+v, want retrying, attempt not counted, error untouched", r)
	}
	if r := Release(true).Result; r.Status != store.StatusRetrying || r.Release || r.ErrorCode != messenger.CodeCanceled {
		t.Errorf("release during the send = %+v, want retrying with code %d", r, messenger.CodeCanceled)
	}
	if r := NoLink().Result; r.Status != store.StatusUnlinked || r.ErrorCode != CodeNoLink || r.RemoveLink {
		t.Errorf("no link = %+v, want unlinked with code %d", r, CodeNoLink)
	}
}
