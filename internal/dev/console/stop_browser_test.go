package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTheConsoleWalksStopAndResume drives the dev console in headless Chromium through what an end user can
// do in the chat (spec v1-extensions §9): alice linked and verified as user 1001, a notification of the
// category "billing" delivered, then /stop written as the user → Herald's keyboard under its answer → a tap
// on the tenant's button → the bot's notice and the message edited → the tenant's view of its user's
// choices → the tenant's next send refused 409 user_opted_out → /resume lifts it.
func TestTheConsoleWalksStopAndResume(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	d := startDev(t)

	step(t, ctx, "the page loads", chromedp.Navigate(d.base+"/"), visible("#connection.live"))
	step(t, ctx, "alice is linked as user 1001 and verified",
		click("#create-link-token"), visible("#deep-link-url"),
		click("#deep-link-url"), visible("#step-deep-link.done"),
		click("#start-verification"), visible(`#keyboard button[data-request-contact]`),
		click(`#keyboard button[data-request-contact]`), visible("#step-contact.done"))

	// A category the tenant sent in the last 30 days is offered by /stop beside the tenant itself.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", d.base+"/v1/send",
		strings.NewReader(`{"user_id":"alice","message":"Your invoice is ready","category":"billing"}`))
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("a send with a category: %v %v", res, err)
	}
	res.Body.Close()
	step(t, ctx, "the billing notification is delivered", visible("#step-delivered.done"))

	step(t, ctx, "/stop written as the user: Herald answers with a keyboard of the tenant, its category and all of them",
		chromedp.SetValue(chromedp.CSS("#say-text"), "/stop"), click("#say-form button"),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.bot')].pop().querySelectorAll('button.inline').length === 3`))
	buttons := value[[]string](t, ctx, `[...[...document.querySelectorAll('#chat-lines .bubble.bot')].pop().querySelectorAll('button.inline')].map(b => b.textContent)`)
	if want := []string{"Demo App", "Demo App: billing", "All of them"}; strings.Join(buttons, "|") != strings.Join(want, "|") {
		t.Fatalf("the keyboard's buttons are %q, want %q", buttons, want)
	}

	step(t, ctx, "a tap on the tenant's button: the bot's notice, the message edited without its keyboard, the user's choice shown",
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('#chat-lines button.inline')].find(b => b.textContent === 'Demo App').click()`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#notice').textContent === 'Stopped.'`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#chat-lines button.inline').length === 0`),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.bot .text')].some(e => e.textContent.startsWith('A message from Demo App\nStopped: Demo App.'))`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#choices').textContent.includes("stopped this tenant's messages")`))

	step(t, ctx, "the tenant's next send is refused: 409 user_opted_out",
		chromedp.SetValue(chromedp.CSS("#message"), "A sale, just for you"), click("#send"),
		chromedp.Poll[chromedp.Void](`document.querySelector('#tenant-result').textContent.includes('409') && document.querySelector('#tenant-result').textContent.includes('user_opted_out')`))

	step(t, ctx, "/resume lifts it (the only thing stopped: at once)",
		chromedp.SetValue(chromedp.CSS("#say-text"), "/resume"), click("#say-form button"),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.bot .text')].some(e => e.textContent.includes('Resumed: Demo App.'))`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#choices').textContent.includes('receives every message')`))
	step(t, ctx, "the tenant sends again, and it is delivered",
		chromedp.SetValue(chromedp.CSS("#message"), "Welcome back"), click("#send"),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.bot .text')].some(e => e.textContent.endsWith('Welcome back'))`))
}
