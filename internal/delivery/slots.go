package delivery

// Slots bound what a worker holds, per priority, in two pools:
//   - buffered: messages fetched and not finished (Options.Buffer). Reading far ahead is what lets a
//     worker serve tenants in turn: a quiet tenant's message behind a noisy tenant's backlog in the same
//     partition is fetched, and waits its turn, instead of waiting for the backlog to drain.
//   - in flight: deliveries between their grant and their status write (Options.Concurrency): a claim, a
//     platform call, a status write. A message waiting for its chat's interval or for its turn at the
//     global rate holds none.
// In both, normal priority may hold at most three quarters, so a normal backlog never takes the slots
// high-priority messages need.

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

type slotPool struct {
	all    chan struct{}
	normal chan struct{}
	gauge  *prometheus.GaugeVec
}

func newSlotPool(n int, gauge *prometheus.GaugeVec) *slotPool {
	return &slotPool{all: make(chan struct{}, n), normal: make(chan struct{}, max(1, n-n/4)), gauge: gauge}
}

// acquire takes a slot for priority p.
func (s *slotPool) acquire(ctx context.Context, p Priority) error {
	if p == Normal {
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
		if p == Normal {
			<-s.normal
		}
		return ctx.Err()
	}
}

func (s *slotPool) release(p Priority) {
	<-s.all
	if p == Normal {
		<-s.normal
	}
	s.gauge.WithLabelValues(p.String()).Dec()
}
