package delivery_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/quiet"
)

// Digests end to end (spec v1-extensions §14), through the API, the outbox, kfake, the workers and the
// simulator. The end of a window is played by making the items due (what the window's end does), so that
// a test does not wait for it.

func (e *env) digestSend(user, message string, dig map[string]any, extra map[string]any) (int, []byte) {
	e.t.Helper()
	body := map[string]any{"user_id": user, "message": message, "digest": dig}
	for k, v := range extra {
		body[k] = v
	}
	return e.postJSON(body)
}

func (e *env) digestItem(user, message string, dig map[string]any) string {
	e.t.Helper()
	status, b := e.digestSend(user, message, dig, nil)
	if status != http.StatusAccepted || !strings.Contains(string(b), `"status":"scheduled"`) {
		e.t.Fatalf("digest send: %d %s, want 202 scheduled", status, b)
	}
	return trackingID(e.t, b)
}

// windowEnds makes the items of the user's open digests due, as the end of their window does.
func (e *env) windowEnds(user string) {
	e.t.Helper()
	e.exec(`UPDATE notifications SET send_at = now() WHERE user_id = $1 AND status = 'scheduled' AND digest_key IS NOT NULL`, user)
}

// Three sends with one key become one message: their texts in order, a blank line apart, one brand line;
// each item ends delivered with the same message, digest_key and digest_size. A cancelled item is left out.
func TestADigestIsDeliveredAsOneMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("ann", 7001, true)
	e.start(e.fastOptions())
	dig := map[string]any{"key": "comments:42", "window": 60}
	ids := []string{e.digestItem("ann", "Bob commented", dig), e.digestItem("ann", "Cid commented", dig),
		e.digestItem("ann", "Dee commented", dig), e.digestItem("ann", "Eve commented", dig)}
	if status, res := e.call("POST", "/v1/notifications/"+ids[2]+"/cancel", nil); status != http.StatusOK {
		t.Fatalf("cancel: %d %v", status, res)
	}
	time.Sleep(300 * time.Millisecond)
	if got := e.texts(7001); len(got) != 0 {
		t.Fatalf("sent before the window ended: %q", got)
	}
	e.windowEnds("ann")
	kept := []string{ids[0], ids[1], ids[3]}
	e.waitAllTerminal(kept, 20*time.Second)
	msgs := e.texts(7001)
	if want := brand("Bob commented\n\nCid commented\n\nEve commented"); len(msgs) != 1 || msgs[0] != want {
		t.Fatalf("chat 7001 received %q, want one message %q", msgs, want)
	}
	var msgID any
	for _, id := range kept {
		status, res := e.call("GET", "/v1/status/"+id, nil)
		if status != http.StatusOK || res["status"] != "delivered" || res["digest_key"] != "comments:42" || res["digest_size"] != float64(3) {
			t.Errorf("%s: %v", id, res)
		}
		if msgID == nil {
			msgID = res["messenger_message_id"]
		} else if res["messenger_message_id"] != msgID {
			t.Errorf("items delivered with different messages: %v and %v", msgID, res["messenger_message_id"])
		}
	}
	if r := e.row(ids[2]); r.Status != "cancelled" {
		t.Errorf("the cancelled item is %s", r.Status)
	}
	// A later send with the key opens a new digest.
	next := e.digestItem("ann", "Fay commented", dig)
	e.windowEnds("ann")
	if r := e.waitTerminal(next, 20*time.Second); r.Status != "delivered" {
		t.Fatalf("the next digest ended %+v", r)
	}
	if msgs := e.texts(7001); len(msgs) != 2 || msgs[1] != brand("Fay commented") {
		t.Fatalf("chat 7001 received %q, want the next digest alone", msgs)
	}
}

// max_items closes a digest early: it goes without waiting for its window; a digest whose items are all
// gone sends nothing.
func TestMaxItemsClosesADigestAndAnEmptyOneSendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("bo", 7002, true)
	e.start(e.fastOptions())
	full := map[string]any{"key": "full", "window": 3600, "max_items": 2}
	a, b := e.digestItem("bo", "<b>one</b>", full), e.digestItem("bo", "two", full)
	e.waitAllTerminal([]string{a, b}, 20*time.Second)
	if msgs := e.texts(7002); len(msgs) != 1 || msgs[0] != brand("<b>one</b>\n\ntwo") {
		t.Fatalf("chat 7002 received %q, want one message of both items", msgs)
	}
	gone := map[string]any{"key": "gone", "window": 3600}
	c := e.digestItem("bo", "three", gone)
	if status, _ := e.call("POST", "/v1/notifications/"+c+"/cancel", nil); status != http.StatusOK {
		t.Fatal("cancel")
	}
	e.windowEnds("bo")
	time.Sleep(500 * time.Millisecond)
	if msgs := e.texts(7002); len(msgs) != 1 {
		t.Fatalf("an empty digest sent %q", msgs[1:])
	}
}

