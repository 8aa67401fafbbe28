package batch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/batch"
)

// Concurrent requests share batches, and each gets its own answer.
func TestRequestsShareBatchesAndGetTheirOwnAnswers(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	b := batch.New(batch.Options{Loops: 1, MaxBatch: 100}, nil, func(items []int) []int {
		<-release
		mu.Lock()
		sizes = append(sizes, len(items))
		mu.Unlock()
		out := make([]int, len(items))
		for i, v := range items {
			out[i] = v * 10
		}
		return out
	})
	defer b.Close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			got, err := b.Do(context.Background(), i)
			if err != nil || got != i*10 {
				t.Errorf("Do(%d) = %d, %v; want %d", i, got, err, i*10)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // the first request holds the loop; the others queue behind it
	close(release)
	wg.Wait()
	if len(sizes) >= 50 {
		t.Errorf("50 concurrent requests ran in %d batches (%v); want them to share", len(sizes), sizes)
	}
}

// Requests with the same key never share a batch, and run in arrival order.
func TestApartKeepsOneKeyPerBatchInOrder(t *testing.T) {
	var mu sync.Mutex
	var batches [][]string
	release := make(chan struct{})
	b := batch.New(batch.Options{Loops: 1}, func(s string) string { return s[:1] }, func(items []string) []bool {
		<-release
		mu.Lock()
		batches = append(batches, slices.Clone(items))
		mu.Unlock()
		return make([]bool, len(items))
	})
	defer b.Close()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = b.Do(context.Background(), "z0") }) // occupies the loop
	time.Sleep(50 * time.Millisecond)
	for _, s := range []string{"a1", "a2", "b1", "a3"} {
		wg.Go(func() { _, _ = b.Do(context.Background(), s) })
		time.Sleep(20 * time.Millisecond) // arrival order
	}
	close(release)
	wg.Wait()
	var order []string
	for _, bt := range batches {
		seen := map[byte]bool{}
		for _, s := range bt {
			if seen[s[0]] {
				t.Errorf("batch %v holds two requests of key %c", bt, s[0])
			}
			seen[s[0]] = true
			if s[0] == 'a' {
				order = append(order, s)
			}
		}
	}
	if !slices.Equal(order, []string{"a1", "a2", "a3"}) {
		t.Errorf("key a ran as %v, want arrival order", order)
	}
}

// Past MaxQueue waiting requests, Do fails at once instead of queueing without bound.
func TestOverloadFailsFast(t *testing.T) {
	release := make(chan struct{})
	b := batch.New(batch.Options{Loops: 1, MaxBatch: 1, MaxQueue: 2}, nil, func(items []int) []int {
		<-release
		return make([]int, len(items))
	})
	var wg sync.WaitGroup
	defer func() { close(release); wg.Wait(); b.Close() }()
	for range 3 { // one in the loop, two queued
		wg.Go(func() { _, _ = b.Do(context.Background(), 1) })
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Probe from a goroutine: a probe that is accepted waits for release like the others.
		errc := make(chan error, 1)
		wg.Go(func() { _, err := b.Do(context.Background(), 1); errc <- err })
		select {
		case err := <-errc:
			if errors.Is(err, batch.ErrOverloaded) {
				return
			}
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Do never reported overload")
		}
	}
}

// Close answers what was handed over and refuses what comes after.
func TestCloseServesPendingThenRefuses(t *testing.T) {
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	b := batch.New(batch.Options{Loops: 1, MaxBatch: 1, MaxQueue: 4}, nil, func(items []int) []int {
		started <- struct{}{}
		<-release
		return []int{7}
	})
	results := make(chan error, 2)
	for range 2 {
		go func() {
			got, err := b.Do(context.Background(), 1)
			if err == nil && got != 7 {
				err = errors.New("wrong answer")
			}
			results <- err
		}()
	}
	<-started
	time.Sleep(20 * time.Millisecond) // the second request is queued
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	close(release)
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("a request handed over before Close got %v", err)
		}
	}
	<-closed
	if _, err := b.Do(context.Background(), 1); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
}

