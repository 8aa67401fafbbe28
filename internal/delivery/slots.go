package delivery

// In-flight slots bound the deliveries a worker holds at once; normal priority may hold at most three
// quarters of them, so a normal backlog never takes the slots high-priority messages need.

import "context"

// acquire takes an in-flight slot for priority p.
func (w *Worker) acquire(ctx context.Context, p Priority) error {
	if p == Normal {
		select {
		case w.normalSlots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case w.slots <- struct{}{}:
		inFlight.WithLabelValues(p.String()).Inc()
		return nil
	case <-ctx.Done():
		if p == Normal {
			<-w.normalSlots
		}
		return ctx.Err()
	}
}

func (w *Worker) release(p Priority) {
	<-w.slots
	if p == Normal {
		<-w.normalSlots
	}
	inFlight.WithLabelValues(p.String()).Dec()
}
