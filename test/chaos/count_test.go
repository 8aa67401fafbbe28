package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
)

// The counting is the suite's measuring instrument; these tests check it on hand-made runs.

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

type fakeRun struct {
	users    []User
	attempts []Attempt
	messages map[int64][]sim.SentMessage
}

func newFakeRun(users int) *fakeRun {
	r := &fakeRun{messages: map[int64][]sim.SentMessage{}}
	for i := range users {
		r.users = append(r.users, User{ID: fmt.Sprintf("u%02d", i), ChatID: int64(100 + i)})
	}
	return r
}

// send records a send by user at sentMs answered status at sentMs+10 and returns its token.
func (r *fakeRun) send(user, seq, sentMs, status int) string {
	tok := fmt.Sprintf("chaos-abc-%s-%06d", r.users[user].ID, seq)
	r.attempts = append(r.attempts, Attempt{User: user, Seq: seq, Token: tok, Sent: at(sentMs), Done: at(sentMs + 10), Status: status})
	return tok
}

// receive records the platform receiving text in user's chat at ms.
func (r *fakeRun) receive(user int, text string, ms int) {
	chat := r.users[user].ChatID
	r.messages[chat] = append(r.messages[chat], sim.SentMessage{ChatID: chat, Text: "A message from Chaos\n" + text, Time: at(ms)})
}

func (r *fakeRun) count(faults ...Fault) Result {
	return count(countInput{Users: r.users, Attempts: r.attempts, Messages: r.messages, Faults: faults, Interval: time.Second, Limit: 10})
}

func TestCountSeesLossDuplicatesPhantomsAndOrder(t *testing.T) {
	r := newFakeRun(2)
	a := r.send(0, 0, 0, 202)
	b := r.send(0, 1, 1000, 202)
	c := r.send(0, 2, 2000, 202)
	lost := r.send(1, 0, 0, 202)
	phantom := r.send(1, 1, 1000, 502)
	unknown := r.send(1, 2, 2000, 0) // a transport error: delivered or not, either is fine
	r.receive(0, a, 100)
	r.receive(0, c, 1200) // c overtakes b
	r.receive(0, b, 2300)
	r.receive(0, a, 3400) // a again
	r.receive(1, phantom, 1100)
	r.receive(1, unknown, 2500)

	got := r.count(Fault{Name: "f", Start: at(500), End: at(1500)})
	want := Result{Sent: 6, Accepted: 4, Delivered: 3, Lost: 1, Duplicates: 1, Phantoms: 1, OutOfOrder: 1}
	if got.Sent != want.Sent || got.Accepted != want.Accepted || got.Delivered != want.Delivered || got.Lost != want.Lost ||
		got.Duplicates != want.Duplicates || got.Phantoms != want.Phantoms || got.OutOfOrder != want.OutOfOrder {
		t.Errorf("got %s", got.Summary())
	}
	if len(got.LostTokens) != 1 || got.LostTokens[0] != lost {
		t.Errorf("lost tokens %v, want [%s]", got.LostTokens, lost)
	}
	if got.During.Accepted != 1 || got.During.Status502 != 1 {
		t.Errorf("answers during the fault %+v, want one 202 and one 502", got.During)
	}
	if got.RecoveryDelivery >= 0 {
		t.Errorf("recovery %v with a message lost, want -1 (never)", got.RecoveryDelivery)
	}
}

func TestCountPacingIsPerChatAndIncludesEveryMessage(t *testing.T) {
	r := newFakeRun(2)
	r.receive(0, "Welcome", 0) // a system message counts: the platform does not care who wrote it
	r.receive(0, r.send(0, 0, 0, 202), 960)
	r.receive(0, r.send(0, 1, 100, 202), 1900) // 940 ms after the previous one: under 95 % of 1 s
	r.receive(1, r.send(1, 0, 0, 202), 1901)   // another chat: no pacing relation
	got := r.count()
	if got.PacingViolations != 1 || got.MinGap != 940*time.Millisecond {
		t.Errorf("pacing violations %d (min gap %v), want 1 (940ms)", got.PacingViolations, got.MinGap)
	}
}

func TestCountGlobalWindowIsSlidingOverAllChats(t *testing.T) {
	// Limit 10/s: 10 × 1.05 = 10.5, so the 11th message in any window (t-1s, t] is a violation.
	r := newFakeRun(12)
	for i := range 10 {
		r.receive(i, r.send(i, 0, 0, 202), 500+50*i) // 10 within 500..950 ms
	}
	r.receive(10, r.send(10, 0, 0, 202), 1499) // window (499, 1499] holds 11
	r.receive(11, r.send(11, 0, 0, 202), 2600) // alone
	got := r.count()
	if got.GlobalViolations != 1 || got.MaxPerSecond != 11 {
		t.Errorf("global violations %d (max %d/s), want 1 (11/s)", got.GlobalViolations, got.MaxPerSecond)
	}

	r = newFakeRun(11)
	for i := range 10 {
		r.receive(i, r.send(i, 0, 0, 202), 500+50*i)
	}
	r.receive(10, r.send(10, 0, 0, 202), 1500) // exactly 1 s after the first: (500, 1500] holds 10
	if got := r.count(); got.GlobalViolations != 0 {
		t.Errorf("global violations %d at exactly the limit, want 0", got.GlobalViolations)
	}
}

