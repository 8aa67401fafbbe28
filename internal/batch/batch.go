// Package batch groups concurrent requests so that one round trip serves many: each batch loop takes every
// request waiting when it becomes free and runs them together, so a lone request waits for nothing and a
// burst shares its database statements, commits and Kafka produce requests. The tenant sends of the
// outbox and the messenger updates of the webhook both go through it.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrClosed means the batcher is shutting down and takes nothing new.
var ErrClosed = errors.New("batcher closed")

// ErrOverloaded means more requests wait than the batcher may queue. The caller sheds the request (503 with
// Retry-After) instead of letting latency grow without bound.
var ErrOverloaded = errors.New("batcher overloaded")

// Options tune a Batcher. Zero values take the defaults given in each comment.
type Options struct {
	// Loops is how many batches run at once; 2, so that one batch commits while the next is built.
	Loops int
	// MaxBatch is the most requests in one batch; 256.
	MaxBatch int
	// MaxQueue is how many requests may wait for a free loop; Loops × MaxBatch. Past it, Do fails at once
	// with ErrOverloaded.
	MaxQueue int
	// Target and Interval shed a standing queue (CoDel: Nichols and Jacobson, "Controlling Queue Delay"):
	// when requests have waited longer than Target for at least Interval while each batch leaves requests
	// waiting — the queue no longer drains, the batcher is past its capacity — the requests that waited longer than Target are answered
	// ErrOverloaded instead of run, until the wait falls below Target again. A burst shorter than Interval
	// is absorbed. So past capacity the accepted requests still see about Target of queueing, and the rest
	// get a fast refusal instead of a timeout. Zero Target: never shed by wait.
	Target   time.Duration
	Interval time.Duration
}

// Batcher runs requests of type T in batches and answers each with an R.
type Batcher[T, R any] struct {
	run   func(batch []T) []R
	apart func(T) string
	opts  Options

	mu      sync.RWMutex // held shared while handing a job over, exclusively to close
	closed  bool
	in      chan *job[T, R]
	done    chan struct{}
	stopped sync.WaitGroup
}

type job[T, R any] struct {
	item   T
	queued time.Time
	out    chan answer[R]
}

type answer[R any] struct {
	r   R
	err error
}

// New starts the batch loops. run receives a batch and returns one answer per request, in order. apart,
// when not nil, keeps requests with the same non-empty key out of one batch: a later one waits for a
// following batch, in arrival order (the webhook applies one user's updates one after the other).
func New[T, R any](opts Options, apart func(T) string, run func(batch []T) []R) *Batcher[T, R] {
	if opts.Loops <= 0 {
		opts.Loops = 2
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = opts.Loops * opts.MaxBatch
	}
	if opts.Target > 0 && opts.Interval <= 0 {
		opts.Interval = 4 * opts.Target
	}
	b := &Batcher[T, R]{run: run, apart: apart, opts: opts, in: make(chan *job[T, R], opts.MaxQueue), done: make(chan struct{})}
	for range opts.Loops {
		b.stopped.Go(b.loop)
	}
	return b
}

// Do hands item to the next batch and returns its answer. Once handed over, the request is carried out
// even if ctx ends meanwhile: the answer is what says whether it took effect, so it must reflect what
// happened (run bounds its own work).
func (b *Batcher[T, R]) Do(ctx context.Context, item T) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	j := &job[T, R]{item: item, out: make(chan answer[R], 1)}
	if b.opts.Target > 0 {
		j.queued = time.Now()
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return zero, ErrClosed
	}
	select {
	case b.in <- j:
	default:
		b.mu.RUnlock()
		return zero, ErrOverloaded
	}
	b.mu.RUnlock()
	a := <-j.out
	return a.r, a.err
}

// Close stops taking requests, answers every request already handed over, and waits for the loops.
func (b *Batcher[T, R]) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
	b.mu.Unlock()
	b.stopped.Wait()
}

func (b *Batcher[T, R]) loop() {
	var carry []*job[T, R] // requests kept apart from the previous batch
	var shed shedder
	for {
		var batch, next []*job[T, R]
		keys := map[string]bool{}
		add := func(j *job[T, R]) {
			if b.apart != nil {
				if k := b.apart(j.item); k != "" {
					if keys[k] {
						next = append(next, j)
						return
					}
					keys[k] = true
				}
			}
			batch = append(batch, j)
		}
		for _, j := range carry {
			add(j)
		}
		if len(batch) == 0 {
			select {
			case j := <-b.in:
				add(j)
			case <-b.done:
				// Serve what was handed over before Close, then stop.
				select {
				case j := <-b.in:
					add(j)
				default:
					return
				}
			}
		}
	fill:
		for len(batch)+len(next) < b.opts.MaxBatch {
			select {
			case j := <-b.in:
				add(j)
			default:
				break fill
			}
		}
		carry = next
		if b.opts.Target > 0 {
			// The queue stands only when this batch could not take everything that waits; otherwise what
			// the requests waited was the previous batches' run time, and shedding would refuse load the
			// loops can take at once (a slow dependency, not an overload).
			standing := len(b.in) > 0
			batch = shedStanding(&shed, batch, standing, b.opts.Target, b.opts.Interval)
			if len(batch) == 0 {
				continue
			}
		}
		items := make([]T, len(batch))
		for i, j := range batch {
			items[i] = j.item
		}
		answers := b.run(items)
		for i, j := range batch {
			j.out <- answer[R]{r: answers[i]}
		}
	}
}

// shedder is one loop's CoDel state.
type shedder struct {
	aboveSince time.Time // since when every request of a batch has waited longer than the target
	dropping   bool      // shedding: the queue is standing
	lastDrop   time.Time // when the loop last shed: a queue that stands again soon after is shed at once
}

// shedStanding answers ErrOverloaded to the requests of a standing queue (see Options.Target) and
// returns the ones to run. standing says whether requests were left waiting when the batch was taken: as
// CoDel never drops from a queue holding less than a packet, a queue that one batch empties is not
// standing, however long its requests waited — at a low rate behind a slow dependency every request waits
// longer than the target for a loop to come free, and refusing some of them would not make the others
// faster (issue 41: a tenant's sends refused at 20/s while a new replica's first statements were slow).
func shedStanding[T, R any](s *shedder, batch []*job[T, R], standing bool, target, interval time.Duration) []*job[T, R] {
	now := time.Now()
	minWait := now.Sub(batch[0].queued)
	for _, j := range batch[1:] {
		minWait = min(minWait, now.Sub(j.queued))
	}
	switch {
	case minWait < target, !standing:
		s.aboveSince, s.dropping = time.Time{}, false
		return batch
	case s.dropping, !s.lastDrop.IsZero() && now.Sub(s.lastDrop) < interval:
	case s.aboveSince.IsZero():
		s.aboveSince = now
		return batch
	case now.Sub(s.aboveSince) < interval:
		return batch
	}
	s.dropping, s.lastDrop = true, now
	keep := batch[:0]
	for _, j := range batch {
		if now.Sub(j.queued) > target {
			j.out <- answer[R]{err: ErrOverloaded}
		} else {
			keep = append(keep, j)
		}
	}
	return keep
}
