package ingress_test

import (
	"net/http"
	"strings"
	"testing"
)

// §14: the digest option is validated (key, window 10..86400, max_items 2..50, nothing else), buttons and
// send_at do not go with it (400 invalid_request), and an accepted item is answered scheduled, its resource
// naming the key and the end of the window.
func TestTheDigestOptionIsValidated(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	send := func(dig any, extra map[string]any) response {
		body := map[string]any{"user_id": "u1", "message": "hi", "digest": dig}
		for k, v := range extra {
			body[k] = v
		}
		return e.do("POST", "/v1/send", key, body)
	}
	for _, bad := range []any{
		"comments", 5, map[string]any{}, map[string]any{"key": "k"}, map[string]any{"window": 60},
		map[string]any{"key": "", "window": 60}, map[string]any{"key": "with space", "window": 60},
		map[string]any{"key": strings.Repeat("k", 65), "window": 60},
		map[string]any{"key": "k", "window": 9}, map[string]any{"key": "k", "window": 86401}, map[string]any{"key": "k", "window": 60.5},
		map[string]any{"key": "k", "window": "60"}, map[string]any{"key": "k", "window": 60, "max_items": 1},
		map[string]any{"key": "k", "window": 60, "max_items": 51}, map[string]any{"key": "k", "window": 60, "size": 3},
	} {
		expectError(t, send(bad, nil), http.StatusBadRequest, "invalid_request")
	}
	ok := map[string]any{"key": "comments:post-7_a.b", "window": 10, "max_items": 2}
	expectError(t, send(ok, map[string]any{"buttons": []any{[]any{map[string]any{"text": "Go", "url": "https://a.example"}}}}), http.StatusBadRequest, "invalid_request")
	expectError(t, send(ok, map[string]any{"send_at": ts(60e9)}), http.StatusBadRequest, "invalid_request")
	for _, dig := range []any{nil, ok, map[string]any{"key": "k", "window": 86400, "max_items": 50}} {
		r := send(dig, nil)
		want := "scheduled"
		if dig == nil {
			want = "queued"
		}
		if r.status != http.StatusAccepted || r.json(t)["status"] != want {
			t.Errorf("digest %v: %d %s, want 202 %s", dig, r.status, r.body, want)
			continue
		}
		m := e.do("GET", "/v1/status/"+r.json(t)["tracking_id"].(string), key, nil).json(t)
		if dig != nil && (m["digest_key"] != dig.(map[string]any)["key"] || m["send_at"] == nil || m["digest_size"] != nil) {
			t.Errorf("the resource of a digest's item: %v", m)
		}
		if dig == nil && (m["digest_key"] != nil || m["digest_size"] != nil) {
			t.Errorf("a send without digest shows %v %v", m["digest_key"], m["digest_size"])
		}
	}
}
