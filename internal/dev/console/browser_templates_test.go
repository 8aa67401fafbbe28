package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTheConsoleSavesPreviewsAndSendsATemplate drives the Templates card against the real herald dev stack:
// the template saved (and listed), previewed for the tenant's user in the messenger's language and then in
// the one asked for, the data escaped and the template's own markup shown formatted, and a templated send
// arriving in the user's chat.
func TestTheConsoleSavesPreviewsAndSendsATemplate(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	d := startDev(t)

	step(t, ctx, "the page loads and a user links and verifies",
		chromedp.Navigate(d.base+"/"), visible("#connection.live"),
		click("#create-link-token"), visible("#deep-link-url"),
		click("#deep-link-url"), visible("#step-deep-link.done"),
		click("#start-verification"), visible(`#keyboard button[data-request-contact]`),
		click(`#keyboard button[data-request-contact]`), visible("#step-contact.done"))

	step(t, ctx, "the template is saved and listed",
		click("#template-save"),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#template-list li')].some((li) => li.textContent.includes('order.shipped'))`))
	if got := value[string](t, ctx, `document.querySelector('#tenant-result').textContent`); !strings.Contains(got, "PUT /v1/templates/order.shipped → 20") {
		t.Errorf("the save answered %q", got)
	}

	preview := `document.querySelector('#template-rendered .text')`
	step(t, ctx, "the preview shows what the user would get, in the messenger's language",
		click("#template-preview"), visible("#template-rendered"))
	if got := value[string](t, ctx, preview+`.textContent`); got != "Order A-1001 has shipped, Alice & Bob" {
		t.Errorf("the preview reads %q", got)
	}
	if got := value[string](t, ctx, preview+`.querySelector('b')?.textContent ?? ''`); got != "Order A-1001" {
		t.Errorf("the preview's bold part reads %q", got)
	}
	if got := value[string](t, ctx, `document.querySelector('#template-rendered').dataset.locale`); got != "en" {
		t.Errorf("the preview's locale is %q, want en (the simulated messenger's language_code)", got)
	}
	step(t, ctx, "a preview in German",
		chromedp.SetValue(chromedp.CSS("#template-locale"), "de-AT"), click("#template-preview"),
		chromedp.Poll[chromedp.Void](preview+`.textContent.startsWith('Bestellung')`))

	step(t, ctx, "a templated send reaches the chat",
		click("#template-send"),
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#chat-lines .bubble.bot .text')].some((n) => n.textContent.includes('Bestellung A-1001 ist unterwegs, Alice & Bob'))`))
}
