package delivery

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Every runs f at once, then every interval, and returns once ctx ends.
func TestEveryRunsAtOnceThenOnEachTickUntilDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var runs atomic.Int32
	first := make(chan time.Duration, 1)
	start := time.Now()
	done := make(chan struct{})
	go func() {
		every(ctx, 20*time.Millisecond, func(context.Context) {
			if runs.Add(1) == 1 {
				first <- time.Since(start)
			}
		})
		close(done)
	}()
	if d := <-first; d > 15*time.Millisecond {
		t.Errorf("the first run came after %v, want at once", d)
	}
	for deadline := time.Now().Add(5 * time.Second); runs.Load() < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs in 5 s at a 20 ms interval", runs.Load())
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	after := runs.Load()
	time.Sleep(60 * time.Millisecond)
	if runs.Load() != after {
		t.Error("f ran after Every returned")
	}
}
