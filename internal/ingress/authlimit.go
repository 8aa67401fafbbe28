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
// MaxAuthFailures invalid keys within AuthFailureWindow gets 429 rate_limited for its invalid keys for the
// rest of that window. Only what fails is throttled: a valid, active key passes from a throttled address
// (behind a balancer that is not a trusted proxy, every client shares one address). So that a throttled
// address cannot cost a query per request by sending random well-formed keys, its keys are looked up only
// when this replica has seen them valid recently (recentKeys), or within a small per-replica budget
// (ThrottledLookupsPerSecond); past it, 429 without a query. The tables are bounded, whatever the traffic:
// key guessing fills the first two with garbage that ages out, and only valid keys enter the third.
const (
	// NegativeCacheTTL bounds how long a key that was unknown when it was tried keeps failing after it is
	// created. Only a request that names the exact key before it exists puts it here, so a new key is
	// refused for at most this long, and only by a client that raced its creation.
	NegativeCacheTTL = time.Second
	// MaxAuthFailures is how many requests without a valid key one client address may send per window;
	// the next invalid one of the window is 429.
	MaxAuthFailures = 20
	// AuthFailureWindow starts at an address's first failure.
	AuthFailureWindow = time.Minute
	// RecentKeyTTL is how long a key that authenticated on this replica is looked up even from a throttled
	// address, without spending the budget: between one and two of these after its last lookup (the table
	// keeps two generations). It bounds nothing about revocation (the positive cache's TTL does): a key
	// here is still looked up, and leaves at its first failed lookup.
	RecentKeyTTL = 24 * time.Hour
	// ThrottledLookupsPerSecond and ThrottledLookupBurst are the budget of lookups, per replica, for the
	// keys of throttled addresses that are in none of the tables: what a throttled address can cost
	// PostgreSQL at most, and how fast a valid key new to the replica gets through while one does.
	ThrottledLookupsPerSecond = 20
	ThrottledLookupBurst      = 20

	// negativeCacheCapacity, failureTableCapacity and recentKeysCapacity bound each generation of the three
	// tables (there are at most two generations): about 2×(16,384 × ~80 bytes) each.
	negativeCacheCapacity = 1 << 14
	failureTableCapacity  = 1 << 14
	recentKeysCapacity    = 1 << 14
)

var authResults = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "herald_ingress_authentications_total",
	Help: "Authentications of /v1 requests by result: cached, looked_up (PostgreSQL), unknown (PostgreSQL), unknown_cached, malformed, throttled (answered 429: an address over its failures, or the lookup budget for throttled addresses spent).",
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

func newFailureLimiter(maxFailures int, window time.Duration) *failureLimiter {
	return &failureLimiter{max: maxFailures, window: window, g: newGenerations[netip.Prefix, failureWindow](failureTableCapacity, window)}
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

// recentKeys remembers the digests of keys that authenticated on this replica, for RecentKeyTTL: a
// throttled address's request with one of them is looked up as any other, so a valid key passes from a
// throttled address without spending the lookup budget. Only a successful lookup adds a digest, so key
// guessing cannot fill it; a failed lookup removes it.
type recentKeys struct {
	g *generations[[32]byte, struct{}]
}

func newRecentKeys(ttl time.Duration) *recentKeys {
	return &recentKeys{g: newGenerations[[32]byte, struct{}](recentKeysCapacity, ttl)}
}

func (c *recentKeys) has(d [32]byte) bool {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	_, ok := c.g.get(d)
	return ok
}

func (c *recentKeys) add(d [32]byte, now time.Time) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	c.g.put(d, struct{}{}, now)
}

func (c *recentKeys) forget(d [32]byte) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	delete(c.g.cur, d)
	delete(c.g.prev, d)
}

// lookupBudget is a token bucket: what lookups throttled addresses may cost this replica, together.
type lookupBudget struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newLookupBudget(rate float64, burst int) *lookupBudget {
	return &lookupBudget{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// take spends a lookup; when none is left it reports how long until one is.
func (b *lookupBudget) take(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	if b.rate <= 0 {
		return time.Second, false
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second)), false
}
