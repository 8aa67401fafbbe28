package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
)

// BeginFault records that a fault starts now; call End on the result when it is over (the process is
// back, the proxy restored, the faults cleared).
func (e *Env) BeginFault(name string) *FaultMark {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, Fault{Name: name, Start: time.Now()})
	return &FaultMark{e: e, i: len(e.faults) - 1}
}

// FaultMark ends a fault begun with BeginFault.
type FaultMark struct {
	e *Env
	i int
}

// End records that the fault is over now.
func (m *FaultMark) End() {
	m.e.mu.Lock()
	defer m.e.mu.Unlock()
	m.e.faults[m.i].End = time.Now()
	f := m.e.faults[m.i]
	m.e.T.Logf("fault %q lasted %v", f.Name, f.End.Sub(f.Start).Round(time.Millisecond))
}

// WaitCaughtUp waits until every message accepted more than lateAfter ago has reached the platform, so
// that the previous fault's backlog is gone before the next fault: each fault's counts are then its own.
func (e *Env) WaitCaughtUp(ctx context.Context, load *Load, timeout time.Duration) error {
	late := lateAfter(e.Cfg.PerChatInterval)
	return Eventually(ctx, timeout, time.Second, "delivery caught up with the load", func(ctx context.Context) error {
		due := map[string]bool{}
		for _, a := range load.Attempts() {
			if a.Accepted() && time.Since(a.Done) > late {
				due[a.Token] = true
			}
		}
		msgs, err := e.Messages(ctx)
		if err != nil {
			return err
		}
		for _, ms := range msgs {
			for _, m := range ms {
				delete(due, tokenPattern.FindString(m.Text))
			}
		}
		if len(due) > 0 {
			return fmt.Errorf("%d messages accepted more than %v ago not delivered yet", len(due), late)
		}
		return nil
	})
}

// Settle is how long Finish waits, after the load stops, for every accepted message to reach the platform
// and every notification to reach a terminal status: beyond the worker's redrive interval (30 s) plus a
// lease, the slowest path by which the product recovers a message.
const Settle = 90 * time.Second

// Finish stops the load, waits (up to Settle) for everything accepted to be delivered and every
// notification to settle, counts, adds the row to the report, and fails the test for every broken
// expectation.
func (e *Env) Finish(load *Load, x Expect) Result {
	t := e.T
	t.Helper()
	load.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), Settle+time.Minute)
	defer cancel()
	accepted := map[string]bool{}
	for _, a := range load.Attempts() {
		if a.Accepted() {
			accepted[a.Token] = true
		}
	}
	settleErr := Eventually(ctx, Settle, time.Second, "every accepted message delivered and every notification terminal", func(ctx context.Context) error {
		msgs, err := e.Messages(ctx)
		if err != nil {
			return err
		}
		seen := 0
		for _, ms := range msgs {
			for _, m := range ms {
				if tok := tokenPattern.FindString(m.Text); accepted[tok] {
					seen++
					accepted[tok] = false // count each token once
				}
			}
		}
		for tok, missing := range accepted {
			if !missing {
				delete(accepted, tok)
			}
		}
		st, err := e.Statuses(ctx)
		if err != nil {
			return err
		}
		if len(accepted) > 0 || st.Pending() > 0 {
			return fmt.Errorf("%d accepted messages not delivered yet, %d notifications pending (%v)", len(accepted), st.Pending(), st)
		}
		return nil
	})
	if settleErr != nil {
		t.Logf("did not settle: %v", settleErr)
	}

	msgs, err := e.Messages(ctx)
	if err != nil {
		t.Fatalf("chaos: reading the platform's messages: %v", err)
	}
	e.mu.Lock()
	faults := append([]Fault(nil), e.faults...)
	e.mu.Unlock()
	for i := range faults {
		if faults[i].End.IsZero() {
			t.Fatalf("chaos: fault %q was never ended", faults[i].Name)
		}
	}
	r := count(countInput{Users: e.Users, Attempts: load.Attempts(), Messages: msgs, Faults: faults,
		Interval: e.Cfg.PerChatInterval, Limit: e.Cfg.RateLimit})
	r.Scenario = t.Name()
	if r.Statuses, err = e.Statuses(ctx); err != nil {
		t.Fatalf("chaos: reading notification statuses: %v", err)
	}
	r.Pending = r.Statuses.Pending()
	st, err := e.SimStats(ctx)
	if err != nil {
		t.Fatalf("chaos: reading the simulator's stats: %v", err)
	}
	r.SimViolations = st.LimitViolations
	for _, w := range e.Workers {
		r.Orphans += w.CountLog("no notification for envelope")
	}
	if err := e.writeTimeline(load.Attempts(), msgs); err != nil {
		t.Logf("could not write the timeline: %v", err)
	}
	r.Failures = r.check(x)
	if r.SimViolations > 0 {
		e.explainSimViolations(msgs)
	}
	if r.Lost > 0 || r.Pending > 0 {
		e.explainStuck(ctx, msgs, r.LostTokens)
	}
	record(r)
	t.Logf("result: %s", r.Summary())
	for _, f := range r.Failures {
		t.Error(f)
	}
	return r
}

