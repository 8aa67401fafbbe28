package console_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshotEnv names the file the browser test writes a screenshot of the console to (make screenshot).
const screenshotEnv = "HERALD_CONSOLE_SCREENSHOT"

// browser starts headless Chromium (Debian's chromium; $HERALD_CHROMIUM overrides the path) with a fresh
// profile and returns a tab. A missing Chromium fails the test: CI installs it (.ci/run).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("HERALD_CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			t.Fatalf("the dev console test needs headless Chromium: apt-get install chromium (or set HERALD_CHROMIUM to its path): %v", err)
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,  // as root in a container
		chromedp.DisableGPU, // no GPU here
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), // it would call home on a closed network
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1500, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// Start the browser on the tab's own context: the first run binds the browser to its context, and the
	// steps' contexts, which carry deadlines, end with each step.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// step runs actions within a deadline and fails the test with what the step was meant to show.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, pageDump(ctx))
	}
}

// pageDump is what the page showed when a step failed: the last answers it printed, and a screenshot.
func pageDump(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`['#connection', '#tenant-result', '#user-result', '#verification', '#walkthrough', '#notifications tbody']
		.map(s => s + ': ' + (document.querySelector(s)?.innerText ?? '(none)')).join('\n')`))
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(80)); err == nil {
		if f, err := os.CreateTemp("", "herald-console-*.png"); err == nil {
			_, _ = f.Write(png)
			f.Close()
			text += "\nscreenshot: " + f.Name()
		}
	}
	return "the page showed:\n" + text
}

// value evaluates a JavaScript expression in the page.
func value[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}
func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }

