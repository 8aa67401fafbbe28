package batch_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/delivery/batch"
)

// Calls made while a batch is in flight go together in the next one; each gets its own result, and an
// error goes to every item of its call only.
func TestCallsWhileOneIsInFlightGoTogetherEachWithItsResult(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := batch.New(100, 1, func(items []int) ([]int, error) {
		mu.Lock()
		sizes = append(sizes, len(items))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release // the first call is in flight while the others queue
		}
		out := make([]int, len(items))
		for i, x := range items {
			if x < 0 {
				return nil, errors.New("negative")
			}
			out[i] = 2 * x
		}
		return out, nil
	})
	var wg sync.WaitGroup
	got := make([]int, 11)
	wg.Go(func() { got[0], _ = b.Do(0) })
	for {
		mu.Lock()
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			break
		}
	}
	for i := 1; i <= 10; i++ {
		wg.Go(func() { got[i], _ = b.Do(i) })
	}
	// The ten queue behind the first call, or, those not yet queued when it returns, go in a call of
	// their own: either way each gets its own result and no item is lost or doubled.
	close(release)
	wg.Wait()
	for i, g := range got {
		if g != 2*i {
			t.Errorf("item %d got %d, want %d", i, g, 2*i)
		}
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total != 11 || sizes[0] != 1 {
		t.Errorf("batches %v: want the first alone and 11 items in all", sizes)
	}
	if _, err := b.Do(-1); err == nil {
		t.Error("the function's error did not reach its item")
	}
	if r, err := b.Do(4); err != nil || r != 8 {
		t.Errorf("after an error: %d, %v; want 8", r, err)
	}
}

// No more than size items go in one call, and no more than writers calls run at once.
func TestBatchesAreBoundedInSizeAndWriters(t *testing.T) {
	var mu sync.Mutex
	inFlight, most, biggest := 0, 0, 0
	b := batch.New(3, 2, func(items []int) ([]struct{}, error) {
		mu.Lock()
		inFlight++
		most, biggest = max(most, inFlight), max(biggest, len(items))
		mu.Unlock()
		mu.Lock()
		inFlight--
		mu.Unlock()
		return make([]struct{}, len(items)), nil
	})
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if _, err := b.Do(1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most > 2 || biggest > 3 {
		t.Errorf("%d calls at once, %d items in one; want at most 2 and 3", most, biggest)
	}
}

// A caller whose item is done returns, however many others are queued behind it: what is queued meanwhile
// is written without it (a lane that made the call goes on to its send).
func TestACallerIsNotKeptServingOthers(t *testing.T) {
	entered := make(chan struct{})
	release, hold := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	calls := 0
	b := batch.New(1, 1, func(items []int) ([]int, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(entered)
			<-release
		} else {
			<-hold // the others' calls last until the first caller has returned
		}
		return items, nil
	})
	done := make(chan struct{})
	go func() { _, _ = b.Do(0); close(done) }()
	<-entered
	var wg sync.WaitGroup
	var queued sync.WaitGroup
	for i := 1; i <= 50; i++ {
		queued.Add(1)
		wg.Go(func() {
			queued.Done()
			if r, err := b.Do(i); err != nil || r != i {
				t.Errorf("item %d: %d, %v", i, r, err)
			}
		})
	}
	queued.Wait()
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the first caller is still writing the others' items")
	}
	close(hold)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if calls != 51 {
		t.Errorf("%d calls, want 51 (batches of one)", calls)
	}
}
