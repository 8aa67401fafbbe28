package messenger_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/messenger"
)

// last_error_message is shown to tenants (GET /v1/status): it carries the platform's own description, or a
// fixed phrase per gateway-side failure, never the internals of Herald's network (host names, addresses,
// ports, proxy errors). The full error is for the log.
func TestLastErrorMessageNamesNoInternalHostOrAddress(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>502 from egress-proxy-7.corp.internal (10.20.30.40)</html>"))
	}))
	defer html.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()

	for _, tc := range []struct {
		name, baseURL string
		secrets       []string
		code          int
	}{
		{"connection refused", "http://" + refused, []string{refused, "127.0.0.1"}, messenger.CodeNetwork},
		{"unknown host", "http://bot-egress.corp.invalid:8443", []string{"bot-egress", "corp.invalid", "8443"}, messenger.CodeNetwork},
		{"a proxy's HTML page", html.URL, []string{"egress-proxy", "10.20.30.40", strings.TrimPrefix(html.URL, "http://")}, messenger.CodeBadResponse},
		{"no answer in time", slow.URL, []string{strings.TrimPrefix(slow.URL, "http://"), "127.0.0.1"}, messenger.CodeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := messenger.New(tc.baseURL, testToken, nil).WithTimeout(300 * time.Millisecond)
			_, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
			if got := messenger.ErrorCode(err); got != tc.code {
				t.Fatalf("ErrorCode(%v) = %d, want %d", err, got, tc.code)
			}
			msg := messenger.ErrorMessage(err)
			if msg == "" {
				t.Fatal("empty last_error_message")
			}
			for _, s := range tc.secrets {
				if strings.Contains(msg, s) {
					t.Errorf("last_error_message %q reveals %q", msg, s)
				}
			}
			if msg != messenger.ErrorMessage(&messenger.TransportError{Code: tc.code}) {
				t.Errorf("last_error_message %q is not the fixed phrase of code %d", msg, tc.code)
			}
		})
	}
}

// The platform's description is kept, within bounds: a hostile or broken answer cannot store kilobytes or
// control characters in a field tenants read.
func TestThePlatformsDescriptionIsKeptWithinBounds(t *testing.T) {
	if got := messenger.ErrorMessage(apiErr(403, "Forbidden: bot was blocked by the user")); got != "Forbidden: bot was blocked by the user" {
		t.Errorf("description changed to %q", got)
	}
	got := messenger.ErrorMessage(apiErr(400, "Bad Request:\x00 "+strings.Repeat("é", 5000)))
	if n := utf8.RuneCountInString(got); n > messenger.MaxErrorMessageLength {
		t.Errorf("a 5000-character description is kept as %d characters, want at most %d", n, messenger.MaxErrorMessageLength)
	}
	if strings.ContainsRune(got, 0) || !utf8.ValidString(got) {
		t.Errorf("control characters or invalid UTF-8 kept: %q", got[:20])
	}
	if got := messenger.ErrorMessage(apiErr(500, "")); got == "" {
		t.Error("an API error without a description has no message")
	}
}

// retry_after is the other end's number: a huge or negative one must not stall the bot for years (nor
// overflow into a negative wait). Waits are bounded by MaxRetryAfter.
func TestRetryAfterIsBounded(t *testing.T) {
	for _, ra := range []string{"31536000000", "9223372036854775807", "-5", "3"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":` + ra + `}}`))
		}))
		_, err := messenger.New(srv.URL, testToken, nil).SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
		srv.Close()
		wait := messenger.RetryAfter(err)
		if wait < 0 || wait > messenger.MaxRetryAfter {
			t.Errorf("retry_after %s: wait %s, want within 0..%s", ra, wait, messenger.MaxRetryAfter)
		}
		if ra == "3" && wait != 3*time.Second {
			t.Errorf("retry_after 3: wait %s", wait)
		}
	}
}
