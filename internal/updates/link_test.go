package updates_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/heraldhq/herald/internal/brand"
)

const (
	textLinked         = "This chat is now connected. You will receive notifications here."
	textLinkedReplaced = "This chat is now connected and replaces the one connected before. You will receive notifications here; please verify your phone number again when the app asks."
	textLinkUnknown    = "This link is not valid. Please ask the app for a new link."
	textLinkExpired    = "This link has expired. Please ask the app for a new link."
	textLinkUsed       = "This link has already been used. If you want to connect again, please ask the app for a new link."
	textHelpLinked     = "This chat is connected: I deliver notifications here from the apps you connected it to. Send /stop to stop notifications (from one app, or of one kind) and /resume to receive them again. To connect another app, open the link it gave you."
	textStart          = "Hello! I deliver notifications from apps you use. To connect this chat, open the link the app gave you. Send /stop to stop notifications (from one app, or of one kind) and /resume to receive them again."
	textUnknown        = "Sorry, I did not understand that. To receive notifications here, open the link the app gave you."
)

// expectReply asserts a reply's chat, tenant, body and markup.
func expectReply(t *testing.T, r reply, chatID int64, tenantID, body string, markup map[string]any) {
	t.Helper()
	if r.ChatID != chatID {
		t.Errorf("reply chat_id = %d, want %d", r.ChatID, chatID)
	}
	if deref(r.TenantID) != tenantID {
		t.Errorf("reply tenant = %q, want %q", deref(r.TenantID), tenantID)
	}
	if r.Body != body {
		t.Errorf("reply body = %q, want %q", r.Body, body)
	}
	if (markup == nil) != (r.ReplyMarkup == nil) || (markup != nil && !equalJSON(markup, r.ReplyMarkup)) {
		t.Errorf("reply_markup = %v, want %v", r.ReplyMarkup, markup)
	}
}

func equalJSON(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestStartWithAValidTokenLinks(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"/start %s", "/start@herald_test_bot %s", "/START  %s  "} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.tenant("acme", "Acme Dev")
			tok := e.token("acme", "user-1", "Acme Shop", "")
			expectOK(t, e.post(textUpdate(e.updateID(), 501, strings.Replace(form, "%s", tok, 1))))
			if got := e.links("acme", "user-1"); len(got) != 1 || got[0] != (linkRow{501, 501}) {
				t.Fatalf("links = %+v, want user-1 linked to messenger user 501 in chat 501", got)
			}
			if n := e.count(`SELECT count(*) FROM link_tokens WHERE used_at IS NOT NULL`); n != 1 {
				t.Fatal("the token was not consumed")
			}
			expectReply(t, e.onlyReply(), 501, "acme", brand.Render("Acme Shop", textLinked), nil)
		})
	}
}

func TestStartWithoutTokenExplains(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expectOK(t, e.post(textUpdate(e.updateID(), 502, "/start")))
	expectReply(t, e.onlyReply(), 502, "", textStart, nil)
}

func TestStartWithAnUnusableToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	expired := e.token("acme", "u-exp", "Acme Label", "expired")
	used := e.token("acme", "u-used", "Acme Label", "used")
	cases := []struct {
		name, text, tenant, body string
	}{
		{"expired", "/start " + expired, "acme", brand.Render("Acme Label", textLinkExpired)},
		{"used", "/start " + used, "acme", brand.Render("Acme Label", textLinkUsed)},
		{"unknown", "/start " + strings.Repeat("A", 43), "", textLinkUnknown},
		{"not a token", "/start <script>", "", textLinkUnknown},
		{"too long", "/start " + strings.Repeat("A", 65), "", textLinkUnknown},
	}
	for i, c := range cases {
		expectOK(t, e.post(textUpdate(e.updateID(), int64(600+i), c.text)))
	}
	rs := e.wantReplies(len(cases))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectReply(t, rs[i], int64(600+i), c.tenant, c.body, nil) })
	}
	if n := e.count(`SELECT count(*) FROM links`); n != 0 {
		t.Fatalf("%d links after unusable tokens, want 0", n)
	}
	if n := e.count(`SELECT count(*) FROM link_tokens WHERE used_at IS NOT NULL`); n != 1 {
		t.Fatalf("token use changed: %d used, want only the one used before", n)
	}
}

func TestTokenIsSingleUse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	tok := e.token("acme", "u1", "Acme", "")
	expectOK(t, e.post(textUpdate(e.updateID(), 701, "/start "+tok)))
	expectOK(t, e.post(textUpdate(e.updateID(), 702, "/start "+tok))) // someone else, with the same link
	if got := e.links("acme", "u1"); len(got) != 1 || got[0].MessengerUserID != 701 {
		t.Fatalf("links = %+v, want the first redeemer only", got)
	}
	rs := e.wantReplies(2)
	expectReply(t, rs[0], 701, "acme", brand.Render("Acme", textLinked), nil)
	expectReply(t, rs[1], 702, "acme", brand.Render("Acme", textLinkUsed), nil)
}

func TestDuplicateUpdateTakesEffectOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	tok := e.token("acme", "u1", "Acme", "")
	u := textUpdate(e.updateID(), 801, "/start "+tok)
	for range 3 {
		expectOK(t, e.post(u)) // the platform redelivers until it sees a 2xx
	}
	// A repeated id also has no effect when the content differs (a forged or confused redelivery).
	expectOK(t, e.post(textUpdate(u["update_id"].(int64), 801, "/start")))
	if got := e.links("acme", "u1"); len(got) != 1 {
		t.Fatalf("links = %+v, want one", got)
	}
	expectReply(t, e.onlyReply(), 801, "acme", brand.Render("Acme", textLinked), nil)
}

func TestConcurrentCopiesOfOneUpdateTakeEffectOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	tok := e.token("acme", "u1", "Acme", "")
	u := textUpdate(e.updateID(), 811, "/start "+tok)
	const copies = 8
	var wg sync.WaitGroup
	statuses := make([]response, copies)
	for i := range copies {
		wg.Go(func() { statuses[i] = e.post(u) })
	}
	wg.Wait()
	for _, r := range statuses {
		expectOK(t, r)
	}
	if n := e.count(`SELECT count(*) FROM processed_updates`); n != 1 {
		t.Fatalf("%d processed updates, want 1", n)
	}
	expectReply(t, e.onlyReply(), 811, "acme", brand.Render("Acme", textLinked), nil)
}

func TestConcurrentRedemptionsOfOneTokenLinkOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	tok := e.token("acme", "u1", "Acme", "")
	const users = 8
	var wg sync.WaitGroup
	res := make([]response, users)
	for i := range users {
		u := textUpdate(e.updateID(), int64(900+i), "/start "+tok)
		wg.Go(func() { res[i] = e.post(u) })
	}
	wg.Wait()
	for _, r := range res {
		expectOK(t, r)
	}
	links := e.links("acme", "u1")
	if len(links) != 1 {
		t.Fatalf("links = %+v, want exactly one", links)
	}
	winner := links[0].MessengerUserID
	linked, used := 0, 0
	for _, r := range e.replies() {
		switch r.Body {
		case brand.Render("Acme", textLinked):
			linked++
			if r.ChatID != winner {
				t.Errorf("the confirmation went to chat %d, but %d was linked", r.ChatID, winner)
			}
		case brand.Render("Acme", textLinkUsed):
			used++
		default:
			t.Errorf("unexpected reply %q", r.Body)
		}
	}
	if linked != 1 || used != users-1 {
		t.Fatalf("replies: %d linked, %d used; want 1 and %d", linked, used, users-1)
	}
}

func TestRelinkingToAnotherAccountResetsVerification(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	e.link("acme", "u1", 1001)
	label := "Acme"
	e.session("acme", "u1", "verified", &label)

	// The same account again (a new token, e.g. a new device flow): the link and the verification stay.
	expectOK(t, e.post(textUpdate(e.updateID(), 1001, "/start "+e.token("acme", "u1", "Acme", ""))))
	if v := e.verification("acme", "u1"); v.Status != "verified" {
		t.Fatalf("relinking the same account changed verification to %s", v.Status)
	}

	// Another account: the link moves and the verification resets.
	expectOK(t, e.post(textUpdate(e.updateID(), 2002, "/start "+e.token("acme", "u1", "Acme", ""))))
	if got := e.links("acme", "u1"); len(got) != 1 || got[0] != (linkRow{2002, 2002}) {
		t.Fatalf("links = %+v, want the new account", got)
	}
	v := e.verification("acme", "u1")
	if v.Status != "unverified" || v.PhoneLast4 != nil || v.PhoneHash != nil || v.VerifiedAt != nil {
		t.Fatalf("verification after relink = %+v, want unverified with no phone data", v)
	}
	rs := e.wantReplies(2)
	expectReply(t, rs[0], 1001, "acme", brand.Render("Acme", textLinked), nil)
	expectReply(t, rs[1], 2002, "acme", brand.Render("Acme", textLinkedReplaced), nil)
}

func TestFreeTextAndUnknownCommandsGetTheGenericReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, text := range []string{"hello", "/settings@herald_test_bot", "/", "/helpme"} {
		expectOK(t, e.post(textUpdate(e.updateID(), int64(1100+i), text)))
	}
	rs := e.wantReplies(4)
	for i, r := range rs {
		expectReply(t, r, int64(1100+i), "", textUnknown, nil)
	}
	if r := e.post(textUpdate(e.updateID(), 1, "x")); r.status != http.StatusOK {
		t.Fatal("a plain message was not acknowledged")
	}
}

// /help in a chat that is connected already does not ask to connect it.
func TestHelpInALinkedChatDoesNotAskToConnectIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Shop")
	e.link("acme", "user-1", 503)
	expectOK(t, e.post(textUpdate(e.updateID(), 503, "/help")))
	expectReply(t, e.onlyReply(), 503, "", textHelpLinked, nil)
}
