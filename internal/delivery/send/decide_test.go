package send

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
)

func TestDecideFollowsTheStateMachine(t *testing.T) {
	b := notification.Backoff{Base: time.Second, Max: time.Minute}
	apiErr := func(code int, desc string, retryAfter time.Duration) error {
		return &messenger.APIError{Method: "sendMessage", Code: code, Description: desc, RetryAfter: retryAfter}
	}
	cases := []struct {
		name       string
		err        error
		attempts   int
		status     notification.Status
		code       int
		retryIn    time.Duration
		removeLink bool
		throttle   Throttle
		expired    bool // the notification's expires_at has passed when the answer comes
	}{
		{"success is delivered", nil, 1, notification.Delivered, 0, 0, false, ThrottleNone, false},
		{"429 retries after retry_after and throttles the chat", apiErr(429, "Too Many Requests: retry after 7", 7*time.Second), 1, notification.Retrying, 429, 7 * time.Second, false, ThrottleChat, false},
		{"500 retries with backoff", apiErr(500, "Internal Server Error", 0), 1, notification.Retrying, 500, time.Second, false, ThrottleNone, false},
		{"502 on the third attempt waits four times the base", apiErr(502, "Bad Gateway", 0), 3, notification.Retrying, 502, 4 * time.Second, false, ThrottleNone, false},
		{"a timeout retries with the gateway code", &messenger.TransportError{Method: "sendMessage", Code: messenger.CodeTimeout, Err: context.DeadlineExceeded}, 1, notification.Retrying, messenger.CodeTimeout, time.Second, false, ThrottleNone, false},
		{"a network error retries with the gateway code", &messenger.TransportError{Method: "sendMessage", Code: messenger.CodeNetwork, Err: errors.New("connection refused")}, 2, notification.Retrying, messenger.CodeNetwork, 2 * time.Second, false, ThrottleNone, false},
		{"the last attempt of a transient failure fails", apiErr(500, "Internal Server Error", 0), 8, notification.Failed, 500, 0, false, ThrottleNone, false},
		{"a 429 on the last attempt fails", apiErr(429, "Too Many Requests: retry after 1", time.Second), 8, notification.Failed, 429, 0, false, ThrottleNone, false},
		{"blocked by the user", apiErr(403, "Forbidden: bot was blocked by the user", 0), 1, notification.Blocked, 403, 0, false, ThrottleNone, false},
		{"user deactivated", apiErr(403, "Forbidden: user is deactivated", 0), 1, notification.Blocked, 403, 0, false, ThrottleNone, false},
		{"chat not found unlinks and removes the link", apiErr(400, "Bad Request: chat not found", 0), 1, notification.Unlinked, 400, 0, true, ThrottleNone, false},
		{"can't initiate unlinks and removes the link", apiErr(403, "Forbidden: bot can't initiate conversation with a user", 0), 1, notification.Unlinked, 403, 0, true, ThrottleNone, false},
		{"another 4xx fails", apiErr(400, "Bad Request: message is too long", 0), 1, notification.Failed, 400, 0, false, ThrottleNone, false},
		// v1 extensions §2: delivering, an attempt fails transiently after expires_at → expired.
		{"a 5xx after expires_at expires", apiErr(500, "Internal Server Error", 0), 1, notification.Expired, 500, 0, false, ThrottleNone, true},
		{"a timeout after expires_at expires", &messenger.TransportError{Method: "sendMessage", Code: messenger.CodeTimeout, Err: context.DeadlineExceeded}, 2, notification.Expired, messenger.CodeTimeout, 0, false, ThrottleNone, true},
		{"a 429 after expires_at expires and still throttles the chat", apiErr(429, "Too Many Requests: retry after 7", 7*time.Second), 1, notification.Expired, 429, 0, false, ThrottleChat, true},
		{"a transient failure on the last attempt after expires_at expires", apiErr(500, "Internal Server Error", 0), 8, notification.Expired, 500, 0, false, ThrottleNone, true},
		{"delivered after expires_at stays delivered", nil, 1, notification.Delivered, 0, 0, false, ThrottleNone, true},
		{"a permanent failure after expires_at stays failed", apiErr(400, "Bad Request: message is too long", 0), 1, notification.Failed, 400, 0, false, ThrottleNone, true},
		{"blocked after expires_at stays blocked", apiErr(403, "Forbidden: bot was blocked by the user", 0), 1, notification.Blocked, 403, 0, false, ThrottleNone, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(42, c.err, c.attempts, 8, b, c.expired)
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

func TestExpiredComparesExpiresAtWithTheClock(t *testing.T) {
	now := time.Now()
	past, future := now.Add(-time.Millisecond), now.Add(time.Second)
	cases := []struct {
		name      string
		expiresAt *time.Time
		want      bool
	}{
		{"no expires_at never expires", nil, false},
		{"expires_at ahead", &future, false},
		{"expires_at now is expired", &now, true},
		{"expires_at past", &past, true},
	}
	for _, c := range cases {
		if got := Expired(notification.Delivery{ExpiresAt: c.expiresAt}, now); got != c.want {
			t.Errorf("%s: Expired = %v, want %v", c.name, got, c.want)
		}
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
	if capped := (notification.Backoff{Base: time.Second, Max: 5 * time.Second}).Delay(30); capped != 5*time.Second {
		t.Errorf("delay after many attempts = %v, want the cap", capped)
	}
}

func TestReleaseCountsOnlyAttemptsThatLeft(t *testing.T) {
	if r := Release(false).Result; r.Status != notification.Retrying || !r.Release || r.ErrorCode != 0 {
		t.Errorf("release before the send = %+v, want retrying, attempt not counted, error untouched", r)
	}
	if r := Release(true).Result; r.Status != notification.Retrying || r.Release || r.ErrorCode != messenger.CodeCanceled {
		t.Errorf("release during the send = %+v, want retrying with code %d", r, messenger.CodeCanceled)
	}
	if r := NoLink().Result; r.Status != notification.Unlinked || r.ErrorCode != notification.CodeNoLink || r.RemoveLink {
		t.Errorf("no link = %+v, want unlinked with code %d", r, notification.CodeNoLink)
	}
}
