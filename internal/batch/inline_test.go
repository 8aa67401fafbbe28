package batch

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestInlineAnswersEveryCallerWithItsOwnResult(t *testing.T) {
	var batches, biggest atomic.Int64
	var inRun, most atomic.Int64
	g := NewInline(2, 16, func(items []int) ([]int, error) {
		batches.Add(1)
		if n := int64(len(items)); n > biggest.Load() {
			biggest.Store(n)
		}
		if r := inRun.Add(1); r > most.Load() {
			most.Store(r)
		}
		time.Sleep(2 * time.Millisecond) // a round trip: the others gather meanwhile
		inRun.Add(-1)
		out := make([]int, len(items))
		for i, v := range items {
			if v < 0 {
				return nil, errors.New("negative")
			}
			out[i] = v * 10
		}
		return out, nil
	})
	const callers = 400
	var wg sync.WaitGroup
	wrong := atomic.Int64{}
	for i := range callers {
		wg.Go(func() {
			if r, err := g.Do(i); err != nil || r != i*10 {
				wrong.Add(1)
			}
		})
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d callers got another's answer", wrong.Load())
	}
	if most.Load() > 2 {
		t.Fatalf("%d batches ran at once, want at most 2", most.Load())
	}
	if b := batches.Load(); b >= callers/2 {
		t.Fatalf("%d batches for %d concurrent callers: they were not grouped", b, callers)
	}
	if biggest.Load() > 16 {
		t.Fatalf("a batch of %d, want at most 16", biggest.Load())
	}
	// Idle again: a lone call runs at once, in a batch of its own.
	before := batches.Load()
	if r, err := g.Do(7); err != nil || r != 70 || batches.Load() != before+1 {
		t.Fatalf("a lone call: %d %v, %d batches", r, err, batches.Load()-before)
	}
	// A batch's error is every request's of that batch, and the next batch does not inherit it.
	if _, err := g.Do(-1); err == nil {
		t.Fatal("no error for a failing batch")
	}
	if r, err := g.Do(3); err != nil || r != 30 {
		t.Fatalf("after a failed batch: %d %v", r, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running != 0 || len(g.waiting) != 0 {
		t.Fatalf("after every call: %d running, %d waiting", g.running, len(g.waiting))
	}
}

func TestSpacedInlineGathersAGapsWorthAndLetsALoneCallThrough(t *testing.T) {
	const gap = 20 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	var sizes []int
	release := make(chan struct{})
	g := NewSpacedInline(2, 256, gap, func(items []int) ([]int, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		sizes = append(sizes, len(items))
		mu.Unlock()
		if items[0] < 0 {
			<-release // a statement stuck on a row lock
		}
		return items, nil
	})

	// Idle: a lone call runs at once, not a gap later.
	t0 := time.Now()
	if r, err := g.Do(1); err != nil || r != 1 {
		t.Fatalf("a lone call: %d %v", r, err)
	}
	if d := time.Since(t0); d > gap/2 {
		t.Fatalf("a lone call on an idle batcher waited %v", d)
	}

	// A steady stream, one call every millisecond for 200 ms: the batches start at least a gap apart
	// and hold several calls each.
	time.Sleep(gap)
	mu.Lock()
	starts, sizes = nil, nil
	mu.Unlock()
	var wg sync.WaitGroup
	streamStart := time.Now()
	for i := range 200 {
		wg.Go(func() {
			if r, err := g.Do(i + 2); err != nil || r != i+2 {
				t.Errorf("call %d: %d %v", i, r, err)
			}
		})
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(streamStart)
	mu.Lock()
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < gap-time.Millisecond {
			t.Errorf("batch %d started %v after the one before, want at least %v", i, d, gap)
		}
	}
	if len(starts) > int(elapsed/gap)+2 || len(starts) < 2 {
		t.Errorf("%d batches for 200 calls over %v (sizes %v)", len(starts), elapsed, sizes)
	}
	mu.Unlock()

	// One loop stuck: the other still runs the calls that come, a gap apart.
	time.Sleep(gap)
	stuck := make(chan error, 1)
	go func() { _, err := g.Do(-1); stuck <- err }()
	time.Sleep(5 * time.Millisecond)
	t0 = time.Now()
	if r, err := g.Do(9); err != nil || r != 9 {
		t.Fatalf("beside a stuck batch: %d %v", r, err)
	}
	if d := time.Since(t0); d > 10*gap {
		t.Fatalf("a call beside a stuck batch waited %v", d)
	}
	close(release)
	if err := <-stuck; err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running != 0 || len(g.waiting) != 0 {
		t.Fatalf("after every call: %d running, %d waiting", g.running, len(g.waiting))
	}
}
