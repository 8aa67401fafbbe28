package ingress

import (
	"crypto/rand"
	"net/netip"
	"testing"
	"time"
)

// Key guessing fills the negative cache with digests that are never asked again: its memory stays bounded
// (two generations at most), and every entry ages out.
func TestNegativeCacheStaysBoundedUnderKeyGuessing(t *testing.T) {
	c := newNegativeCache(NegativeCacheTTL)
	now := time.Now()
	var d [32]byte
	for i := range 10 * negativeCacheCapacity {
		_, _ = rand.Read(d[:])
		c.add(d, now.Add(time.Duration(i)*time.Microsecond))
	}
	if n := c.g.len(); n > 2*negativeCacheCapacity {
		t.Errorf("the negative cache holds %d digests after %d guesses, want at most %d", n, 10*negativeCacheCapacity, 2*negativeCacheCapacity)
	}
	if !c.has(d, now.Add(time.Second/2)) {
		t.Error("the latest unknown digest is not remembered")
	}
	if c.has(d, now.Add(2*NegativeCacheTTL)) {
		t.Error("an unknown digest is still remembered after its TTL")
	}
}

// Failures are counted per address in windows: the 21st request of a window is blocked until the window
// ends (then Retry-After is the rest of it); the next window starts afresh.
func TestFailureWindowsBlockForTheRestOfTheWindow(t *testing.T) {
	l := newFailureLimiter(MaxAuthFailures, AuthFailureWindow)
	client := clientKey(netip.MustParseAddr("203.0.113.1"))
	t0 := time.Now()
	for i := range MaxAuthFailures {
		at := t0.Add(time.Duration(i) * time.Second)
		if _, blocked := l.blocked(client, at); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		l.fail(client, at)
	}
	left, blocked := l.blocked(client, t0.Add(45*time.Second))
	if !blocked || left != 15*time.Second {
		t.Errorf("45 s into the window after %d failures: blocked %v for %s, want blocked for 15s", MaxAuthFailures, blocked, left)
	}
	if _, blocked := l.blocked(client, t0.Add(AuthFailureWindow)); blocked {
		t.Error("still blocked once the window is over")
	}
	l.fail(client, t0.Add(AuthFailureWindow+time.Second))
	if _, blocked := l.blocked(client, t0.Add(AuthFailureWindow+2*time.Second)); blocked {
		t.Error("one failure in a new window blocks")
	}
}

// Failures from very many addresses (an IPv6 range, a botnet) keep the table bounded.
func TestFailureTableStaysBoundedUnderManyAddresses(t *testing.T) {
	l := newFailureLimiter(MaxAuthFailures, AuthFailureWindow)
	now := time.Now()
	var b [4]byte
	for range 10 * failureTableCapacity {
		_, _ = rand.Read(b[:])
		l.fail(clientKey(netip.AddrFrom4(b)), now)
	}
	if n := l.g.len(); n > 2*failureTableCapacity {
		t.Errorf("the failure table holds %d addresses, want at most %d", n, 2*failureTableCapacity)
	}
}
