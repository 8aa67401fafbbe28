package delivery

import dto "github.com/prometheus/client_model/go"

// Kill stops the worker as a crash would: in-flight sends are cut off, nothing more is written to
// PostgreSQL, no offset is committed; the readers still close, as the broker would notice a dead client.
func (w *Worker) Kill() {
	w.killed.Store(true)
	w.kill()
}

// ClientID names the worker's members in the consumer group.
func (w *Worker) ClientID() string { return w.clientID }

// Rate is the worker's current share of the global rate.
func (w *Worker) Rate() float64 { return w.limiter.Rate() }

// RedriveFound is herald_worker_redrive_found_total{status}.
func RedriveFound(status string) float64 {
	var m dto.Metric
	if err := redriveFound.WithLabelValues(status).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
