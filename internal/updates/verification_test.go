package updates_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/brand"
)

const (
	textVerified       = "Thank you, your phone number is verified."
	textNotOwnContact  = "I can only verify your own phone number. Please tap the \"Share my phone number\" button instead of sending a contact."
	textBadPhone       = "I could not read that phone number. Please tap the \"Share my phone number\" button to share your own number."
	textNoSession      = "There is no phone verification waiting for you. Please start it in the app first."
	textSessionExpired = "Your phone verification has expired. Please start it again in the app."
)

func hmacOf(e164 string) []byte {
	m := hmac.New(sha256.New, []byte(phoneHashKey))
	m.Write([]byte(e164))
	return m.Sum(nil)
}

func TestOwnContactCompletesEveryPendingSessionAcrossTenants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Developer")
	e.tenant("initech", "Initech Dev")
	const me = int64(3001)
	acmeLabel := "Acme Shop"
	e.link("acme", "a-1", me)
	e.session("acme", "a-1", "pending", &acmeLabel)
	e.link("globex", "g-1", me)
	e.session("globex", "g-1", "pending", nil) // no label snapshot: the developer name brands
	e.link("initech", "i-1", me)
	e.session("initech", "i-1", "expired", nil) // past its expiry: left alone
	e.link("acme", "other", 3002)
	e.session("acme", "other", "pending", nil) // someone else's session: left alone

	// Without the "+", with spaces and dashes: normalised to +15551230001.
	expectOK(t, e.post(contactUpdate(e.updateID(), me, "1 555-123 0001", me)))

	for _, tu := range [][2]string{{"acme", "a-1"}, {"globex", "g-1"}} {
		v := e.verification(tu[0], tu[1])
		if v.Status != "verified" || deref(v.PhoneLast4) != "0001" || v.VerifiedAt == nil {
			t.Fatalf("%s/%s = %+v, want verified with last4 0001", tu[0], tu[1], v)
		}
		if !bytes.Equal(v.PhoneHash, hmacOf("+15551230001")) {
			t.Fatalf("%s/%s: stored hash is not HMAC-SHA256 of the E.164 number under the key", tu[0], tu[1])
		}
	}
	if v := e.verification("initech", "i-1"); v.Status != "pending" || v.PhoneLast4 != nil {
		t.Fatalf("the expired session changed: %+v", v)
	}
	if v := e.verification("acme", "other"); v.Status != "pending" || v.PhoneLast4 != nil {
		t.Fatalf("another user's session changed: %+v", v)
	}
	// The full number is stored nowhere.
	if n := e.count(`SELECT count(*) FROM phone_verifications WHERE phone_hash::text LIKE '%5551230001%' OR phone_last4 <> '0001'`); n != 0 {
		t.Fatal("the phone number is stored in clear")
	}

	rs := e.wantReplies(2) // one per completed session
	got := map[string]reply{}
	for _, r := range rs {
		got[deref(r.TenantID)] = r
	}
	expectReply(t, got["acme"], me, "acme", brand.Render("Acme Shop", textVerified), removeKeyboard)
	expectReply(t, got["globex"], me, "globex", brand.Render("Globex Developer", textVerified), removeKeyboard)
}

func TestContactsThatDoNotVerify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		session       string // of the sender's linked user
		contactUserID func(me int64) int64
		phone         string
		tenant, body  string
		markup        map[string]any
	}{
		{"foreign contact", "pending", func(me int64) int64 { return me + 1 }, "+15551230001", "", textNotOwnContact, nil},
		{"contact without user_id", "pending", func(int64) int64 { return 0 }, "+15551230001", "", textNotOwnContact, nil},
		{"unreadable number", "pending", func(me int64) int64 { return me }, "call me", "", textBadPhone, nil},
		{"no pending session", "verified", func(me int64) int64 { return me }, "+15551230001", "", textNoSession, removeKeyboard},
		{"not linked at all", "", func(me int64) int64 { return me }, "+15551230001", "", textNoSession, removeKeyboard},
		{"expired session", "expired", func(me int64) int64 { return me }, "+15551230001", "acme", brand.Render("Acme Label", textSessionExpired), removeKeyboard},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.tenant("acme", "Acme Dev")
			const me = int64(4001)
			label := "Acme Label"
			if c.session != "" {
				e.link("acme", "u1", me)
				e.session("acme", "u1", c.session, &label)
			}
			before := ""
			if c.session != "" {
				before = e.verification("acme", "u1").Status
			}
			expectOK(t, e.post(contactUpdate(e.updateID(), me, c.phone, c.contactUserID(me))))
			if c.session != "" {
				v := e.verification("acme", "u1")
				if v.Status != before || (c.session != "verified" && v.PhoneLast4 != nil) {
					t.Fatalf("verification changed to %+v", v)
				}
			}
			expectReply(t, e.onlyReply(), me, c.tenant, c.body, c.markup)
		})
	}
}

func TestDuplicateContactShareRepliesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	e.link("acme", "u1", 5001)
	e.session("acme", "u1", "pending", nil)
	u := contactUpdate(e.updateID(), 5001, "+15551230001", 5001)
	expectOK(t, e.post(u))
	expectOK(t, e.post(u))
	expectReply(t, e.onlyReply(), 5001, "acme", brand.Render("Acme Dev", textVerified), removeKeyboard)
}

// The phone number must not appear in logs, responses or stored replies, in any of its forms.
func TestPhoneNumbersNeverLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	const me = int64(6001)
	e.link("acme", "u1", me)
	e.session("acme", "u1", "pending", nil)
	raw := "+44 20 7946 0958"
	var bodies []string
	for _, u := range []map[string]any{
		contactUpdate(e.updateID(), me, raw, me),                 // verifies
		contactUpdate(e.updateID(), me, raw, me),                 // no session left
		contactUpdate(e.updateID(), me, raw, me+1),               // foreign
		contactUpdate(e.updateID(), me, raw, 0),                  // without user_id
		contactUpdate(e.updateID(), me, "44207946095812345", me), // unreadable (too long)
		{"update_id": e.updateID(), "message": map[string]any{"contact": map[string]any{"phone_number": 442079460958}}}, // malformed
	} {
		r := e.post(u)
		bodies = append(bodies, string(r.body))
	}
	if v := e.verification("acme", "u1"); v.Status != "verified" {
		t.Fatalf("the flow did not verify: %+v", v)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "phone verified") {
		t.Fatalf("the log capture saw nothing of the flow:\n%s", logs)
	}
	var replies strings.Builder
	for _, r := range e.replies() {
		replies.WriteString(r.Body)
	}
	for _, form := range []string{"+442079460958", "442079460958", "2079460958", "7946 0958", "20 7946", "4420794609581"} {
		if strings.Contains(logs, form) {
			t.Errorf("the logs contain the phone number (%q):\n%s", form, logs)
		}
		for _, b := range bodies {
			if strings.Contains(b, form) {
				t.Errorf("a response contains the phone number (%q): %s", form, b)
			}
		}
		if strings.Contains(replies.String(), form) {
			t.Errorf("a reply contains the phone number (%q)", form)
		}
	}
}
