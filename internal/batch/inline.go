package batch

import (
	"sync"
	"time"
)

// Inline groups concurrent calls like a Batcher, with no goroutines of its own: a caller that finds fewer
// than loops batches running runs one itself, and when it is done hands the requests that arrived meanwhile
// to one of their callers, which runs them as the next batch. A lone call runs at once; under load every
// batch takes all that waits (up to maxBatch). For a read on the request path that costs a round trip each
// (the users' locales of templated sends): nothing to start or close, nothing to shed — the callers are
// bounded already (the API's in-flight requests).
type Inline[T, R any] struct {
	run             func([]T) ([]R, error)
	loops, maxBatch int
	// gap spaces the batches' starts (NewSpacedInline); 0 starts each as soon as it may.
	gap time.Duration

	mu      sync.Mutex
	running int
	waiting []*inlineJob[T, R]
	// next is the earliest start of the next batch when gap is set.
	next time.Time
}

type inlineJob[T, R any] struct {
	item T
	r    R
	err  error
	wake chan bool // true: run the next batch; false: answered
}

// NewInline returns an Inline running run on batches of at most maxBatch, at most loops at a time. run
// returns one answer per request, in order, or an error, which every request of the batch gets.
func NewInline[T, R any](loops, maxBatch int, run func([]T) ([]R, error)) *Inline[T, R] {
	return &Inline[T, R]{run: run, loops: max(loops, 1), maxBatch: max(maxBatch, 1)}
}

// NewSpacedInline is NewInline whose batches start at least gap apart: under a steady stream of calls a
// leader waits out the rest of the gap before it takes the waiting, so each batch holds about gap's
// worth of calls instead of the few that arrived during the previous round trip, and the statement's
// fixed cost is paid that much less often. A call that finds the last start more than gap ago runs at
// once, so an idle or lightly loaded caller pays nothing; a loop that is stuck (a row lock) does not
// hold the other back, which keeps spacing its own batches.
func NewSpacedInline[T, R any](loops, maxBatch int, gap time.Duration, run func([]T) ([]R, error)) *Inline[T, R] {
	g := NewInline(loops, maxBatch, run)
	g.gap = max(gap, 0)
	return g
}

// Do runs item in a batch and returns its answer.
func (g *Inline[T, R]) Do(item T) (R, error) {
	j := &inlineJob[T, R]{item: item, wake: make(chan bool, 1)}
	g.mu.Lock()
	if g.running < g.loops {
		g.running++
		g.mu.Unlock()
	} else {
		g.waiting = append(g.waiting, j)
		g.mu.Unlock()
		if lead := <-j.wake; !lead {
			return j.r, j.err
		}
		// Handed the turn: j was taken out of the waiting list; it leads the next batch.
	}
	g.lead(j)
	return j.r, j.err
}

// lead runs a batch of j and up to maxBatch-1 of the waiting, answers them, and hands the turn to the
// first that still waits, if any, keeping the running count.
func (g *Inline[T, R]) lead(j *inlineJob[T, R]) {
	g.mu.Lock()
	if g.gap > 0 {
		// Take the next start slot (the slots are shared by the loops, so two loops alternate) and
		// let the calls of the wait join this batch.
		now := time.Now()
		start := now
		if g.next.After(now) {
			start = g.next
		}
		g.next = start.Add(g.gap)
		if d := start.Sub(now); d > 0 {
			g.mu.Unlock()
			time.Sleep(d)
			g.mu.Lock()
		}
	}
	n := min(len(g.waiting), g.maxBatch-1)
	jobs := append([]*inlineJob[T, R]{j}, g.waiting[:n]...)
	g.waiting = g.waiting[n:]
	g.mu.Unlock()

	items := make([]T, len(jobs))
	for i, job := range jobs {
		items[i] = job.item
	}
	rs, err := g.run(items)
	if err == nil && len(rs) != len(items) {
		panic("batch: the function returned a result count other than its requests'")
	}
	for i, job := range jobs {
		if err != nil {
			job.err = err
		} else {
			job.r = rs[i]
		}
		if i > 0 {
			job.wake <- false
		}
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.running--
		return
	}
	next := g.waiting[0]
	g.waiting = g.waiting[1:]
	next.wake <- true
}
