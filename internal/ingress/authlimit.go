package ingress

import (
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Failed authentication is cheap and bounded (v1-extensions §8): an unknown key is remembered for
// NegativeCacheTTL, so repeating it costs no PostgreSQL query; a client address that sends more than
// MaxAuthFailures invalid keys within AuthFailureWindow gets 429 rate_limited for the rest of that window.
// Both tables are bounded, whatever the traffic: key guessing fills them with garbage that ages out, and
// never grows memory past their capacity.
const (
	// NegativeCacheTTL bounds how long a key that was unknown when it was tried keeps failing after it is
	// created. Only a request that names the exact key before it exists puts it here, so a new key is
	// refused for at most this long, and only by a client that raced its creation.
	NegativeCacheTTL = time.Second
	// MaxAuthFailures is how many requests without a valid key one client address may send per window;
	// the next request of the window is 429.
	MaxAuthFailures = 20
	// AuthFailureWindow starts at an address's first failure.
	AuthFailureWindow = time.Minute

	// negativeCacheCapacity and failureTableCapacity bound each generation of the two tables (there are at
	// most two generations): about 2×(16,384 × ~80 bytes) each.
	negativeCacheCapacity = 1 << 14
	failureTableCapacity  = 1 << 14
)

var authResults = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "herald_ingress_authentications_total",
	Help: "Authentications of /v1 requests by result: cached, looked_up (PostgreSQL), unknown (PostgreSQL), unknown_cached, malformed, throttled.",
}, []string{"result"})

// generations is a bounded map whose entries expire: two maps, the current and the previous; a lookup
// reads both, a write goes to the current one, and the previous one is dropped whole when the current one
// is full or older than the rotation period. Memory stays below two full maps; no entry is scanned for.
type generations[K comparable, V any] struct {
	mu       sync.Mutex
	capacity int
	period   time.Duration
	rotated  time.Time
	cur      map[K]V
	prev     map[K]V
}

func newGenerations[K comparable, V any](capacity int, period time.Duration) *generations[K, V] {
	return &generations[K, V]{capacity: capacity, period: period, cur: map[K]V{}, prev: map[K]V{}}
}

// get reads k; callers hold g.mu.
func (g *generations[K, V]) get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	return v, ok
}

// put writes k, rotating first when the current map is full or old; callers hold g.mu.
func (g *generations[K, V]) put(k K, v V, now time.Time) {
	if _, ok := g.cur[k]; !ok && (len(g.cur) >= g.capacity || now.Sub(g.rotated) >= g.period) {
		g.prev, g.cur, g.rotated = g.cur, make(map[K]V, min(len(g.cur), g.capacity)), now
	}
	delete(g.prev, k)
	g.cur[k] = v
}

func (g *generations[K, V]) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cur) + len(g.prev)
}

// negativeCache remembers digests of keys PostgreSQL did not know, each for NegativeCacheTTL.
type negativeCache struct {
	ttl time.Duration
	g   *generations[[32]byte, time.Time]
}

func newNegativeCache(ttl time.Duration) *negativeCache {
	return &negativeCache{ttl: ttl, g: newGenerations[[32]byte, time.Time](negativeCacheCapacity, ttl)}
}

func (c *negativeCache) has(d [32]byte, now time.Time) bool {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	until, ok := c.g.get(d)
	return ok && now.Before(until)
}

func (c *negativeCache) add(d [32]byte, now time.Time) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	c.g.put(d, now.Add(c.ttl), now)
}

// failureLimiter counts failed authentications per client address in fixed windows that start at the
// address's first failure. An address not in the table has had no failure this window. When the table
// is full of live entries, the oldest generation is dropped: the limiter then forgets some addresses
// early (they may fail MaxAuthFailures more times), but memory stays bounded.
type failureLimiter struct {
	max    int
	window time.Duration
	g      *generations[netip.Prefix, failureWindow]
}

type failureWindow struct {
	start    time.Time
	failures int
}

func newFailureLimiter(max int, window time.Duration) *failureLimiter {
	return &failureLimiter{max: max, window: window, g: newGenerations[netip.Prefix, failureWindow](failureTableCapacity, window)}
}

// clientKey is what the limiter counts: the address, or for IPv6 its /64 (one subscriber's prefix: a
// client can use any address in it). The zero Prefix stands for clients whose address is unknown.
func clientKey(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p
	}
	return netip.PrefixFrom(a, 32)
}

// blocked reports whether the client has used up its failures in its current window, and how long that
// window still lasts.
func (l *failureLimiter) blocked(client netip.Prefix, now time.Time) (time.Duration, bool) {
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	w, ok := l.g.get(client)
	if !ok || w.failures < l.max {
		return 0, false
	}
	left := w.start.Add(l.window).Sub(now)
	return left, left > 0
}

// fail counts a failed authentication; it reports whether the client has now used up its window.
func (l *failureLimiter) fail(client netip.Prefix, now time.Time) bool {
	l.g.mu.Lock()
	defer l.g.mu.Unlock()
	w, ok := l.g.get(client)
	if !ok || !now.Before(w.start.Add(l.window)) {
		w = failureWindow{start: now}
	}
	w.failures++
	l.g.put(client, w, now)
	return w.failures == l.max
}