// TestTheConsoleWalksATenantThroughInABrowser drives the dev console in headless Chromium against the
// real herald dev stack, as a developer would: a link token, its deep link opened by a simulated user,
// verification started and the contact shared by tapping the keyboard button in the chat, a send, the
// branded message in the chat and the state turning delivered; then the simulator's 5xx switch, and the
// next notification retrying. Every wait is on a condition, with a deadline.
func TestTheConsoleWalksATenantThroughInABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	d := startDev(t)
	start := time.Now()

	step(t, ctx, "the page loads and listens to the server's events",
		chromedp.Navigate(d.base+"/"), visible("#connection.live"), visible("#tenant-id"))
	if got := value[string](t, ctx, `document.querySelector('#tenant-id').textContent`); got != "demo" {
		t.Errorf("the page acts as tenant %q, want demo", got)
	}
	if got := value[string](t, ctx, `document.querySelector('#openapi-link').getAttribute('href')`); got != "/v1/openapi.yaml" {
		t.Errorf("the API reference link points at %q", got)
	}

	step(t, ctx, "a link token is created and its deep link shown",
		click("#create-link-token"), visible("#step-link-token.done"), visible("#deep-link-url"))
	if link := value[string](t, ctx, `document.querySelector('#deep-link-url').textContent`); !strings.HasPrefix(link, "https://t.me/herald_sim_bot?start=") {
		t.Errorf("the deep link shown is %q", link)
	}

	step(t, ctx, "clicking the deep link opens it as user 1001: the chat gets the link confirmation",
		click("#deep-link-url"), visible("#step-deep-link.done"),
		visible(`#chat-list li[data-user="1001"].selected`), visible("#chat-lines .bubble.bot"))

	step(t, ctx, "verification starts and the prompt arrives with its keyboard button",
		click("#start-verification"), visible("#step-verification.done"),
		visible(`#keyboard button[data-request-contact]`))
	if got := value[string](t, ctx, `document.querySelector('#keyboard button[data-request-contact]').textContent`); got != "Share my phone number" {
		t.Errorf("the keyboard button reads %q", got)
	}

	step(t, ctx, "tapping the button shares the contact through the simulator: verified, and the keyboard goes",
		click(`#keyboard button[data-request-contact]`), visible("#step-contact.done"),
		visible(`#chat-lines .bubble.user .contact`),
		// Polled rather than WaitNotVisible: the chat re-renders as the replies arrive, and a node the
		// browser was watching may be replaced while it is watched.
		chromedp.Poll[chromedp.Void](`(() => { const k = document.querySelector('#keyboard'); return !k || k.hidden || k.offsetParent === null })()`))

	// A tenant's text is shown as text, never as markup.
	message := "Your order <b>#1042</b> has shipped & arrives on Friday"
	step(t, ctx, "a notification is sent from the form, delivered, and shown in the chat",
		chromedp.SetValue(chromedp.CSS("#message"), message), click("#send"),
		visible("#step-sent.done"), visible("#step-delivered.done"),
		visible(`#notifications tr[data-status="delivered"] .state-delivered`))
	// The whole tracking id, with a button to copy it: UUIDv7 prefixes collide.
	if ok := value[bool](t, ctx, `(() => { const tr = document.querySelector('#notifications tr[data-status="delivered"]'); return tr.dataset.id.length === 36 && tr.querySelector('td.id').firstChild.textContent === tr.dataset.id && !!tr.querySelector('td.id button.copy') })()`); !ok {
		t.Error("the notifications table does not show the whole tracking id with a copy button")
	}
	last := `[...document.querySelectorAll('#chat-lines .bubble.bot')].pop().querySelector('.text')`
	step(t, ctx, "the chat shows the branded message", chromedp.Poll[chromedp.Void](last+`.textContent.endsWith('on Friday')`))
	if got := value[string](t, ctx, last+`.textContent`); got != "A message from Demo App\n"+message {
		t.Errorf("the chat's last message reads %q", got)
	}
	if got := value[string](t, ctx, last+`.querySelector('.brand').textContent`); got != "A message from Demo App" {
		t.Errorf("the brand line reads %q", got)
	}
	if n := value[int](t, ctx, last+`.querySelectorAll('b').length`); n != 0 {
		t.Error("a tenant's message was rendered as HTML")
	}

	if got := value[string](t, ctx, `document.querySelector('#chat-title').textContent`); got != "User 1001 #1001 +15550001001" {
		t.Errorf("the chat's title reads %q", got)
	}
	if got := value[string](t, ctx, `document.querySelector('#verification').textContent`); !strings.HasPrefix(got, "verified (phone ··1001) · prompt ") {
		t.Errorf("the tenant's view of the verification reads %q", got)
	}

	step(t, ctx, "the 5xx switch turns on in the simulator",
		click("#fault-5xx"), chromedp.Poll[chromedp.Void](`document.querySelector('#user-result').textContent.includes('"error_rate_5xx": 1')`))
	step(t, ctx, "the next notification meets a 500 and is retrying",
		chromedp.SetValue(chromedp.CSS("#message"), "Your parcel is out for delivery"), click("#send"),
		visible(`#notifications tr[data-status="retrying"] .state-retrying`))
	if got := value[string](t, ctx, `document.querySelector('#notifications tr[data-status="retrying"] .error').textContent`); !strings.Contains(got, "500") || !strings.Contains(got, "next try in") {
		t.Errorf("a retrying notification shows %q as its last error", got)
	}

	// Every state has its own style, the lifecycle states included; a state the page does not know shows too.
	styles := value[map[string]string](t, ctx, `Object.fromEntries(['scheduled','queued','delivering','retrying','delivered','blocked',
		'unlinked','failed','cancelled','expired','no-such-state'].map(s => {
		const span = document.createElement('span'); span.className = 'state state-' + s; document.body.append(span);
		const c = getComputedStyle(span); const style = [c.color, c.backgroundColor, c.borderTopColor, c.borderTopStyle, c.textDecorationLine].join(' ');
		span.remove(); return [s, style]; }))`)
	seen := map[string]string{}
	for state, style := range styles {
		if state != "no-such-state" && style == styles["no-such-state"] {
			t.Errorf("state %s has no style of its own", state)
		}
		if other, dup := seen[style]; dup {
			t.Errorf("states %s and %s look the same", state, other)
		}
		seen[style] = state
	}
	if n := value[int](t, ctx, `document.querySelectorAll('#legend .state').length`); n != 10 {
		t.Errorf("the legend shows %d states, want the 10 of the contract", n)
	}
	t.Logf("the walk took %s in the browser", time.Since(start).Round(100*time.Millisecond))

	if path := os.Getenv(screenshotEnv); path != "" {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(path)
		t.Logf("screenshot written to %s", abs)
	}

	// What a user writes is text too, even a script.
	payload := `<img src=x onerror="document.body.dataset.pwned=1">`
	step(t, ctx, "a user's message shows in the chat",
		chromedp.SetValue(chromedp.CSS("#say-text"), payload), click("#say-form button"),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.user .text')].some(e => e.textContent === `+"`"+payload+"`"+`)`))
	if n := value[int](t, ctx, `document.querySelectorAll('#chat-lines img').length + document.querySelectorAll('[data-pwned]').length`); n != 0 {
		t.Error("a user's message was rendered as HTML")
	}

	// A POST without a body is JSON too, or the simulator would refuse it (what another site's page sends).
	step(t, ctx, "blocking the bot takes effect in the simulator",
		click("#block"), chromedp.Poll[chromedp.Void](`document.querySelector('#block').textContent === 'Unblock the bot'`))

	// A user has a chat with each bot: a deep link to another bot opens that bot's chat, named as such.
	res, err := http.Post(d.base+"/sim/bots", "application/json", strings.NewReader(`{"username":"second_bot"}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("creating a second bot: %v %v", res, err)
	}
	res.Body.Close()
	// (herald dev's second demo tenant has a bot of its own, @demo_shop_bot.)
	step(t, ctx, "the page lists the second bot",
		chromedp.Poll[chromedp.Void](`document.querySelector('#bots').textContent === 'Bots: @herald_sim_bot (shared), @demo_shop_bot, @second_bot'`))
	step(t, ctx, "a deep link to the second bot opens the user's chat with it",
		chromedp.SetValue(chromedp.CSS("#open-link-url"), "https://t.me/second_bot?start=hello"),
		chromedp.SetValue(chromedp.CSS("#open-link-user"), "1002"), click("#open-link"),
		visible(`#chat-list li[data-user="1002"][data-bot="second_bot"].selected`),
		chromedp.Poll[chromedp.Void](`document.querySelector('#chat-bot').textContent === 'with @second_bot'`),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.user .text')].some(e => e.textContent === '/start hello')`))
	if n := value[int](t, ctx, `document.querySelectorAll('#chat-list li[data-user="1001"][data-bot="herald_sim_bot"]').length`); n != 1 {
		t.Errorf("user 1001's chat with the shared bot is listed %d times", n)
	}

	// At 1280 px, a laptop's width, with the tables filled (users, notifications with whole tracking ids):
	// no table runs past its card, and the page does not scroll sideways.
	step(t, ctx, "the page is laid out again at 1280 px", chromedp.EmulateViewport(1280, 800),
		chromedp.Poll[chromedp.Void](`window.innerWidth === 1280`))
	overflow := value[string](t, ctx, `(() => {
		const out = [];
		if (document.documentElement.scrollWidth > window.innerWidth) out.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
		for (const table of document.querySelectorAll('table')) {
			const card = table.closest('section') || table.parentElement;
			const over = table.getBoundingClientRect().right - card.getBoundingClientRect().right;
			if (table.querySelectorAll('tbody tr').length === 0) out.push('#' + table.id + ' is empty');
			if (over > 1) out.push('#' + table.id + ' runs ' + Math.round(over) + ' px past its card');
		}
		return out.join('; ');
	})()`)
	if overflow != "" {
		t.Errorf("at 1280 px: %s", overflow)
	}
}
