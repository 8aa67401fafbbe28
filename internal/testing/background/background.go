// Package background runs a component inside a test the way its command runs it: its Run(ctx) on a
// goroutine of its own until the context is cancelled (what SIGTERM does), and then checks that it stops
// cleanly and in time.
package background

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Run is a component running in a test.
type Run struct {
	name   string
	within time.Duration
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned, err then set
	err    error
	once   sync.Once
}

// Start runs run until Stop is called or the test ends. name says what it is in a failure ("the worker");
// within bounds how long it may take to stop.
func Start(t testing.TB, name string, within time.Duration, run func(ctx context.Context) error) *Run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{name: name, within: within, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Stop cancels run's context and waits for it to return. The test fails if it returns an error or does not
// return within the time Start was given. Only the first call waits; later ones return at once.
func (r *Run) Stop(t testing.TB) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case <-r.done:
			if r.err != nil {
				t.Errorf("%s returned %v after it was stopped, want nil", r.name, r.err)
			}
		case <-time.After(r.within):
			t.Errorf("%s did not stop within %v", r.name, r.within)
		}
	})
}

// Exited says whether run has returned (before it was stopped: a component that could not start), and
// what it returned.
func (r *Run) Exited() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}
