package background_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/testing/background"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// recorder is a test that records its errors instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper()        {}
func (r *recorder) Cleanup(func()) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestStopCancelsAndWaitsOnce(t *testing.T) {
	r := &recorder{}
	stopped := 0
	run := background.Start(r, "the component", 5*time.Second, func(ctx context.Context) error {
		<-ctx.Done()
		stopped++
		return nil
	})
	if exited, _ := run.Exited(); exited {
		t.Fatal("Exited before Stop")
	}
	run.Stop(r)
	run.Stop(r)
	if exited, err := run.Exited(); !exited || err != nil || stopped != 1 || len(r.errors) != 0 {
		t.Errorf("after Stop: exited %v (%v), stopped %d times, errors %q; want one clean stop", exited, err, stopped, r.errors)
	}
}

func TestStopFailsOnAnErrorOrAHang(t *testing.T) {
	r := &recorder{}
	failing := background.Start(r, "the failing one", 5*time.Second, func(ctx context.Context) error {
		<-ctx.Done()
		return errors.New("boom")
	})
	failing.Stop(r)
	failing.Stop(r) // the test's cleanup stops it again: the failure is said once
	release := make(chan struct{})
	defer close(release)
	background.Start(r, "the stuck one", 50*time.Millisecond, func(context.Context) error {
		<-release
		return nil
	}).Stop(r)
	if len(r.errors) != 2 || !strings.Contains(r.errors[0], "the failing one returned boom") ||
		!strings.Contains(r.errors[1], "the stuck one did not stop within 50ms") {
		t.Errorf("errors %q, want the error and the hang, each naming its component", r.errors)
	}
}

func TestExitedTellsAComponentThatStoppedByItself(t *testing.T) {
	r := &recorder{}
	run := background.Start(r, "the short one", 5*time.Second, func(context.Context) error { return errors.New("no port") })
	wait.Until(t, 5*time.Second, "the component to exit", func() bool { exited, _ := run.Exited(); return exited })
	if _, err := run.Exited(); err == nil || err.Error() != "no port" {
		t.Errorf("Exited with %v, want what run returned", err)
	}
}
