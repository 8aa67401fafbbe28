package sim

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Faults are failures injected into sendMessage (the other methods are never faulted, so a test can always
// inspect and control the simulator). Counted faults (Next*) come first, in the order timeout, 429, 5xx;
// then the rates are rolled. Injected faults take no rate-limit tokens. The simulator's faults apply to
// every bot without faults of its own (BotHandle.SetFaults, POST /sim/faults?bot=).
type Faults struct {
	LatencyMS       int `json:"latency_ms,omitempty"`        // added to every sendMessage answer
	LatencyJitterMS int `json:"latency_jitter_ms,omitempty"` // plus a uniform 0..jitter

	ErrorRate5xx float64 `json:"error_rate_5xx,omitempty"` // fraction answered 500
	TimeoutRate  float64 `json:"timeout_rate,omitempty"`   // fraction never answered (hang until the client gives up)
	Rate429      float64 `json:"rate_429,omitempty"`       // fraction answered 429 with RetryAfter
	RetryAfter   int     `json:"retry_after,omitempty"`    // seconds, for Rate429; default 1

	Next429      *Next429 `json:"next_429,omitempty"`     // the next Count sends answer 429
	Next5xx      int      `json:"next_5xx,omitempty"`     // the next N sends answer 500
	NextTimeouts int      `json:"next_timeout,omitempty"` // the next N sends hang
}

// Next429 makes the next Count sends answer 429 with retry_after = RetryAfter seconds (default 1).
type Next429 struct {
	Count      int `json:"count"`
	RetryAfter int `json:"retry_after"`
}

func (f Faults) validate() error {
	for _, r := range []float64{f.ErrorRate5xx, f.TimeoutRate, f.Rate429} {
		if r < 0 || r > 1 {
			return errors.New("rates must be between 0 and 1")
		}
	}
	if f.LatencyMS < 0 || f.LatencyJitterMS < 0 || f.RetryAfter < 0 || f.Next5xx < 0 || f.NextTimeouts < 0 {
		return errors.New("latencies and counts must not be negative")
	}
	if f.Next429 != nil && (f.Next429.Count < 0 || f.Next429.RetryAfter < 0) {
		return errors.New("next_429 count and retry_after must not be negative")
	}
	return nil
}

// SetFaults replaces the simulator's injected faults, those of every bot without its own; Faults{} turns
// them all off.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	f = f.clone()
	s.mu.Lock()
	s.faults = f
	s.broadcastLocked()
	s.mu.Unlock()
	s.log.Info("faults set", "faults", f)
	return nil
}

// Faults returns the simulator's injected faults, with the counts still to come.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.clone()
}

// SetFaults gives this bot faults of its own, in place of the simulator's: another bot's sends do not meet
// them.
func (h *BotHandle) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	f = f.clone()
	h.s.mu.Lock()
	h.b.faults = &f
	h.s.broadcastLocked()
	h.s.mu.Unlock()
	h.s.log.Info("faults set", "bot_id", h.b.id, "faults", f)
	return nil
}

// ClearFaults takes this bot's own faults away: the simulator's apply to it again.
func (h *BotHandle) ClearFaults() {
	h.s.mu.Lock()
	h.b.faults = nil
	h.s.broadcastLocked()
	h.s.mu.Unlock()
	h.s.log.Info("faults cleared", "bot_id", h.b.id)
}

// Faults returns the faults this bot's sends meet (its own, else the simulator's), with the counts still
// to come.
func (h *BotHandle) Faults() Faults {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.faultsOfLocked(h.b).clone()
}

// faultsOfLocked is the faults the bot's sends meet. Callers hold s.mu.
func (s *Server) faultsOfLocked(b *bot) *Faults {
	if b.faults != nil {
		return b.faults
	}
	return &s.faults
}

// clone copies f, so that its counted faults are not aliased with the caller's value.
func (f Faults) clone() Faults {
	if f.Next429 != nil {
		n := *f.Next429
		f.Next429 = &n
	}
	return f
}

// SetLimits replaces the rate limits. Bucket states are kept, so a change takes effect smoothly.
func (s *Server) SetLimits(l Limits) error {
	if err := l.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.limits = l
	s.mu.Unlock()
	s.log.Info("limits set", "limits", l)
	return nil
}

// Limits returns the rate limits in force.
func (s *Server) Limits() Limits {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits
}

type faultKind int

const (
	noFault faultKind = iota
	fault429
	fault5xx
	faultTimeout
)

// rollFaultLocked decides the fault for one send of the bot and counts down the counted ones. Callers hold
// s.mu.
func (s *Server) rollFaultLocked(b *bot) (kind faultKind, retryAfter int) {
	f := s.faultsOfLocked(b)
	switch {
	case f.NextTimeouts > 0:
		f.NextTimeouts--
		return faultTimeout, 0
	case f.Next429 != nil && f.Next429.Count > 0:
		f.Next429.Count--
		return fault429, max(1, f.Next429.RetryAfter)
	case f.Next5xx > 0:
		f.Next5xx--
		return fault5xx, 0
	case f.TimeoutRate > 0 && rand.Float64() < f.TimeoutRate:
		return faultTimeout, 0
	case f.Rate429 > 0 && rand.Float64() < f.Rate429:
		return fault429, max(1, f.RetryAfter)
	case f.ErrorRate5xx > 0 && rand.Float64() < f.ErrorRate5xx:
		return fault5xx, 0
	}
	return noFault, 0
}

// latencyLocked is the latency to add to one answer to the bot. Callers hold s.mu.
func (s *Server) latencyLocked(b *bot) time.Duration {
	f := s.faultsOfLocked(b)
	d := time.Duration(f.LatencyMS) * time.Millisecond
	if j := f.LatencyJitterMS; j > 0 {
		d += time.Duration(rand.Int64N(int64(j) * int64(time.Millisecond)))
	}
	return d
}
