// Package wait is how a test waits for what a background loop or another process does: it polls a
// condition until it holds and fails the test once a deadline has passed, never sleeping a fixed time.
package wait

import (
	"testing"
	"time"
)

// interval is how often Until and For poll: short beside any deadline a test gives, cheap for the checks
// they run (a query, a local request).
const interval = 20 * time.Millisecond

// Until polls cond until it holds, and fails the test if it still does not after within.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(interval)
	}
}

// For polls check until it returns nil, and fails the test with check's last error if it still does not
// after within.
func For(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	ForEvery(t, within, interval, what, check)
}

// ForEvery is For polling every given interval, for a check that costs (a kubectl call, a request
// through a cluster).
func ForEvery(t testing.TB, within, every time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(every)
	}
}
