package sim_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// sendPaced sends n messages round-robin over chats, one per tick of the given interval, concurrently as a
// pooled worker would, and returns the errors.
func sendPaced(t *testing.T, e *env, chats []int64, n int, interval time.Duration) []error {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		chat := chats[i%len(chats)]
		wg.Go(func() {
			if _, err := e.send(t, chat, "x"); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

func manyChats(t *testing.T, e *env, n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(1000 + i)
		e.user(t, sim.User{ID: ids[i]})
	}
	return ids
}

func TestGlobalLimitNeverFlagsAPacedClient(t *testing.T) {
	// A burst of 10 at 100/s absorbs 100 ms of arrival jitter (the race detector adds plenty).
	e := newEnv(t, sim.Options{GlobalRate: 100, GlobalBurst: 10, PerChatRate: -1})
	errs := sendPaced(t, e, manyChats(t, e, 50), 150, 10*time.Millisecond) // exactly 100/s for 1.5 s
	if len(errs) != 0 {
		t.Fatalf("a client at the limit got %d errors, first %v", len(errs), errs[0])
	}
	if st := e.sim.Stats(); st.LimitViolations != 0 || st.Delivered != 150 {
		t.Errorf("stats = %+v, want 150 delivered and no violation", st)
	}
}

func TestGlobalLimitFlagsAClientOverIt(t *testing.T) {
	e := newEnv(t, sim.Options{GlobalRate: 100, GlobalBurst: 5, PerChatRate: -1})
	chats := manyChats(t, e, 50)
	// 40 sends at once: the burst passes, the rest is over the limit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var flood []error
	for i := range 40 {
		wg.Go(func() {
			_, err := e.send(t, chats[i%len(chats)], "x")
			mu.Lock()
			flood = append(flood, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	var violations int64
	for _, err := range flood {
		var apiErr *messenger.APIError
		if errors.As(err, &apiErr) {
			if apiErr.Code != 429 || apiErr.RetryAfter < time.Second {
				t.Errorf("over the limit: %v, want 429 with retry_after ≥ 1 s", err)
			}
			violations++
		}
	}
	st := e.sim.Stats()
	if violations < 20 || st.LimitViolations != violations || st.GlobalLimitViolations != violations || st.Answered429 != violations {
		t.Errorf("%d answered 429; stats %+v", violations, st)
	}
	if st.ChatLimitViolations != 0 || st.Injected429 != 0 {
		t.Errorf("only global violations expected: %+v", st)
	}
}

func TestGlobalLimitFlagsASustainedExcess(t *testing.T) {
	// 125/s against 100/s (+5 % tolerance): the burst of 5 drains in 5/20 s.
	e := newEnv(t, sim.Options{GlobalRate: 100, GlobalBurst: 5, PerChatRate: -1})
	errs := sendPaced(t, e, manyChats(t, e, 50), 150, 8*time.Millisecond)
	if st := e.sim.Stats(); st.LimitViolations == 0 || int64(len(errs)) != st.LimitViolations {
		t.Errorf("a client 25%% over the limit: %d errors, stats %+v", len(errs), st)
	}
}

func TestPerChatLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{GlobalRate: -1, PerChatRate: 1, PerChatBurst: 3})
	chats := manyChats(t, e, 2)
	for i := range 3 {
		if _, err := e.send(t, chats[0], "x"); err != nil {
			t.Fatalf("send %d of the burst: %v", i+1, err)
		}
	}
	_, err := e.send(t, chats[0], "x")
	if ra := messenger.RetryAfter(err); messenger.ErrorCode(err) != 429 || ra != time.Second {
		t.Fatalf("4th send in a second to one chat: %v, want 429 retry after 1", err)
	}
	if _, err := e.send(t, chats[1], "x"); err != nil {
		t.Fatalf("another chat is not limited: %v", err)
	}
	st := e.sim.Stats()
	if st.ChatLimitViolations != 1 || st.LimitViolations != 1 || st.GlobalLimitViolations != 0 {
		t.Errorf("stats = %+v", st)
	}
	time.Sleep(time.Second)
	if _, err := e.send(t, chats[0], "x"); err != nil {
		t.Errorf("after retry_after the chat accepts again: %v", err)
	}
}

func TestPerChatLimitNeverFlagsAOnePerSecondClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{GlobalRate: -1, PerChatRate: 1})
	errs := sendPaced(t, e, manyChats(t, e, 1), 4, time.Second)
	if len(errs) != 0 || e.sim.Stats().LimitViolations != 0 {
		t.Fatalf("one message per second per chat was flagged: %v", errs)
	}
}

func TestLimitsCanBeChangedAtRuntime(t *testing.T) {
	e := newEnv(t, sim.Options{GlobalRate: 30})
	var l sim.Limits
	e.mustControl(t, "GET", "/sim/limits", nil, &l)
	if l.GlobalRate != 30 || l.GlobalBurst != 3 || l.PerChatRate != -1 || l.Tolerance != 0.05 {
		t.Errorf("limits = %+v", l)
	}
	e.mustControl(t, "POST", "/sim/limits", map[string]any{"global_rate": 1000}, &l)
	if l.GlobalRate != 1000 || l.GlobalBurst != 3 {
		t.Errorf("a partial update keeps the other fields: %+v", l)
	}
	if status := e.control(t, "POST", "/sim/limits", map[string]any{"tolerance": 2}, nil); status != 400 {
		t.Errorf("tolerance 2: %d, want 400", status)
	}
	def := sim.New(sim.Options{GlobalRate: 1000})
	defer def.Close()
	if got := def.Limits(); got.GlobalBurst != 50 || got.PerChatRate != 1 || got.PerChatBurst != 3 {
		t.Errorf("defaults for 1000/s = %+v, want burst 50 and 1/s per chat with burst 3", got)
	}
}