func TestRecoveryMeasuresFirst202AndBacklog(t *testing.T) {
	r := newFakeRun(2)
	// Before the fault (ends at 5000): accepted at 1010, delivered at 9000: part of the backlog.
	r.receive(0, r.send(0, 0, 1000, 202), 9000)
	// During: refused.
	r.send(1, 0, 3000, 503)
	// After: first 202 answered at 6010; delivered quickly.
	r.receive(1, r.send(1, 1, 6000, 202), 6100)
	// After, but held up 4 s (> lateAfter = 3 s): a lane blocked by the fault's leftovers.
	r.receive(1, r.send(1, 2, 7000, 202), 11010)
	got := r.count(Fault{Name: "f", Start: at(2000), End: at(5000)})
	if got.Recovery202 != 1010*time.Millisecond {
		t.Errorf("recovery to 202 %v, want 1.01s", got.Recovery202)
	}
	if got.RecoveryDelivery != 6010*time.Millisecond {
		t.Errorf("delivery recovery %v, want 6.01s (the late message at 11.01 s)", got.RecoveryDelivery)
	}

	// A backlog still undelivered when the next fault begins is capped at that fault's start: the rest
	// of the wait is the next fault's.
	r = newFakeRun(1)
	r.receive(0, r.send(0, 0, 1000, 202), 8500) // delivered during the second fault
	r.receive(0, r.send(0, 1, 6000, 202), 6100)
	got = r.count(Fault{Name: "f1", Start: at(2000), End: at(5000)}, Fault{Name: "f2", Start: at(8000), End: at(9000)})
	if got.RecoveryDelivery != 3*time.Second {
		t.Errorf("delivery recovery %v with the next fault 3 s after the first, want 3s", got.RecoveryDelivery)
	}

	// No 202 after the fault at all: never recovered.
	r = newFakeRun(1)
	r.receive(0, r.send(0, 0, 1000, 202), 1100)
	r.send(0, 1, 6000, 502)
	if got := r.count(Fault{Name: "f", Start: at(2000), End: at(5000)}); got.Recovery202 >= 0 {
		t.Errorf("recovery to 202 %v with no 202 after the fault, want -1", got.Recovery202)
	}
}

func TestCheckNamesEveryBrokenExpectation(t *testing.T) {
	clean := Result{Sent: 10, Accepted: 10, Delivered: 10, Total: Answers{Accepted: 10}, Recovery202: time.Second, RecoveryDelivery: 2 * time.Second}
	if f := clean.check(Expect{Recovery: 5 * time.Second}); len(f) > 0 {
		t.Fatalf("a clean run fails: %v", f)
	}
	tests := []struct {
		name   string
		change func(*Result)
		expect Expect
		want   string
	}{
		{"lost", func(r *Result) { r.Delivered, r.Lost = 9, 1 }, Expect{}, "never reached the platform"},
		{"duplicates over the bound", func(r *Result) { r.Duplicates = 3 }, Expect{MaxDuplicates: 2}, "3 duplicates"},
		{"duplicates within the bound", func(r *Result) { r.Duplicates = 2 }, Expect{MaxDuplicates: 2}, ""},
		{"order when required", func(r *Result) { r.OutOfOrder = 1 }, Expect{KeepOrder: true}, "accepted later"},
		{"order when not required", func(r *Result) { r.OutOfOrder = 1 }, Expect{}, ""},
		{"pacing", func(r *Result) { r.PacingViolations = 1 }, Expect{}, "pacing"},
		{"global", func(r *Result) { r.GlobalViolations = 1 }, Expect{}, "global"},
		{"simulator", func(r *Result) { r.SimViolations = 1 }, Expect{}, "simulator counted"},
		{"pending", func(r *Result) { r.Pending = 1 }, Expect{}, "pending"},
		{"hung", func(r *Result) { r.Hung = 1 }, Expect{}, "no answer within"},
		{"500 never allowed", func(r *Result) { r.Total.Status500 = 1 }, Expect{Answers: []int{502, 503}}, "1×500"},
		{"502 when allowed", func(r *Result) { r.Total.Status502 = 1 }, Expect{Answers: []int{502, 503}}, ""},
		{"502 when not", func(r *Result) { r.Total.Status502 = 1 }, Expect{}, "1×502"},
		{"refused when allowed", func(r *Result) { r.Total.NotServed = 1 }, Expect{NotServed: true}, ""},
		{"dropped when only refusals are allowed", func(r *Result) { r.Total.Dropped = 1 }, Expect{NotServed: true}, "transport errors"},
		{"slow recovery", func(r *Result) { r.RecoveryDelivery = time.Minute }, Expect{Recovery: 5 * time.Second}, "delivery recovered"},
		{"no recovery", func(r *Result) { r.Recovery202 = -1 }, Expect{}, "no send was accepted after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clean
			tt.change(&r)
			if tt.expect.Recovery == 0 {
				tt.expect.Recovery = 5 * time.Second
			}
			f := strings.Join(r.check(tt.expect), "; ")
			if tt.want == "" && f != "" || tt.want != "" && !strings.Contains(f, tt.want) {
				t.Errorf("failures %q, want one containing %q", f, tt.want)
			}
		})
	}
}
