package rate

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestLimiterGrantsAtTheRate(t *testing.T) {
	l := NewLimiter(200, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if err := l.Wait(ctx, Normal, "t"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// 100 grants at 200/s with a burst of 2 take at least 0.49 s.
	if elapsed := time.Since(start); elapsed < 480*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("100 grants at 200/s took %v, want about 0.5 s", elapsed)
	}
}

func TestLimiterServesHighFirstWithoutStarvingNormal(t *testing.T) {
	l := NewLimiter(0, 3) // paused while the queues fill
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	var mu sync.Mutex
	var order []Priority
	var wg sync.WaitGroup
	for i := range 40 {
		p := High
		if i%2 == 1 {
			p = Normal
		}
		wg.Go(func() {
			if l.Wait(ctx, p, "t") == nil {
				mu.Lock()
				order = append(order, p)
				mu.Unlock()
			}
		})
	}
	// Every waiter is queued before the first grant (no fixed sleep: a busy machine may take longer).
	for deadline := time.Now().Add(10 * time.Second); ; {
		l.mu.Lock()
		n := l.classes[High].live + l.classes[Normal].live
		l.mu.Unlock()
		if n == 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 40 waiters queued", n)
		}
		time.Sleep(time.Millisecond)
	}
	// 100/s: a burst of 1 and 10 ms between grants, so the order goroutines record is the grant order.
	l.SetRate(100)
	wg.Wait()
	// While both wait: three high, one normal. The first 20 grants hold 15 high and 5 normal.
	highs := 0
	for _, p := range order[:20] {
		if p == High {
			highs++
		}
	}
	if highs != 15 {
		t.Errorf("the first 20 grants went %d to high, want 15 (weight 3:1): %v", highs, order)
	}
}

func TestLimiterPauseAndAbandon(t *testing.T) {
	l := NewLimiter(1000, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	l.Pause(time.Now().Add(300 * time.Millisecond))
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := l.Wait(short, High, "t"); err == nil {
		t.Fatal("a wait during a pause must not be granted")
	}
	start := time.Now()
	if err := l.Wait(ctx, High, "t"); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("granted after %v during a 300 ms pause", waited)
	}
}

// A process that stalls after granting (CPU starvation, SIGSTOP, a GC pause) would send every grant it
// made before the stall at once when it resumes. Admit, taken at the moment a request leaves, spaces them
// again: whatever the grants did, the admissions never exceed burst + rate·T in any window T.
func TestAdmitSpacesRequestsAfterAStall(t *testing.T) {
	const rate = 50.0 // burst 1
	l := NewLimiter(rate, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	// Twenty deliveries are granted; then "the process stalls": all of them resume at the same instant.
	const n = 20
	start := make(chan struct{})
	var mu sync.Mutex
	var admitted []time.Time
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if err := l.Wait(ctx, Normal, "t"); err != nil {
				t.Error(err)
				return
			}
			<-start
			if err := l.Admit(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			admitted = append(admitted, time.Now())
			mu.Unlock()
		})
	}
	time.Sleep(time.Duration(float64(n)/rate*float64(time.Second)) + 100*time.Millisecond) // every grant made
	close(start)
	wg.Wait()
	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	interval := time.Duration(float64(time.Second) / rate)
	for i := 1; i < len(admitted); i++ {
		// A little slack for the clock between Admit's decision and the time taken here.
		if gap := admitted[i].Sub(admitted[i-1]); gap < interval-2*time.Millisecond {
			t.Fatalf("admissions %d and %d only %v apart after a stall, want at least %v (rate %v/s, burst 1)", i-1, i, gap, interval, rate)
		}
	}
}

// grantOrder queues the waiters (tenant per waiter, in order) on a paused limiter, then lets it grant at
// 100/s and returns the tenants in the order they were granted.
func grantOrder(t *testing.T, l *Limiter, tenants []string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, tenant := range tenants {
		// Queue them one at a time, so the arrival order is the slice's.
		for deadline := time.Now().Add(10 * time.Second); ; {
			l.mu.Lock()
			n := l.classes[Normal].live
			l.mu.Unlock()
			if n == i {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
		wg.Go(func() {
			if l.Wait(ctx, Normal, tenant) == nil {
				mu.Lock()
				order = append(order, tenant)
				mu.Unlock()
			}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		l.mu.Lock()
		n := l.classes[Normal].live
		l.mu.Unlock()
		if n == len(tenants) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("waiters never all queued")
		}
		time.Sleep(time.Millisecond)
	}
	l.SetRate(100) // burst 1, 10 ms apart: the recorded order is the grant order
	wg.Wait()
	return order
}

// A tenant with a backlog does not hold another tenant back: within a class tenants are served in turn,
// so a quiet tenant that arrives behind 30 waiting messages of a noisy one is served within one round.
func TestLimiterServesTenantsInTurn(t *testing.T) {
	var tenants []string
	for range 30 {
		tenants = append(tenants, "noisy")
	}
	tenants = append(tenants, "quiet")
	order := grantOrder(t, NewLimiter(0, 9), tenants)
	at := slices.Index(order, "quiet")
	if at < 0 || at > 2 {
		t.Errorf("the quiet tenant was granted %dth after a noisy backlog of 30; want within the first round: %v", at+1, order)
	}
}

// A tenant's weight is its grants per turn.
func TestLimiterWeightsTenants(t *testing.T) {
	l := NewLimiter(0, 9)
	l.SetWeights(map[string]int{"heavy": 3})
	var tenants []string
	for range 12 {
		tenants = append(tenants, "heavy", "light")
	}
	order := grantOrder(t, l, tenants)
	heavy := 0
	for _, tenant := range order[:12] {
		if tenant == "heavy" {
			heavy++
		}
	}
	if heavy != 9 {
		t.Errorf("the first 12 grants went %d to the tenant of weight 3, want 9: %v", heavy, order)
	}
}

// A refunded grant goes to the next waiter at once instead of costing a slot of the rate.
func TestLimiterRefund(t *testing.T) {
	l := NewLimiter(2, 9) // one grant every 500 ms
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go l.Run(ctx)
	if err := l.Wait(ctx, Normal, "t"); err != nil {
		t.Fatal(err)
	}
	l.Refund()
	start := time.Now()
	if err := l.Wait(ctx, Normal, "t"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("the grant after a refund took %v, want it at once (the rate's interval is 500 ms)", took)
	}
}