// Past capacity, a standing queue is shed: requests that waited longer than the target are refused at
// once (ErrOverloaded) and the ones that are run waited about the target, not for the whole backlog.
func TestStandingQueueIsShed(t *testing.T) {
	const target = 20 * time.Millisecond
	b := batch.New(batch.Options{Loops: 1, MaxBatch: 4, MaxQueue: 10000, Target: target, Interval: 60 * time.Millisecond},
		nil, func(items []int) []int {
			time.Sleep(10 * time.Millisecond) // capacity: 4 per 10 ms = 400/s
			return make([]int, len(items))
		})
	defer b.Close()
	var mu sync.Mutex
	var shed, ran int
	var waits []time.Duration
	var wg sync.WaitGroup
	// Offer 2,000/s for a second: five times the capacity.
	for i := range 2000 {
		time.Sleep(500 * time.Microsecond)
		wg.Go(func() {
			t0 := time.Now()
			_, err := b.Do(context.Background(), i)
			mu.Lock()
			defer mu.Unlock()
			if errors.Is(err, batch.ErrOverloaded) {
				shed++
				return
			}
			ran++
			waits = append(waits, time.Since(t0))
		})
	}
	wg.Wait()
	if shed == 0 || ran == 0 {
		t.Fatalf("ran %d, shed %d: want both under five times the capacity", ran, shed)
	}
	slices.Sort(waits)
	if p90 := waits[len(waits)*9/10]; p90 > 200*time.Millisecond {
		t.Errorf("p90 wait of the requests that ran: %v; a shed queue keeps it near the target (%v)", p90, target)
	}
}

// Below capacity nothing is shed, bursts included.
func TestNoSheddingBelowCapacity(t *testing.T) {
	b := batch.New(batch.Options{Loops: 1, MaxBatch: 64, MaxQueue: 1000, Target: 20 * time.Millisecond}, nil, func(items []int) []int {
		time.Sleep(time.Millisecond)
		return make([]int, len(items))
	})
	defer b.Close()
	var wg sync.WaitGroup
	var shed atomic.Int32
	for i := range 500 {
		if i%100 == 0 {
			time.Sleep(30 * time.Millisecond) // bursts of 100
		}
		wg.Go(func() {
			if _, err := b.Do(context.Background(), i); err != nil {
				shed.Add(1)
			}
		})
	}
	wg.Wait()
	if shed.Load() != 0 {
		t.Errorf("%d requests shed below capacity", shed.Load())
	}
}

// A slow dependency is not an overload: at a low rate, with every batch taking far longer than the target
// (a replica just started during a rolling upgrade, its first statements and produce requests slow on a
// busy node), requests wait longer than the target for a free loop, yet each loop takes everything waiting
// — nothing stands in the queue, and the capacity (two loops of 256 per 700 ms) is a hundred times the
// load. Shedding here refused a tenant's sends with 503 at 20/s in the end-to-end upgrade (issue 41).
func TestNoSheddingOfASlowButEmptyQueue(t *testing.T) {
	b := batch.New(batch.Options{Loops: 2, MaxBatch: 256, Target: 50 * time.Millisecond, Interval: 250 * time.Millisecond},
		nil, func(items []int) []int {
			time.Sleep(700 * time.Millisecond)
			return make([]int, len(items))
		})
	defer b.Close()
	var wg sync.WaitGroup
	var shed atomic.Int32
	for i := range 15 { // 5 a second for 3 s
		wg.Go(func() {
			if _, err := b.Do(context.Background(), i); err != nil {
				shed.Add(1)
			}
		})
		time.Sleep(200 * time.Millisecond)
	}
	wg.Wait()
	if shed.Load() != 0 {
		t.Errorf("%d of 15 requests shed at 5/s with every loop taking all that waited", shed.Load())
	}
}
