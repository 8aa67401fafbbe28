// Package batch gathers the calls that many goroutines make at the same moment into one: the worker's
// lanes each claim and finish one notification at a time, and a statement of PostgreSQL costs mostly its
// round trip, its planning and its commit, not its rows. A Batcher writes what was asked while its
// earlier writes were in flight as one call, so that the batches grow with the load and a call on an idle
// worker goes at once, waiting for nobody (no timer: group commit, not a linger).
package batch

import "sync"

// Batcher runs Do's calls in batches through its function. Make it with New.
type Batcher[T, R any] struct {
	do      func(items []T) ([]R, error)
	size    int // items per call at most
	writers int // calls in flight at most

	mu      sync.Mutex
	queue   []*call[T, R]
	running int
}

type call[T, R any] struct {
	item T
	r    R
	err  error
	done chan struct{}
}

// New makes a batcher that calls do with up to size items at a time, at most writers calls at once. do
// returns one result per item, in their order, or an error, which every item of the call gets.
func New[T, R any](size, writers int, do func(items []T) ([]R, error)) *Batcher[T, R] {
	return &Batcher[T, R]{do: do, size: max(size, 1), writers: max(writers, 1)}
}

// Do runs item in the next batch and returns its result. The caller that finds fewer than writers calls
// in flight makes the next call itself, with what is queued then (its own item first), until its own item
// is done; what was queued meanwhile is then written by a goroutine that ends when the queue is empty. So
// no caller serves the others for longer than its own item takes, and no goroutine of the batcher
// outlives the work.
func (b *Batcher[T, R]) Do(item T) (R, error) {
	c := &call[T, R]{item: item, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	if b.running >= b.writers {
		b.mu.Unlock()
		<-c.done
		return c.r, c.err
	}
	b.running++
	b.write(c.done)
	return c.r, c.err
}

// write makes calls while items are queued, until until is closed (nil: until the queue is empty), then
// hands what is still queued to a goroutine of its own. b.mu is held on entry and released on return;
// the caller counted itself in b.running.
func (b *Batcher[T, R]) write(until chan struct{}) {
	for len(b.queue) > 0 {
		n := min(len(b.queue), b.size)
		batch := make([]*call[T, R], n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()
		b.run(batch)
		b.mu.Lock()
		if until != nil && closed(until) && len(b.queue) > 0 {
			go func() {
				b.mu.Lock()
				b.write(nil)
			}()
			b.mu.Unlock()
			return
		}
	}
	b.running--
	b.mu.Unlock()
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (b *Batcher[T, R]) run(batch []*call[T, R]) {
	items := make([]T, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	rs, err := b.do(items)
	if err == nil && len(rs) != len(items) {
		panic("batch: the function returned a result count other than its items'")
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.r = rs[i]
		}
		close(c.done)
	}
}
