package messenger

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzBotAPIAnswer: whatever the platform (or anything posing as it: a proxy, a captive portal) answers,
// decoding it does not panic and yields success, an *APIError or a malformed-answer *TransportError; what
// it leads to stays within bounds (a retry_after within 0..MaxRetryAfter, a last_error_message of printable
// text within MaxErrorMessageLength, a known outcome). `go test` runs the seeds; `make fuzz` runs it for
// FUZZTIME.
func FuzzBotAPIAnswer(f *testing.F) {
	for _, s := range []string{
		`{"ok":true,"result":{"message_id":7,"chat":{"id":1,"type":"private"},"date":1}}`,
		`{"ok":true,"result":null}`,
		`{"ok":true,"result":"x"}`,
		`{"ok":false,"error_code":403,"description":"Forbidden: bot was blocked by the user"}`,
		`{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`,
		`{"ok":false,"error_code":429,"parameters":{"retry_after":9223372036854775807}}`,
		`{"ok":false,"error_code":400,"parameters":{"migrate_to_chat_id":-1001}}`,
		`{"ok":false,"error_code":-1,"description":"\u0000\u001b[31m"}`,
		`{"ok":false}`, `{}`, `[]`, `<html>502</html>`, ``, `{"ok":true}`, `{"ok":"true"}`,
	} {
		f.Add(200, []byte(s))
	}
	f.Add(502, []byte(`<html>Bad Gateway from proxy-7.internal</html>`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		var out Message
		err := decodeAnswer("sendMessage", status, body, &out)
		var apiErr *APIError
		var tErr *TransportError
		switch {
		case err == nil:
			if ErrorCode(err) != 0 || ErrorMessage(err) != "" || Classify(err) != Delivered {
				t.Fatal("success classified as a failure")
			}
			return
		case errors.As(err, &apiErr):
			if apiErr.Code == 0 {
				t.Fatalf("an API error without a code: %+v", apiErr)
			}
		case errors.As(err, &tErr):
			if tErr.Code != CodeBadResponse {
				t.Fatalf("a decoding failure with code %d", tErr.Code)
			}
		default:
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
		if w := RetryAfter(err); w < 0 || w > MaxRetryAfter {
			t.Fatalf("retry_after wait %s", w)
		}
		msg := ErrorMessage(err)
		if msg == "" || !utf8.ValidString(msg) || utf8.RuneCountInString(msg) > MaxErrorMessageLength {
			t.Fatalf("last_error_message %q", msg)
		}
		if strings.IndexFunc(msg, unicode.IsControl) >= 0 {
			t.Fatalf("last_error_message with a control character: %q", msg)
		}
		if o := Classify(err); o < Delivered || o > Failed {
			t.Fatalf("outcome %v", o)
		}
	})
}
