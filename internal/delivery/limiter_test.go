package delivery

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

func TestLimiterGrantsAtTheRate(t *testing.T) {
	l := NewLimiter(200, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if err := l.Wait(ctx, Normal); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// 100 grants at 200/s with a burst of 2 take at least 0.49 s.
	if elapsed := time.Since(start); elapsed < 480*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("100 grants at 200/s took %v, want about 0.5 s", elapsed)
	}
}

func TestLimiterServesHighFirstWithoutStarvingNormal(t *testing.T) {
	l := NewLimiter(0, 3) // paused while the queues fill
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	var mu sync.Mutex
	var order []Priority
	var wg sync.WaitGroup
	for i := range 40 {
		p := High
		if i%2 == 1 {
			p = Normal
		}
		wg.Go(func() {
			if l.Wait(ctx, p) == nil {
				mu.Lock()
				order = append(order, p)
				mu.Unlock()
			}
		})
	}
	// Every waiter is queued before the first grant (no fixed sleep: a busy machine may take longer).
	for deadline := time.Now().Add(10 * time.Second); ; {
		l.mu.Lock()
		n := len(l.queues[High]) + len(l.queues[Normal])
		l.mu.Unlock()
		if n == 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 40 waiters queued", n)
		}
		time.Sleep(time.Millisecond)
	}
	// 100/s: a burst of 1 and 10 ms between grants, so the order goroutines record is the grant order.
	l.SetRate(100)
	wg.Wait()
	// While both wait: three high, one normal. The first 20 grants hold 15 high and 5 normal.
	highs := 0
	for _, p := range order[:20] {
		if p == High {
			highs++
		}
	}
	if highs != 15 {
		t.Errorf("the first 20 grants went %d to high, want 15 (weight 3:1): %v", highs, order)
	}
}

func TestLimiterPauseAndAbandon(t *testing.T) {
	l := NewLimiter(1000, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	l.Pause(time.Now().Add(300 * time.Millisecond))
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := l.Wait(short, High); err == nil {
		t.Fatal("a wait during a pause must not be granted")
	}
	start := time.Now()
	if err := l.Wait(ctx, High); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("granted after %v during a 300 ms pause", waited)
	}
}

func TestChatLimiterSpacesAndThrottles(t *testing.T) {
	c := newChatLimiter(100 * time.Millisecond)
	ctx := t.Context()
	start := time.Now()
	for range 3 {
		if err := c.Wait(ctx, 7); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 190*time.Millisecond {
		t.Errorf("three sends to one chat took %v, want at least 200 ms", elapsed)
	}
	if err := c.Wait(ctx, 8); err != nil || time.Since(start) > 400*time.Millisecond {
		t.Error("another chat must not wait for chat 7")
	}
	if c.Throttle(9, time.Second) {
		t.Error("one throttled chat is not a flood")
	}
	if !c.Throttle(10, time.Second) {
		t.Error("429s on two chats within a second are a flood")
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Wait(short, 9); err == nil {
		t.Error("a throttled chat must wait for retry_after")
	}
}

func TestOffsetTrackerCommitsOnlyContiguouslyFinished(t *testing.T) {
	tr := newOffsetTracker()
	msg := func(p int, off int64) kafka.Message { return kafka.Message{Partition: p, Offset: off} }
	a, b, c := tr.add(msg(0, 10)), tr.add(msg(0, 11)), tr.add(msg(0, 12))
	other := tr.add(msg(1, 5))
	tr.done(b)
	tr.done(c)
	if got := tr.committable(); len(got) != 0 {
		t.Fatalf("committable = %v before offset 10 finished, want nothing", got)
	}
	tr.done(a)
	got := tr.committable()
	if len(got) != 1 || got[0].Offset != 12 {
		t.Fatalf("committable = %v, want partition 0 up to offset 12", got)
	}
	if tr.pendingCount() != 1 {
		t.Errorf("pending = %d, want 1 (partition 1)", tr.pendingCount())
	}
	tr.restore(got)
	if again := tr.committable(); len(again) != 1 || again[0].Offset != 12 {
		t.Errorf("a failed commit must be retried: %v", again)
	}
	// A rebalance rewinds partition 1: the old copy no longer counts.
	again := tr.add(msg(1, 5))
	tr.done(other)
	if got := tr.committable(); len(got) != 0 {
		t.Errorf("a stale copy made %v committable", got)
	}
	tr.done(again)
	if got := tr.committable(); len(got) != 1 || got[0].Partition != 1 || got[0].Offset != 5 {
		t.Errorf("committable = %v, want partition 1 offset 5", got)
	}
}

// A process that stalls after granting (CPU starvation, SIGSTOP, a GC pause) would send every grant it
// made before the stall at once when it resumes. Admit, taken at the moment a request leaves, spaces them
// again: whatever the grants did, the admissions never exceed burst + rate·T in any window T.
func TestAdmitSpacesRequestsAfterAStall(t *testing.T) {
	const rate = 50.0 // burst 1
	l := NewLimiter(rate, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	// Twenty deliveries are granted; then "the process stalls": all of them resume at the same instant.
	const n = 20
	start := make(chan struct{})
	var mu sync.Mutex
	var admitted []time.Time
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := l.Wait(ctx, Normal); err != nil {
				t.Error(err)
				return
			}
			<-start
			if err := l.Admit(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			admitted = append(admitted, time.Now())
			mu.Unlock()
		})
	}
	time.Sleep(time.Duration(float64(n)/rate*float64(time.Second)) + 100*time.Millisecond) // every grant made
	close(start)
	wg.Wait()
	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	interval := time.Duration(float64(time.Second) / rate)
	for i := 1; i < len(admitted); i++ {
		// A little slack for the clock between Admit's decision and the time taken here.
		if gap := admitted[i].Sub(admitted[i-1]); gap < interval-2*time.Millisecond {
			t.Fatalf("admissions %d and %d only %v apart after a stall, want at least %v (rate %v/s, burst 1)", i-1, i, gap, interval, rate)
		}
	}
}
