package updates_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// A platform update may carry a NUL (U+0000) in any string — its text, a command's argument, a contact's
// number or names, a username — which PostgreSQL cannot store. None of those strings is stored: a command's
// argument is parsed into what is (a token's digest, a tracking id), a number into its digest and last four
// digits, names and usernames are not kept, and a reply's text is Herald's own. So such an update is handled
// like any other — acknowledged, with the reply its content deserves — and fails no other user's update
// that shares its batch.
func TestUpdatesHoldingANULAreHandledAndFailNoOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const each = 12
	e.tenant("acme", "Acme Dev", 7002, 7008) // the senders of "/dev_status \x00" are developers: it reaches the lookup
	nul := func(i int, from int64) map[string]any {
		switch i % 6 {
		case 0:
			return textUpdate(e.updateID(), from, "hello\x00world")
		case 1:
			return textUpdate(e.updateID(), from, "/start tok\x00en")
		case 2:
			return textUpdate(e.updateID(), from, "/dev_status \x00")
		case 3:
			return contactUpdate(e.updateID(), from, "+1 555\x00 0100 123", from)
		case 4:
			u := contactUpdate(e.updateID(), from, "+15550100123", from)
			u["message"].(map[string]any)["contact"].(map[string]any)["first_name"] = "A\x00nn"
			return u
		}
		u := textUpdate(e.updateID(), from, "hi")
		msg := u["message"].(map[string]any)
		msg["from"].(map[string]any)["username"] = "a\x00b"
		msg["from"].(map[string]any)["last_name"] = "\x00"
		msg["chat"].(map[string]any)["username"] = "a\x00b"
		return u
	}
	tokens := make([]string, each)
	for i := range tokens {
		tokens[i] = e.token("acme", fmt.Sprintf("user-%d", i), "Acme Shop", "")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	check := func(what string, r response) {
		if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"ok":true}` {
			mu.Lock()
			failures = append(failures, fmt.Sprintf("%s: %d %s", what, r.status, r.body))
			mu.Unlock()
		}
	}
	for i := range each {
		wg.Go(func() { check(fmt.Sprintf("update %d holding a NUL", i), e.post(nul(i, int64(7000+i)))) })
		wg.Go(func() {
			check(fmt.Sprintf("link %d", i), e.post(textUpdate(e.updateID(), int64(8000+i), "/start "+tokens[i])))
		})
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	for i := range each {
		if got := e.links("acme", fmt.Sprintf("user-%d", i)); len(got) != 1 || got[0].ChatID != int64(8000+i) {
			t.Errorf("user-%d: links %+v, want linked to chat %d", i, got, 8000+i)
		}
	}
	// Every update answered once, and nothing of the NULs stored.
	if rs := e.replies(); len(rs) != 2*each {
		t.Errorf("%d replies, want one per update (%d)", len(rs), 2*each)
	}
	if n := e.count(`SELECT count(*) FROM processed_updates`); n != 2*each {
		t.Errorf("%d updates recorded as processed, want %d", n, 2*each)
	}
}
