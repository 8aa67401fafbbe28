package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// sendAt replays send times against one bucket and counts the sends that do not conform.
func violations(times []time.Duration, rate float64, burst int, tolerance float64) int {
	var b bucket
	start := time.Unix(1_700_000_000, 0)
	n := 0
	for _, t := range times {
		now := start.Add(t)
		if b.wait(now, rate, burst, tolerance) > 0 {
			n++
			continue
		}
		b.take(now, rate, tolerance)
	}
	return n
}

// paced is a client that sends at exactly rate for d, each send delayed by a random arrival jitter.
func paced(rate float64, d, jitter time.Duration, seed uint64) []time.Duration {
	r := rand.New(rand.NewPCG(seed, seed))
	interval := time.Duration(float64(time.Second) / rate)
	var out []time.Duration
	for t := time.Duration(0); t < d; t += interval {
		j := time.Duration(0)
		if jitter > 0 {
			j = time.Duration(r.Int64N(int64(jitter)))
		}
		out = append(out, t+j)
	}
	// Arrivals are what the server sees, in the order it sees them.
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k] < out[k-1]; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

func TestLimiterDoesNotFlagACorrectlyPacedClient(t *testing.T) {
	tests := []struct {
		name   string
		rate   float64
		burst  int
		jitter time.Duration
	}{
		{"global 30/s, 20 ms jitter", 30, 3, 20 * time.Millisecond},
		{"global 1000/s, 20 ms jitter", 1000, 50, 20 * time.Millisecond},
		{"per chat 1/s, 300 ms jitter", 1, 3, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(20) {
				times := paced(tt.rate, 30*time.Second, tt.jitter, seed)
				if n := violations(times, tt.rate, tt.burst, 0.05); n != 0 {
					t.Fatalf("seed %d: %d violations for a client at exactly %v/s", seed, n, tt.rate)
				}
			}
		})
	}
}

func TestLimiterFlagsAClientTenPercentOver(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		burst int
	}{
		{"global 30/s", 30, 3},
		{"global 1000/s", 1000, 50},
		{"per chat 1/s", 1, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 11 % over for long enough to drain the burst: burst / (6 % of rate) seconds, and some.
			d := time.Duration(float64(tt.burst)/(0.06*tt.rate)*float64(time.Second)) + 10*time.Second
			times := paced(tt.rate*1.11, d, 0, 1)
			if n := violations(times, tt.rate, tt.burst, 0.05); n == 0 {
				t.Fatalf("a client 11%% over %v/s for %v was not flagged", tt.rate, d)
			}
		})
	}
}

func TestLimiterAllowsTheBurstThenTheRate(t *testing.T) {
	var b bucket
	now := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if w := b.wait(now, 1, 3, 0); w != 0 {
			t.Fatalf("send %d of a burst of 3 must conform, must wait %v", i+1, w)
		}
		b.take(now, 1, 0)
	}
	w := b.wait(now, 1, 3, 0)
	if w != time.Second {
		t.Fatalf("the 4th immediate send must wait 1 s, waits %v", w)
	}
	if b.wait(now.Add(time.Second), 1, 3, 0) != 0 {
		t.Fatal("after waiting retry_after the send must conform")
	}
	if got := retryAfterSeconds(w); got != 1 {
		t.Errorf("retry_after for 1 s = %d", got)
	}
	if got := retryAfterSeconds(1500 * time.Millisecond); got != 2 {
		t.Errorf("retry_after rounds up: got %d for 1.5 s", got)
	}
	if got := retryAfterSeconds(time.Millisecond); got != 1 {
		t.Errorf("retry_after is at least 1: got %d", got)
	}
}

func TestLimiterWithoutRateIsUnlimited(t *testing.T) {
	var b bucket
	now := time.Unix(1_700_000_000, 0)
	for range 10_000 {
		if b.wait(now, 0, 1, 0.05) != 0 {
			t.Fatal("rate 0 must not limit")
		}
		b.take(now, 0, 0.05)
	}
}
