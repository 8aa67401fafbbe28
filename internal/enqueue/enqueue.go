// Package enqueue accepts tenant notifications on the hot path of POST /v1/send. Concurrent sends are
// grouped into batches: each batch is one gated multi-row INSERT (committed), then one Kafka produce of all
// its envelopes. A send is answered only after the acknowledgement, so a 202 means "stored and on Kafka";
// a failed produce deletes the batch's rows again, so a 502 means nothing was stored.
//
// Batches form naturally: a batch loop takes whatever is waiting when it becomes free, so a lone request
// waits for nothing and a burst shares the round trips.
package enqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
)

// ErrQueue: the broker did not acknowledge within the produce timeout; nothing was stored.
var ErrQueue = errors.New("enqueue failed")

// ErrClosed: the enqueuer is shutting down.
var ErrClosed = errors.New("enqueuer closed")

// Options tune the batching.
type Options struct {
	Loops          int           // concurrent batch loops; 2 when zero (one batch commits while the next produces)
	MaxBatch       int           // most notifications in one batch; 256 when zero
	ProduceTimeout time.Duration // 2 s when zero
}

// Enqueuer batches sends.
type Enqueuer struct {
	st       *store.Store
	producer *queue.Producer
	opts     Options
	in       chan *request
	done     chan struct{}
	stopped  chan struct{}
}

type request struct {
	n   store.NewNotification
	out chan error
}

// New starts the batch loops; Close stops them after the waiting requests are served.
func New(st *store.Store, producer *queue.Producer, opts Options) *Enqueuer {
	if opts.Loops == 0 {
		opts.Loops = 2
	}
	if opts.MaxBatch == 0 {
		opts.MaxBatch = 256
	}
	if opts.ProduceTimeout == 0 {
		opts.ProduceTimeout = 2 * time.Second
	}
	e := &Enqueuer{st: st, producer: producer, opts: opts, in: make(chan *request, opts.MaxBatch*opts.Loops), done: make(chan struct{}), stopped: make(chan struct{})}
	finished := make(chan struct{}, opts.Loops)
	for range opts.Loops {
		go func() { e.loop(); finished <- struct{}{} }()
	}
	go func() {
		for range opts.Loops {
			<-finished
		}
		close(e.stopped)
	}()
	return e
}

// Enqueue stores and produces one tenant notification. It returns nil once committed,
// store.ErrUnverified when the user is not sendable, ErrQueue when the broker failed, or another error
// when PostgreSQL did.
func (e *Enqueuer) Enqueue(ctx context.Context, n store.NewNotification) error {
	r := &request{n: n, out: make(chan error, 1)}
	select {
	case e.in <- r:
	case <-e.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once handed over, the request is carried out even if the caller goes away: the answer is what says
	// whether it was accepted, so it must reflect what happened.
	return <-r.out
}

// Close stops accepting, serves what is waiting, and waits for the loops.
func (e *Enqueuer) Close() {
	close(e.done)
	<-e.stopped
}

func (e *Enqueuer) loop() {
	batch := make([]*request, 0, e.opts.MaxBatch)
	for {
		var first *request
		select {
		case first = <-e.in:
		case <-e.done:
			// Drain what was handed over before Close.
			select {
			case first = <-e.in:
			default:
				return
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < e.opts.MaxBatch {
			select {
			case r := <-e.in:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		e.process(batch)
	}
}

func (e *Enqueuer) process(batch []*request) {
	ns := make([]store.NewNotification, len(batch))
	for i, r := range batch {
		ns[i] = r.n
	}
	ctx, cancel := context.WithTimeout(context.Background(), store.DefaultQueryTimeout+e.opts.ProduceTimeout)
	defer cancel()
	accepted, publishErr, err := e.st.EnqueueTenantBatch(ctx, ns, func(ctx context.Context, ok []store.NewNotification) error {
		out := make([]queue.Outgoing, len(ok))
		for i, n := range ok {
			out[i] = queue.Outgoing{Priority: n.Priority, Key: queue.UserKey(n.TenantID, n.UserID),
				Envelope: queue.Envelope{V: queue.EnvelopeVersion, TrackingID: n.TrackingID, TenantID: n.TenantID}}
		}
		pctx, pcancel := context.WithTimeout(ctx, e.opts.ProduceTimeout)
		defer pcancel()
		return e.producer.PublishMany(pctx, out)
	})
	for _, r := range batch {
		switch {
		case err != nil:
			r.out <- err
		case !accepted[r.n.TrackingID]:
			// Refused by the gate: that answer stands whatever happened to the rest of the batch.
			r.out <- store.ErrUnverified
		case publishErr != nil:
			r.out <- fmt.Errorf("%w: %v", ErrQueue, publishErr)
		default:
			r.out <- nil
		}
	}
}
