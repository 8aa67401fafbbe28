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