// HTML items keep their formatting in the one message; items of one digest agree on format (another is
// 400 invalid_request), buttons and send_at do not go with a digest, and the option is validated.
func TestDigestFormatAndOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("cy", 7003, true)
	e.start(e.fastOptions())
	dig := map[string]any{"key": "orders", "window": 60}
	html := map[string]any{"format": "html"}
	first := trackingID(t, mustAccept(t, e, "cy", "Order <b>#1</b> shipped", dig, html))
	second := trackingID(t, mustAccept(t, e, "cy", "Order <i>#2</i> shipped", dig, html))
	if status, b := e.digestSend("cy", "plain", dig, nil); status != http.StatusBadRequest || !strings.Contains(string(b), "invalid_request") ||
		!strings.Contains(string(b), "format") {
		t.Errorf("a text item in an html digest: %d %s", status, b)
	}
	for name, extra := range map[string]map[string]any{
		"buttons": {"buttons": []any{[]any{map[string]any{"text": "Go", "url": "https://a.example"}}}},
		"send_at": {"send_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
	} {
		if status, b := e.digestSend("cy", "x", dig, extra); status != http.StatusBadRequest || !strings.Contains(string(b), name) {
			t.Errorf("%s with digest: %d %s", name, status, b)
		}
	}
	for _, bad := range []map[string]any{{"window": 60}, {"key": "a b", "window": 60}, {"key": "k", "window": 9},
		{"key": "k", "window": 86401}, {"key": "k", "window": 60, "max_items": 1}, {"key": "k", "window": 60, "max_items": 51},
		{"key": "k", "window": "60"}, {"key": "k", "window": 60, "extra": true}} {
		if status, _ := e.digestSend("cy", "x", bad, nil); status != http.StatusBadRequest {
			t.Errorf("digest %v: %d, want 400", bad, status)
		}
	}
	e.windowEnds("cy")
	e.waitAllTerminal([]string{first, second}, 20*time.Second)
	msgs := e.sim.Messages(7003)
	if len(msgs) != 1 || msgs[0].Text != brand("Order #1 shipped\n\nOrder #2 shipped") || len(msgs[0].Entities) == 0 {
		t.Fatalf("chat 7003 received %+v", msgs)
	}
	lines := e.sim.Transcript(7003)
	if want := "A message from Acme Shop\nOrder <b>#1</b> shipped\n\nOrder <i>#2</i> shipped"; len(lines) == 0 || lines[len(lines)-1].HTML != want {
		t.Errorf("the digest's formatting: %+v, want %q", lines, want)
	}
}

// Quiet hours hold the whole digest: its items go back to scheduled until the window ends.
func TestQuietHoursHoldTheWholeDigest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	h := aroundNow(quiet.Hold)
	e.quietHours(&h)
	e.user("di", 7004, true)
	e.start(e.fastOptions())
	dig := map[string]any{"key": "night", "window": 60}
	ids := []string{e.digestItem("di", "one", dig), e.digestItem("di", "two", dig)}
	e.windowEnds("di")
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		for {
			if at := e.sendAtOf(id); at != nil && at.After(time.Now().Add(30*time.Minute)) && e.row(id).Status == "scheduled" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("digest item %s: %+v, send_at %v; want held until the quiet hours end", id, e.row(id), e.sendAtOf(id))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if msgs := e.texts(7004); len(msgs) != 0 {
		t.Fatalf("sent during quiet hours: %q", msgs)
	}
	// The quiet hours end: the digest goes as one message.
	out := later(quiet.Hold)
	e.quietHours(&out)
	e.exec(`UPDATE notifications SET send_at = now() WHERE tracking_id = ANY($1::uuid[])`, ids)
	e.waitAllTerminal(ids, 20*time.Second)
	if msgs := e.texts(7004); len(msgs) != 1 || msgs[0] != brand("one\n\ntwo") {
		t.Fatalf("after the quiet hours: %q", msgs)
	}
}

func mustAccept(t *testing.T, e *env, user, message string, dig, extra map[string]any) []byte {
	t.Helper()
	status, b := e.digestSend(user, message, dig, extra)
	if status != http.StatusAccepted {
		t.Fatalf("send: %d %s", status, b)
	}
	return b
}

func trackingID(t *testing.T, b []byte) string {
	t.Helper()
	i := strings.Index(string(b), `"tracking_id":"`)
	if i < 0 {
		t.Fatalf("no tracking_id in %s", b)
	}
	rest := string(b)[i+len(`"tracking_id":"`):]
	return rest[:strings.IndexByte(rest, '"')]
}
