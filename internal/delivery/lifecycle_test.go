package delivery_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// The lifecycle of v1 extensions §2 on the whole pipeline: the tenant API, the outbox, Kafka (kfake), the
// workers and the simulator.

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// sendWith posts /v1/send with options and returns the tracking id and the answered status.
func (e *env) sendWith(body map[string]any) (string, string) {
	e.t.Helper()
	code, out := e.call("POST", "/v1/send", body)
	if code != http.StatusAccepted {
		e.t.Fatalf("POST /v1/send: %d %v", code, out)
	}
	return out["tracking_id"].(string), out["status"].(string)
}

// warmUp waits until the started workers deliver (they have joined the group), so that a test's timing
// starts from a running pipeline.
func (e *env) warmUp(chat int64) {
	e.t.Helper()
	user := fmt.Sprintf("warm-%d", chat)
	e.user(user, chat, true)
	id, _ := e.send(user, "warm-up", 5)
	e.waitStatus(id, "delivered", 30*time.Second)
}

func (e *env) deliveredAt(id string) time.Time {
	e.t.Helper()
	at := fixture.New(e.st).NotificationRow(e.t, id).DeliveredAt
	if at == nil {
		e.t.Fatalf("%s has no delivered_at", id)
	}
	return *at
}

// scheduled → queued when send_at is reached (within a second), not before: nothing reaches the chat
// before send_at, and with two workers each scheduled notification is released and delivered once.
func TestScheduledIsDeliveredOnTimeAndNotBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	opts := e.fastOptions()
	e.start(opts)
	e.start(opts) // a second worker of the same group: two schedulers compete
	e.warmUp(5099)
	const n = 12
	for i := range n {
		e.user(fmt.Sprintf("s%d", i), int64(5100+i), true)
	}
	// The users are linked first, so that send_at is still ahead when the last send is answered on a busy
	// machine: each answer must say scheduled.
	base := time.Now().Add(4 * time.Second)
	ids := make([]string, n)
	sendAt := make([]time.Time, n)
	for i := range n {
		sendAt[i] = base.Add(time.Duration(i%4) * 300 * time.Millisecond)
		id, status := e.sendWith(map[string]any{"user_id": fmt.Sprintf("s%d", i), "message": "at its time", "send_at": rfc3339(sendAt[i])})
		if status != "scheduled" {
			t.Fatalf("202 says %q %v before its send_at, want scheduled", status, time.Until(sendAt[i]))
		}
		ids[i] = id
	}
	if r := e.row(ids[0]); r.Status != "scheduled" {
		t.Fatalf("stored as %s, want scheduled", r.Status)
	}
	e.waitAllTerminal(ids, 30*time.Second)
	for i, id := range ids {
		msgs := e.sim.Messages(int64(5100 + i))
		if len(msgs) != 1 {
			t.Fatalf("chat of %s received %d messages, want exactly 1 (released once by two schedulers)", id, len(msgs))
		}
		if msgs[0].Time.Before(sendAt[i]) {
			t.Errorf("%s reached the chat %v before its send_at", id, sendAt[i].Sub(msgs[0].Time))
		}
		if late := e.deliveredAt(id).Sub(sendAt[i]); late > time.Second {
			t.Errorf("%s delivered %v after its send_at, want within a second", id, late)
		}
	}
	e.assertNoViolations()
}

// retrying, expires_at reached → expired (the sweep): the retry never starts.
func TestExpiresWhileRetrying(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	opts := e.fastOptions()
	opts.Backoff = notification.Backoff{Base: time.Minute, Max: time.Minute} // the retry would come long after expires_at
	e.start(opts)
	e.warmUp(5200)
	e.user("u1", 5201, true)
	must(t, e.sim.SetFaults(sim.Faults{Next5xx: 1}))
	expires := time.Now().Add(1500 * time.Millisecond)
	id, _ := e.sendWith(map[string]any{"user_id": "u1", "message": "too late", "expires_at": rfc3339(expires)})
	mid := e.waitStatus(id, "retrying", 10*time.Second)
	if mid.Attempts != 1 {
		t.Fatalf("retrying row %+v, want one attempt", mid)
	}
	r := e.waitStatus(id, "expired", 10*time.Second)
	if r.Attempts != 1 || r.ErrCode != 500 {
		t.Errorf("expired row %+v, want the one attempt and its error kept", r)
	}
	if late := r.UpdatedAt.Sub(expires); late < 0 || late > 1500*time.Millisecond {
		t.Errorf("expired %v after expires_at, want within the sweep's second", late)
	}
	if got := e.texts(5201); len(got) != 0 {
		t.Errorf("chat received %q", got)
	}
}

// delivering, an attempt fails transiently after expires_at → expired (the state machine), not retrying.
func TestAttemptFailingAfterExpiresAtExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.start(e.fastOptions())
	e.warmUp(5300)
	e.user("u1", 5301, true)
	must(t, e.sim.SetFaults(sim.Faults{ErrorRate5xx: 1, LatencyMS: 1200}))
	id, _ := e.sendWith(map[string]any{"user_id": "u1", "message": "slow", "expires_at": rfc3339(time.Now().Add(600 * time.Millisecond))})
	r := e.waitTerminal(id, 20*time.Second)
	if r.Status != "expired" || r.Attempts != 1 || r.ErrCode != 500 {
		t.Fatalf("row %+v, want expired after its one attempt failed past expires_at", r)
	}
}

