package delivery_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/quiet"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// Quiet hours end to end (spec v1-extensions §14), through the API, the outbox, kfake, the workers and the
// simulator. The tests do not wait for a window to end: a window is set around this minute in UTC, and its
// end is played by moving the window away and making the held notification due — the worker decides on
// the hours it reads at the claim.

// aroundNow is a window from an hour before this minute to an hour after it, in UTC.
func aroundNow(mode quiet.Mode) quiet.Hours {
	now := time.Now().UTC()
	m := now.Hour()*60 + now.Minute()
	return quiet.Hours{Start: quiet.Clock((m - 60 + quiet.MinutesPerDay) % quiet.MinutesPerDay),
		End: quiet.Clock((m + 60) % quiet.MinutesPerDay), Zone: "UTC", Mode: mode}
}

// later is a window that begins two hours from now: now is outside it.
func later(mode quiet.Mode) quiet.Hours {
	h := aroundNow(mode)
	h.Start, h.End = (h.Start+180)%quiet.MinutesPerDay, (h.End+180)%quiet.MinutesPerDay
	return h
}

func (e *env) quietHours(h *quiet.Hours) {
	e.t.Helper()
	if _, err := e.st.SetTenantQuietHours(context.Background(), "acme", h); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) sendAtOf(id string) *time.Time {
	e.t.Helper()
	return fixture.New(e.st).NotificationRow(e.t, id).SendAt
}

// hold: a send inside the window waits in scheduled, nothing reaches the chat; a high priority one goes at
// once; when the window is over it is delivered as usual, with a sound.
func TestQuietHoursHoldASendUntilTheWindowEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	h := aroundNow(quiet.Hold)
	e.quietHours(&h)
	e.user("night", 6001, true)
	e.start(e.fastOptions())

	held := e.sendBody(map[string]any{"user_id": "night", "message": "good morning"})
	urgent := e.sendBody(map[string]any{"user_id": "night", "message": "your door is open", "priority": 8})
	if r := e.waitTerminal(urgent, 20*time.Second); r.Status != "delivered" {
		t.Fatalf("the priority 8 send ended %+v, want delivered during quiet hours", r)
	}
	time.Sleep(500 * time.Millisecond) // several scheduler rounds
	if r := e.row(held); r.Status != "scheduled" || r.Attempts != 0 {
		t.Fatalf("the held send is %+v, want scheduled without an attempt", r)
	}
	if got := e.texts(6001); len(got) != 1 || got[0] != brand("your door is open") {
		t.Fatalf("chat 6001 received %q, want only the urgent message", got)
	}

	// The window ends: the hours no longer cover now, and the held notification's send_at has come.
	out := later(quiet.Hold)
	e.quietHours(&out)
	e.exec(`UPDATE notifications SET send_at = now() WHERE tracking_id = $1`, held)
	if r := e.waitTerminal(held, 20*time.Second); r.Status != "delivered" || r.Attempts != 1 {
		t.Fatalf("after the window the held send ended %+v, want delivered at its first attempt", r)
	}
	msgs := e.sim.Messages(6001)
	if len(msgs) != 2 || msgs[1].Text != brand("good morning") || msgs[1].DisableNotification {
		t.Fatalf("chat 6001 received %+v, want the held message last, with a sound", msgs)
	}
}

// The second decision, at the claim: a notification that reaches its turn inside the window — here a
// send_at that falls into hours set after its acceptance — goes back to scheduled with send_at at the
// window's end and the attempt not counted; cancel works while it is held.
func TestAWorkerHoldsANotificationWhoseTurnComesInsideTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("night", 6002, true)
	e.start(e.fastOptions())

	id := e.sendBody(map[string]any{"user_id": "night", "message": "reminder", "send_at": time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)})
	h := aroundNow(quiet.Hold)
	e.quietHours(&h)
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.row(id)
		if at := e.sendAtOf(id); r.Status == "scheduled" && at != nil && at.After(time.Now().Add(30*time.Minute)) {
			if r.Attempts != 0 {
				t.Fatalf("held at the claim with %d attempts, want 0", r.Attempts)
			}
			break
		}
		if time.Now().After(deadline) || terminal[r.Status] {
			t.Fatalf("notification %+v, send_at %v; want held by the worker until the window ends", r, e.sendAtOf(id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.texts(6002); len(got) != 0 {
		t.Fatalf("chat 6002 received %q during quiet hours", got)
	}
	if status, res := e.call("POST", "/v1/notifications/"+id+"/cancel", nil); status != http.StatusOK || res["status"] != "cancelled" {
		t.Fatalf("cancel while held: %d %v", status, res)
	}
}

// silent: delivered at once, without a sound — unless the send ignores quiet hours (its option, or its
// priority's default).
func TestSilentQuietHoursDeliverWithoutASound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	h := aroundNow(quiet.Silent)
	e.quietHours(&h)
	e.user("a", 6003, true)
	e.user("b", 6004, true)
	e.user("c", 6005, true)
	e.start(e.fastOptions())

	ids := []string{
		e.sendBody(map[string]any{"user_id": "a", "message": "quiet"}),
		e.sendBody(map[string]any{"user_id": "b", "message": "loud", "quiet_hours": "ignore"}),
		e.sendBody(map[string]any{"user_id": "c", "message": "urgent", "priority": 7}),
	}
	for _, id := range ids {
		if r := e.waitTerminal(id, 20*time.Second); r.Status != "delivered" {
			t.Fatalf("%s ended %+v, want delivered at once", id, r)
		}
	}
	for chat, silent := range map[int64]bool{6003: true, 6004: false, 6005: false} {
		msgs := e.sim.Messages(chat)
		if len(msgs) != 1 || msgs[0].DisableNotification != silent {
			t.Errorf("chat %d received %+v, want one message with disable_notification %v", chat, msgs, silent)
		}
	}
}

// expires_at still applies while held: the notification ends expired, and nothing is sent.
func TestAHeldNotificationExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	h := aroundNow(quiet.Hold)
	e.quietHours(&h)
	e.user("night", 6006, true)
	e.start(e.fastOptions())

	id := e.sendBody(map[string]any{"user_id": "night", "message": "flash sale", "expires_at": time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)})
	if r := e.waitTerminal(id, 20*time.Second); r.Status != "expired" || r.Attempts != 0 {
		t.Fatalf("a held notification past its expires_at ended %+v, want expired without an attempt", r)
	}
	if got := e.texts(6006); len(got) != 0 {
		t.Fatalf("chat 6006 received %q", got)
	}
}
