package console_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// v1 calls the tenant API of the dev stack with the demo key and returns the status and the decoded body.
func (d dev) v1(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, d.base+"/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+d.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestTheConsoleShowsAnEditedAndADeletedMessage (§13, issue 37): a second send with the same replace_key
// edits the first one's message, and the chat shows that one message with the new text, marked edited, and
// the notifications table says the second send edited it; a message deleted on the tenant's request
// (DELETE …/message) leaves the chat, and its notification says so.
func TestTheConsoleShowsAnEditedAndADeletedMessage(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	d := startDev(t)

	step(t, ctx, "the page loads and a user links and verifies",
		chromedp.Navigate(d.base+"/"), visible("#connection.live"),
		click("#create-link-token"), visible("#deep-link-url"),
		click("#deep-link-url"), visible("#step-deep-link.done"),
		click("#start-verification"), visible(`#keyboard button[data-request-contact]`),
		click(`#keyboard button[data-request-contact]`), visible("#step-contact.done"))
	user := value[string](t, ctx, `document.querySelector('#walk-user').textContent`)

	send := func(body map[string]any) string {
		t.Helper()
		body["user_id"] = user
		status, out := d.v1(t, http.MethodPost, "/send", body)
		id, _ := out["tracking_id"].(string)
		if status != http.StatusAccepted || id == "" {
			t.Fatalf("POST /v1/send %v: %d %v", body, status, out)
		}
		return id
	}
	bubble := func(text string) string {
		return `[...document.querySelectorAll('#chat-lines .bubble.bot')].filter((b) => b.querySelector('.text').textContent.includes(` +
			jsString(text) + `))`
	}
	row := func(id string) string {
		return `document.querySelector('#notifications tr[data-id=` + jsString(id) + `]')`
	}

	first := send(map[string]any{"message": "Order 7 is packed", "replace_key": "order-7"})
	step(t, ctx, "the first send of the key arrives as a message",
		chromedp.Poll[chromedp.Void](bubble("Order 7 is packed")+`.length === 1`),
		chromedp.Poll[chromedp.Void](row(first)+`?.dataset.status === 'delivered'`))
	messageID := value[string](t, ctx, bubble("Order 7 is packed")+`[0].dataset.id`)

	second := send(map[string]any{"message": "Order 7 has shipped", "replace_key": "order-7"})
	step(t, ctx, "the second send of the key edits that message",
		chromedp.Poll[chromedp.Void](bubble("Order 7 has shipped")+`.length === 1`),
		chromedp.Poll[chromedp.Void](row(second)+`?.dataset.status === 'delivered'`))
	if n := value[int](t, ctx, bubble("Order 7")+`.length`); n != 1 {
		t.Errorf("the chat shows %d messages of the key, want the one edited", n)
	}
	edited := bubble("Order 7 has shipped") + `[0]`
	if got := value[string](t, ctx, edited+`.dataset.id`); got != messageID {
		t.Errorf("the edited message is message %s, want the first send's %s", got, messageID)
	}
	if got := value[string](t, ctx, edited+`.dataset.edited + ' ' + `+edited+`.querySelector('time').textContent`); !strings.HasPrefix(got, "true edited ") {
		t.Errorf("the edited message's mark and time read %q, want it marked edited", got)
	}
	if got := value[string](t, ctx, row(second)+`.children[3].textContent`); !strings.Contains(got, "edited") {
		t.Errorf("the second send's state reads %q, want it to say it edited the message", got)
	}
	if got := value[string](t, ctx, row(first)+`.children[3].textContent`); strings.Contains(got, "edited") {
		t.Errorf("the first send's state reads %q, want it sent, not edited", got)
	}

	gone := send(map[string]any{"message": "A code you should not keep: 4711"})
	step(t, ctx, "another message arrives",
		chromedp.Poll[chromedp.Void](bubble("4711")+`.length === 1`),
		chromedp.Poll[chromedp.Void](row(gone)+`?.dataset.status === 'delivered'`))
	if status, out := d.v1(t, http.MethodDelete, "/notifications/"+gone+"/message", nil); status != http.StatusAccepted && status != http.StatusNoContent && status != http.StatusOK {
		t.Fatalf("DELETE its message: %d %v", status, out)
	}
	step(t, ctx, "the message deleted on request leaves the chat, and its notification says it was deleted",
		chromedp.Poll[chromedp.Void](bubble("4711")+`.length === 0`),
		chromedp.Poll[chromedp.Void](row(gone)+`?.children[3].textContent.includes('message deleted')`))
	if n := value[int](t, ctx, bubble("Order 7 has shipped")+`.length`); n != 1 {
		t.Error("the edited message left the chat with the deleted one")
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