// A queued notification whose expires_at passes before a worker takes it is never attempted: the claim
// refuses it (and the sweep would too).
func TestQueuedPastExpiresAtIsNeverAttempted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("u1", 5401, true)
	id, _ := e.sendWith(map[string]any{"user_id": "u1", "message": "stale", "expires_at": rfc3339(time.Now().Add(300 * time.Millisecond))})
	time.Sleep(400 * time.Millisecond)
	opts := e.fastOptions()
	opts.ExpireInterval = time.Hour // only the claim can expire it
	e.start(opts)
	r := e.waitStatus(id, "expired", 20*time.Second)
	if r.Attempts != 0 {
		t.Errorf("row %+v, want no attempt", r)
	}
	if st := e.sim.Stats(); st.Sends != 0 {
		t.Errorf("the simulator saw %d sends", st.Sends)
	}
}

// A cancelled notification is never sent, even though its envelope is on Kafka and a worker reads it.
func TestCancelledIsNeverSentThoughItsEnvelopeIsRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("u1", 5501, true)
	e.user("u2", 5502, true)
	id, _ := e.send("u1", "cancel me", 5)
	if code, out := e.call("POST", "/v1/notifications/"+id+"/cancel", nil); code != http.StatusOK || out["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, out)
	}
	e.start(e.fastOptions())
	// A later message on the same partition key is delivered: the worker has read past the cancelled one.
	after, _ := e.send("u1", "after", 5)
	e.waitStatus(after, "delivered", 30*time.Second)
	if got := e.texts(5501); len(got) != 1 || got[0] != brand("after") {
		t.Fatalf("chat received %q, want only the message after the cancelled one", got)
	}
	if r := e.row(id); r.Status != "cancelled" || r.Attempts != 0 {
		t.Errorf("cancelled row %+v", r)
	}
}

// Many cancels racing the worker's claims: each notification ends either cancelled (the cancel answered
// 200) and never sent, or sent and delivered (the cancel answered 409 not_cancellable).
func TestCancelRacingWorkerClaims(t *testing.T) {
	t.Parallel()
	// The platform takes what the worker's limit (fastOptions: 1,000/s) sends: with the simulator's default
	// 30/s, the sixty sends at once were answered 429 and retried, and on a loaded machine a few ran out of
	// attempts — a test of throttling, not of the race it is about.
	e := newEnv(t, sim.Options{GlobalRate: 1000})
	opts := e.fastOptions()
	e.start(opts)
	e.warmUp(5600)
	const n = 60
	for i := range n {
		e.user(fmt.Sprintf("c%d", i), int64(5601+i), true)
	}
	ids := make([]string, n)
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ids[i], _ = e.send(fmt.Sprintf("c%d", i), "race", 5)
			time.Sleep(time.Duration(i%6) * time.Millisecond) // spread the cancels around the claims
			var out map[string]any
			codes[i], out = e.call("POST", "/v1/notifications/"+ids[i]+"/cancel", nil)
			if codes[i] == http.StatusConflict && out["error"] != "not_cancellable" {
				t.Errorf("409 with %v", out)
			}
		})
	}
	wg.Wait()
	final := e.waitAllTerminal(ids, 30*time.Second)
	won := map[int]int{}
	for i, id := range ids {
		sent := len(e.texts(int64(5601 + i)))
		won[codes[i]]++
		switch {
		case codes[i] == http.StatusOK && final[id] == "cancelled" && sent == 0:
		case codes[i] == http.StatusConflict && final[id] == "delivered" && sent == 1:
		default:
			t.Errorf("%s: cancel answered %d, ended %s, sent %d times", id, codes[i], final[id], sent)
		}
	}
	t.Logf("cancel answers: %v", won)
}

// Erasing a user with a scheduled and a retrying notification cancels both; neither is ever sent, and a
// later send for the user is refused.
func TestEraseCancelsScheduledAndRetrying(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	opts := e.fastOptions()
	opts.Backoff = notification.Backoff{Base: 2 * time.Second, Max: 2 * time.Second}
	e.start(opts)
	e.warmUp(5700)
	e.user("u1", 5701, true)
	scheduled, _ := e.sendWith(map[string]any{"user_id": "u1", "message": "later", "send_at": rfc3339(time.Now().Add(1500 * time.Millisecond))})
	must(t, e.sim.SetFaults(sim.Faults{Next5xx: 1}))
	retrying, _ := e.send("u1", "again", 5)
	e.waitStatus(retrying, "retrying", 10*time.Second)
	if code, out := e.call("DELETE", "/v1/users/u1", nil); code != http.StatusNoContent {
		t.Fatalf("erase: %d %v", code, out)
	}
	time.Sleep(3 * time.Second) // past the send_at and the retry's due time
	for _, id := range []string{scheduled, retrying} {
		if r := e.row(id); r.Status != "cancelled" {
			t.Errorf("%s is %s, want cancelled", id, r.Status)
		}
	}
	if got := e.texts(5701); len(got) != 0 {
		t.Errorf("chat received %q after the erasure", got)
	}
	if n := e.countBodies("u1"); n != 0 {
		t.Errorf("%d bodies left", n)
	}
	if code, out := e.call("POST", "/v1/send", map[string]any{"user_id": "u1", "message": "hi"}); code != http.StatusConflict || out["error"] != "phone_unverified" {
		t.Errorf("a send after the erasure: %d %v, want 409 phone_unverified", code, out)
	}
}

func (e *env) countBodies(user string) int {
	e.t.Helper()
	n := 0
	for _, r := range fixture.New(e.st).NotificationRows(e.t) {
		if r.UserID != nil && *r.UserID == user && r.Body != "" {
			n++
		}
	}
	return n
}
