package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTheConsoleRendersAFormattedMessageWithItsButton sends an HTML message with a link button through the
// tenant API of the real herald dev stack and sees it in the chat as the messenger shows it: the brand line
// plain, bold, a link, a spoiler and code rendered from the entities the simulator kept, the button under
// the message, and nothing of the tenant's markup run as a script.
func TestTheConsoleRendersAFormattedMessageWithItsButton(t *testing.T) {
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

	// Sent from the console's own form, with its options: HTML and a button.
	markup := `Order <b>#1042</b> <a href="https://shop.example/o/1042">shipped</a>, code <code>X-7</code>, <tg-spoiler>a surprise</tg-spoiler> &lt;img src=x onerror=alert(1)&gt;`
	step(t, ctx, "the formatted message is sent from the form's options",
		click("#send-options summary"), visible("#send-format"),
		chromedp.SetValue(chromedp.CSS("#message"), markup),
		chromedp.SetValue(chromedp.CSS("#send-format"), "html"),
		chromedp.SetValue(chromedp.CSS("#send-buttons"), "Track the parcel | https://shop.example/t/1042"),
		click("#send"), visible("#step-sent.done"))
	if got := value[string](t, ctx, `document.querySelector('#tenant-result').textContent`); !strings.Contains(got, "→ 202") {
		t.Fatalf("the send from the form answered %s (user %s)", got, user)
	}

	last := `[...document.querySelectorAll('#chat-lines .bubble.bot')].pop()`
	step(t, ctx, "the formatted message arrives in the chat",
		chromedp.Poll[chromedp.Void](last+`.querySelector('.text b') !== null`))
	text := last + `.querySelector('.text')`
	if got := value[string](t, ctx, text+`.textContent`); got != "A message from Demo App\nOrder #1042 shipped, code X-7, a surprise <img src=x onerror=alert(1)>" {
		t.Errorf("the message reads %q", got)
	}
	if got := value[string](t, ctx, text+`.querySelector('.brand').textContent`); got != "A message from Demo App" {
		t.Errorf("the brand line reads %q", got)
	}
	checks := map[string]string{
		"bold":    text + `.querySelector('b').textContent`,
		"link":    text + `.querySelector('a').textContent + ' ' + ` + text + `.querySelector('a').getAttribute('href')`,
		"code":    text + `.querySelector('code').textContent`,
		"spoiler": text + `.querySelector('tg-spoiler').textContent`,
		"button":  last + `.querySelector('.inline-keys a.inline.url').textContent + ' ' + ` + last + `.querySelector('.inline-keys a.inline.url').getAttribute('href')`,
	}
	want := map[string]string{"bold": "#1042", "link": "shipped https://shop.example/o/1042", "code": "X-7", "spoiler": "a surprise",
		"button": "Track the parcel ↗ https://shop.example/t/1042"}
	for what, expr := range checks {
		if got := value[string](t, ctx, expr); got != want[what] {
			t.Errorf("the %s reads %q, want %q", what, got, want[what])
		}
	}
	// The spoiler hides its text, as the messenger does, and the brand line carries no formatting.
	if got := value[string](t, ctx, `getComputedStyle(`+text+`.querySelector('tg-spoiler')).color`); got != "rgba(0, 0, 0, 0)" {
		t.Errorf("the spoiler's text colour is %q, want transparent", got)
	}
	if n := value[int](t, ctx, text+`.querySelectorAll('.brand *').length + document.querySelectorAll('#chat-lines img').length`); n != 0 {
		t.Error("the brand line holds formatting, or the tenant's text was rendered as an element")
	}
}
