package sim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

func TestNext429AnswersWithRetryAfter(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	var f sim.Faults
	e.mustControl(t, "POST", "/sim/faults", map[string]any{"next_429": map[string]int{"count": 3, "retry_after": 2}}, &f)
	if f.Next429 == nil || f.Next429.Count != 3 {
		t.Fatalf("faults = %+v", f)
	}
	for i := range 3 {
		_, err := e.send(t, 1, "x")
		var apiErr *messenger.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.RetryAfter != 2*time.Second ||
			apiErr.Description != "Too Many Requests: retry after 2" {
			t.Fatalf("send %d: %v, want 429 with retry_after 2", i+1, err)
		}
		if messenger.Classify(err) != messenger.Retry || messenger.RetryAfter(err) != 2*time.Second {
			t.Errorf("Classify/RetryAfter of an injected 429: %v %v", messenger.Classify(err), messenger.RetryAfter(err))
		}
	}
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Fatalf("the 4th send must go through: %v", err)
	}
	e.mustControl(t, "GET", "/sim/faults", nil, &f)
	if f.Next429.Count != 0 {
		t.Errorf("remaining 429s = %d, want 0", f.Next429.Count)
	}
	st := e.sim.Stats()
	if st.Injected429 != 3 || st.Answered429 != 3 || st.LimitViolations != 0 || st.Delivered != 1 {
		t.Errorf("stats = %+v: injected 429s are not violations", st)
	}
	if len(e.sim.Messages(1)) != 1 {
		t.Error("a 429 must not deliver")
	}
}

func TestInjected5xxAndRates(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	e.mustControl(t, "POST", "/sim/faults", map[string]any{"next_5xx": 2}, nil)
	for range 2 {
		_, err := e.send(t, 1, "x")
		var apiErr *messenger.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 500 || messenger.Classify(err) != messenger.Retry {
			t.Fatalf("want 500 and Retry, got %v", err)
		}
	}
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Fatalf("after the counted 5xx: %v", err)
	}

	if err := e.sim.SetFaults(sim.Faults{ErrorRate5xx: 1}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := e.send(t, 1, "x"); messenger.ErrorCode(err) != 500 {
			t.Fatalf("error_rate_5xx 1 must fail every send: %v", err)
		}
	}
	if err := e.sim.SetFaults(sim.Faults{Rate429: 1, RetryAfter: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.send(t, 1, "x"); messenger.RetryAfter(err) != 3*time.Second {
		t.Fatalf("rate_429 1 with retry_after 3: %v", err)
	}
	e.mustControl(t, "DELETE", "/sim/faults", nil, nil)
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Fatalf("after DELETE /sim/faults: %v", err)
	}
	if st := e.sim.Stats(); st.Injected5xx != 7 || st.Injected429 != 1 || st.Delivered != 2 {
		t.Errorf("stats = %+v", st)
	}
	for _, bad := range []map[string]any{{"error_rate_5xx": 1.5}, {"latency_ms": -1}, {"next_429": map[string]int{"count": -1}}, {"timeout_rate": "x"}} {
		if status := e.control(t, "POST", "/sim/faults", bad, nil); status != 400 {
			t.Errorf("faults %v: %d, want 400", bad, status)
		}
	}
}

func TestTimeoutHangsUntilTheClientGivesUp(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	e.mustControl(t, "POST", "/sim/faults", map[string]any{"next_timeout": 1}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.client.SendMessage(ctx, messenger.SendMessageRequest{ChatID: 1, Text: "x"})
	if !errors.Is(err, messenger.ErrTimeout) || messenger.ErrorCode(err) != messenger.CodeTimeout || messenger.Classify(err) != messenger.Retry {
		t.Fatalf("error = %v, want a timeout", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("gave up after %v: the simulator must not answer", d)
	}
	if len(e.sim.Messages(1)) != 0 || e.sim.Stats().InjectedTimeouts != 1 {
		t.Errorf("a timed-out send must not deliver: %+v", e.sim.Stats())
	}
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Fatalf("the next send must go through: %v", err)
	}
}

func TestTimeoutIsReleasedByClose(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	noError(t, e.sim.SetFaults(sim.Faults{TimeoutRate: 1}))
	done := make(chan error, 1)
	go func() {
		_, err := e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 1, Text: "x"})
		done <- err
	}()
	waitFor(t, "the send to hang", func() bool { return e.sim.Stats().InjectedTimeouts == 1 })
	e.sim.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a hung send released by Close must not succeed")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not release a hung request")
	}
}

func TestLatencyDeliversEvenIfTheClientStoppedWaiting(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	noError(t, e.sim.SetFaults(sim.Faults{LatencyMS: 200}))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.client.SendMessage(ctx, messenger.SendMessageRequest{ChatID: 1, Text: "late"}); !errors.Is(err, messenger.ErrTimeout) {
		t.Fatalf("want a client timeout, got %v", err)
	}
	msgs, err := e.sim.WaitMessages(t.Context(), 1, 1)
	if err != nil || msgs[0].Text != "late" {
		t.Fatalf("a slow answer still delivers (the source of duplicates): %+v %v", msgs, err)
	}
}

func TestConcurrentSendsAreAllDelivered(t *testing.T) {
	e := newEnv(t, sim.Options{})
	const chats, perChat = 50, 20
	for id := range int64(chats) {
		e.user(t, sim.User{ID: id + 1})
	}
	var wg sync.WaitGroup
	for id := range int64(chats) {
		wg.Go(func() {
			for range perChat {
				if _, err := e.send(t, id+1, "x"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if st := e.sim.Stats(); st.Delivered != chats*perChat {
		t.Errorf("delivered %d, want %d", st.Delivered, chats*perChat)
	}
	for id := range int64(chats) {
		msgs := e.sim.Messages(id + 1)
		for i := 1; i < len(msgs); i++ {
			if msgs[i].MessageID != msgs[i-1].MessageID+1 {
				t.Fatalf("chat %d: message ids %d then %d", id+1, msgs[i-1].MessageID, msgs[i].MessageID)
			}
		}
	}
}
