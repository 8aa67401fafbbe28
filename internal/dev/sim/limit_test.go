package sim

import (
	"log/slog"
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

// replay sends at the given times through the simulator's own admission, to chats round-robin (nil: no
// chat), and returns the bot's counters.
func replay(t *testing.T, o Options, times []time.Duration, chats int, paid bool) Stats {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	s := New(o)
	t.Cleanup(func() { s.Close() })
	start := time.Unix(1_700_000_000, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range times {
		var c *chat
		if chats > 0 {
			c = s.privateChatLocked(s.def, int64(1+i%chats))
		}
		_ = s.admitLocked(s.def, start.Add(d), c, paid)
	}
	return s.def.stats
}

// The sliding-second count is stricter than the bucket (it lets no burst through) yet never flags a sender
// paced at the rate whose arrivals jitter by less than one interval; 10 % over, it flags.
func TestSlidingSecondCountFlagsOnlyASenderOverTheRate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rate   float64
		paid   bool
		jitter time.Duration
	}{
		{"30/s, 20 ms jitter", 30, false, 20 * time.Millisecond},
		{"paid broadcast at 1000/s, 20 ms jitter", PaidBroadcastRate, true, 20 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{GlobalRate: 30, GlobalBurst: 100, PerChatRate: -1, PaidBroadcast: tt.paid}
			for seed := range uint64(5) {
				if st := replay(t, o, paced(tt.rate, 10*time.Second, tt.jitter, seed), 0, tt.paid); st.SlidingSecondViolations != 0 {
					t.Fatalf("seed %d: %d sliding-second violations for a sender at %v/s", seed, st.SlidingSecondViolations, tt.rate)
				}
			}
			if st := replay(t, o, paced(tt.rate*1.1, 10*time.Second, 0, 1), 0, tt.paid); st.SlidingSecondViolations == 0 {
				t.Fatalf("a sender 10%% over %v/s was not flagged", tt.rate)
			}
		})
	}
}

// The per-chat interval count flags a send to a chat sooner than 1 / PerChatRate (less the tolerance) after
// the last one, even within the chat's burst: a sender keeping the interval with a little jitter sees none.
func TestChatIntervalCountFlagsOnlyASendTooSoon(t *testing.T) {
	o := Options{GlobalRate: -1, PerChatRate: 1, PerChatBurst: 3}
	if st := replay(t, o, paced(1, 30*time.Second, 40*time.Millisecond, 1), 1, false); st.ChatIntervalViolations != 0 || st.LimitViolations != 0 {
		t.Errorf("a sender keeping 1 s per chat, 40 ms jitter: %+v", st)
	}
	// 300 ms of jitter: the bucket's burst absorbs it, the interval count does not.
	if st := replay(t, o, paced(1, 30*time.Second, 300*time.Millisecond, 1), 1, false); st.ChatIntervalViolations == 0 || st.LimitViolations != 0 {
		t.Errorf("a sender with 300 ms of jitter per chat: %+v, want interval violations and no 429", st)
	}
}