// Summary is the result on one line.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d, accepted %d, delivered %d, lost %d, duplicates %d, phantoms %d, out of order %d, ",
		r.Sent, r.Accepted, r.Delivered, r.Lost, r.Duplicates, r.Phantoms, r.OutOfOrder)
	fmt.Fprintf(&b, "pacing violations %d (min gap %v), global violations %d (max %d/s), sim violations %d, ",
		r.PacingViolations, r.MinGap.Round(time.Millisecond), r.GlobalViolations, r.MaxPerSecond, r.SimViolations)
	fmt.Fprintf(&b, "recovery 202 %s / delivery %s, answers %s (during faults %s; not served %d, dropped %d), ",
		fmtDuration(r.Recovery202), fmtDuration(r.RecoveryDelivery), r.Total, r.During, r.Total.NotServed, r.Total.Dropped)
	fmt.Fprintf(&b, "transport errors %v, max latency %v, hung %d, pending %d, orphans %d, statuses %v",
		r.ErrKinds, r.MaxLatency.Round(time.Millisecond), r.Hung, r.Pending, r.Orphans, map[string]int(r.Statuses))
	return b.String()
}

var simViolation = regexp.MustCompile(`time=(\S+) level=WARN msg="rate limit exceeded".* chat_id=(\d+) global_wait=(\S+) chat_wait=(\S+)`)

// explainSimViolations logs, for the first few sends the simulator refused for a rate limit, what the chat
// had received around that moment: the refused send itself is not in the chat, so this is the only way to
// see which two messages came too close.
func (e *Env) explainSimViolations(msgs map[int64][]sim.SentMessage) {
	b, err := os.ReadFile(e.Sim.Log)
	if err != nil {
		return
	}
	for i, m := range simViolation.FindAllSubmatch(b, -1) {
		if i == 5 {
			e.T.Logf("(and more)")
			break
		}
		at, _ := time.Parse(time.RFC3339Nano, string(m[1]))
		chat, _ := strconv.ParseInt(string(m[2]), 10, 64)
		var around []string
		for _, sm := range msgs[chat] {
			if d := sm.Time.Sub(at); d > -3*time.Second && d < 3*time.Second {
				text := strings.ReplaceAll(sm.Text, "\n", " ")
				if len(text) > 60 {
					text = text[:60] + "…"
				}
				around = append(around, fmt.Sprintf("%+.3fs %q", d.Seconds(), text))
			}
		}
		e.T.Logf("the simulator refused a send to chat %d at %s (global wait %s, chat wait %s); the chat received around it: %v",
			chat, at.Format("15:04:05.000"), m[3], m[4], around)
	}
}

// writeTimeline writes sends.tsv (every request) and receipts.tsv (every message the platform received)
// next to the process logs, for reading a run afterwards (keep them with HERALD_CHAOS_LOGS).
func (e *Env) writeTimeline(attempts []Attempt, msgs map[int64][]sim.SentMessage) error {
	var b strings.Builder
	b.WriteString("user\tseq\tsent\tanswered\tstatus\tcode\terror\n")
	for _, a := range attempts {
		fmt.Fprintf(&b, "%s\t%d\t%s\t%s\t%d\t%s\t%s\n", e.Users[a.User].ID, a.Seq, a.Sent.Format(timeFormat), a.Done.Format(timeFormat), a.Status, a.Code, a.Err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "sends.tsv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	b.Reset()
	b.WriteString("user\tchat\treceived\ttext\n")
	for _, u := range e.Users {
		for _, m := range msgs[u.ChatID] {
			fmt.Fprintf(&b, "%s\t%d\t%s\t%q\n", u.ID, u.ChatID, m.Time.Format(timeFormat), m.Text)
		}
	}
	return os.WriteFile(filepath.Join(e.dir, "receipts.tsv"), []byte(b.String()), 0o644)
}

const timeFormat = "15:04:05.000000"
