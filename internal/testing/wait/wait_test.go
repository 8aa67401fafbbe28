package wait_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/testing/wait"
)

// recorder is a test that records its failure instead of failing, and stops its goroutine as Fatalf does.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder on a goroutine of its own, as a test's own goroutine would be, and returns
// what it failed with ("" when it did not).
func run(f func(t testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failure
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	failure := run(func(r testing.TB) {
		wait.Until(r, 10*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	})
	if failure != "" || calls != 3 {
		t.Errorf("failed %q after %d calls, want no failure after 3", failure, calls)
	}
}

func TestUntilFailsSayingWhatItWaitedFor(t *testing.T) {
	failure := run(func(r testing.TB) { wait.Until(r, 50*time.Millisecond, "the impossible", func() bool { return false }) })
	if !strings.Contains(failure, "the impossible: not within 50ms") {
		t.Errorf("failed with %q, want what it waited for and for how long", failure)
	}
}

func TestForFailsWithTheChecksLastError(t *testing.T) {
	calls := 0
	failure := run(func(r testing.TB) {
		wait.For(r, 50*time.Millisecond, "the count", func() error { calls++; return fmt.Errorf("%d calls so far", calls) })
	})
	if want := fmt.Sprintf("the count: not within 50ms: %d calls so far", calls); calls < 2 || failure != want {
		t.Errorf("failed with %q after %d calls, want %q", failure, calls, want)
	}
}

func TestForEveryReturnsOnceTheCheckPasses(t *testing.T) {
	calls := 0
	failure := run(func(r testing.TB) {
		wait.ForEvery(r, 10*time.Second, time.Millisecond, "five calls", func() error {
			if calls++; calls < 5 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if failure != "" || calls != 5 {
		t.Errorf("failed %q after %d calls, want no failure after 5", failure, calls)
	}
}
