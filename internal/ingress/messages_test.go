package ingress_test

import (
	"net/http"
	"strings"
	"testing"
)

// Error messages quote the caller's HTML as written: a person reads "<b> is never closed", not
// "\u003cb\u003e is never closed".
func TestErrorMessagesAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html", "message": "<b>hello"})
	expectError(t, r, http.StatusBadRequest, "invalid_format")
	if body := string(r.body); !strings.Contains(body, "<b> is never closed") {
		t.Errorf("body %s, want the tag written as <b>", body)
	}
}

// A 401 says how to send the key.
func TestUnauthorizedNamesTheBearerHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/v1/notifications", "", nil)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
	if msg := r.json(t)["message"].(string); !strings.Contains(msg, "Authorization: Bearer") {
		t.Errorf("message %q does not name Authorization: Bearer", msg)
	}
}

// A field given twice is refused like an unknown one (encoding/json would keep the last silently), at
// the top level and inside an object; equal keys in different objects are fine.
func TestDuplicateFieldsAreRefused(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for body, field := range map[string]string{
		`{"user_id":"u1","message":"a","message":"b"}`:                                                                  `"message"`,
		`{"user_id":"u1","message":"a","metadata":{"k":"1","k":"2"}}`:                                                   `"k"`,
		`{"user_id":"u1","message":"a","buttons":[[{"text":"a","url":"https://a.example","url":"https://b.example"}]]}`: `"url"`,
	} {
		r := e.do("POST", "/v1/send", key, body)
		expectError(t, r, http.StatusBadRequest, "invalid_request")
		if msg := r.json(t)["message"].(string); !strings.Contains(msg, field+" is given twice") {
			t.Errorf("%s: message %q, want it to name %s given twice", body, msg, field)
		}
	}
	ok := e.do("POST", "/v1/send", key, `{"user_id":"u1","message":"a","metadata":{"user_id":"x","message":"y"}}`)
	if ok.status != http.StatusAccepted {
		t.Errorf("equal keys in different objects: %d %s", ok.status, ok.body)
	}
}
