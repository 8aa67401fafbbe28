package delivery_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// A notification only ever reaches the chat whose owner was verified when it was accepted. Alice links and
// verifies her account; three notifications are on their way — one scheduled for later, one whose send
// hangs at the platform (delivering), one queued behind it — when her user is linked to another account.
// None of the three reaches the new account: the scheduled and the queued one end unlinked with the relink,
// the one being delivered ends its attempt and is not retried there. The new chat receives the link's
// confirmation only.
func TestARelinkedUsersNotificationsNeverReachTheNewAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, simOptions(nil))
	e.webhook(e.logger)
	opts := e.fastOptions()
	opts.PerChatInterval = 10 * time.Millisecond
	// The hanging send holds the queued one back until it times out: long enough for the relink to come
	// first.
	opts.Lease, opts.SendTimeout = 20*time.Second, 5*time.Second
	e.start(opts)
	const owner, newcomer = int64(7301), int64(7302)
	e.linkThroughWebhook("alice", owner)
	e.verifyThroughWebhook("alice", owner, "+15551234567")
	e.settle()

	status, m := e.call("POST", "/v1/send", map[string]any{"user_id": "alice", "message": "later", "send_at": rfc3339(time.Now().Add(time.Hour))})
	scheduled, _ := m["tracking_id"].(string)
	if status != http.StatusAccepted || m["status"] != "scheduled" {
		t.Fatalf("scheduled send: %d %v", status, m)
	}
	must(t, e.sim.SetFaults(sim.Faults{NextTimeouts: 1}))
	inFlight, _ := e.send("alice", "in flight", 5)
	wait.Until(t, 10*time.Second, "the send to hang at the platform", func() bool { return e.sim.Faults().NextTimeouts == 0 })
	queued, _ := e.send("alice", "queued behind it", 5)
	if r := e.row(queued); r.Status != "queued" {
		t.Fatalf("the second notification is %s before the relink; the test needs it queued", r.Status)
	}

	e.linkThroughWebhook("alice", newcomer)
	wait.Until(t, 10*time.Second, "the link's confirmation in the new chat", func() bool { return len(e.sim.Messages(newcomer)) == 1 })
	got := e.waitAllTerminal([]string{inFlight, queued}, 30*time.Second)
	var texts []string
	for _, msg := range e.sim.Messages(newcomer) {
		texts = append(texts, msg.Text)
	}
	if len(texts) != 1 || !strings.Contains(texts[0], "replaces the one connected before") {
		t.Fatalf("the new account's chat received %q; want the link's confirmation only (the notifications ended %v)", texts, got)
	}
	for name, id := range map[string]string{"scheduled": scheduled, "in flight": inFlight, "queued": queued} {
		r := e.row(id)
		if r.Status != "unlinked" || r.ErrCode != 1101 || r.ErrMsg == nil || *r.ErrMsg != "the user linked another messenger account" {
			t.Errorf("the %s notification: %s, %d %v; want unlinked, 1101 \"the user linked another messenger account\"", name, r.Status, r.ErrCode, r.ErrMsg)
		}
	}
	if slices.ContainsFunc(e.texts(owner), func(s string) bool { return strings.Contains(s, "queued behind it") || strings.Contains(s, "later") }) {
		t.Errorf("the owner's chat received a notification that was ended by the relink: %q", e.texts(owner))
	}
}
