package delivery

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/notification"
)

// The metrics of the worker's loops. The consumer's, the sender's and the rate lease's are theirs
// (consume/metrics.go, send/metrics.go, rate/metrics.go); all are herald_worker_*.
var (
	republished = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_republished_total",
		Help: "Envelopes produced again by the worker, by reason (retry_due, unpublished, redrive).",
	}, []string{"reason"})
	released = promauto.NewCounter(prometheus.CounterOpts{
		Name: "herald_worker_scheduled_released_total",
		Help: "Scheduled notifications released (queued and published) by the scheduler when their send_at came.",
	})
	expired = promauto.NewCounter(prometheus.CounterOpts{
		Name: "herald_worker_expired_total",
		Help: "Notifications the expiry sweep moved to expired (their expires_at passed before an attempt started).",
	})
	redriveFound = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_redrive_found_total",
		Help: "Notifications the redrive found stuck, by status: queued (queued for longer than the queued-redrive threshold: its envelope was lost, or is still waiting behind a backlog) or delivering (its lease expired: the worker died).",
	}, []string{"status"})
)

func init() {
	// The series the alerts count exist from the start at 0, so that increase() and rate() see a process's
	// first event: a series born at 1 has no earlier sample to increase from, and an alert would miss it.
	for _, s := range []notification.Status{notification.Queued, notification.Delivering} {
		redriveFound.WithLabelValues(string(s))
	}
}
