package consume

// Slots bound what a worker holds, per priority, in two pools:
//   - buffered: messages in lanes (Options.Buffer, the Group's). Reading far ahead is what lets a worker
//     serve tenants in turn: a quiet tenant's message behind a noisy tenant's backlog in the same
//     partition is fetched, and waits its turn, instead of waiting for the backlog to drain. (Past a bot's
//     share of it, that bot's messages are held compactly instead: hold.go.)
//   - in flight: deliveries between their grant and their status write (the sender's Concurrency): a
//     claim, a platform call, a status write. A message waiting for its chat's interval or for its turn at
//     the global rate holds none.
// In both, normal priority may hold at most three quarters, so a normal backlog never takes the slots
// high-priority messages need.

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/internal/delivery/rate"
)

// Slots is one pool of n slots; gauge counts the slots held by priority.
type Slots struct {
	all    chan struct{}
	normal chan struct{}
	gauge  *prometheus.GaugeVec
}

// NewSlots returns a pool of n slots.
func NewSlots(n int, gauge *prometheus.GaugeVec) *Slots {
	return &Slots{all: make(chan struct{}, n), normal: make(chan struct{}, max(1, n-n/4)), gauge: gauge}
}

// Acquire takes a slot for priority p, waiting until one is free or ctx ends.
func (s *Slots) Acquire(ctx context.Context, p rate.Priority) error {
	if p == rate.Normal {
		select {
		case s.normal <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case s.all <- struct{}{}:
		s.gauge.WithLabelValues(p.String()).Inc()
		return nil
	case <-ctx.Done():
		if p == rate.Normal {
			<-s.normal
		}
		return ctx.Err()
	}
}

// TryAcquire takes a slot for priority p if one is free now, and reports whether it did.
func (s *Slots) TryAcquire(p rate.Priority) bool {
	if p == rate.Normal {
		select {
		case s.normal <- struct{}{}:
		default:
			return false
		}
	}
	select {
	case s.all <- struct{}{}:
		s.gauge.WithLabelValues(p.String()).Inc()
		return true
	default:
		if p == rate.Normal {
			<-s.normal
		}
		return false
	}
}

// Release gives back a slot of priority p.
func (s *Slots) Release(p rate.Priority) {
	<-s.all
	if p == rate.Normal {
		<-s.normal
	}
	s.gauge.WithLabelValues(p.String()).Dec()
}
