package callback

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Callback metrics. The outbox gauges are read from PostgreSQL (every replica reports the same
// installation-wide figures: aggregate with max, not sum).
var (
	attempts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_callback_attempts_total",
		Help: "Callback attempts by outcome: delivered (2xx within the timeout), rejected (any other answer, redirects included), timeout, network, blocked (an address the guard refuses), canceled (shutdown; not counted as an attempt).",
	}, []string{"outcome"})
	attemptDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_callback_attempt_duration_seconds",
		Help:    "Duration of callback attempts, by outcome.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"outcome"})
	dropped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_callback_dropped_total",
		Help: "Callback events given up, by reason: expired (still failing after the retry window, 24 h), gone (the notification no longer exists).",
	}, []string{"reason"})
	queueDepth = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_callback_queue_depth",
		Help: "Callback events not yet delivered or dropped, installation-wide, by state: due (waiting for a sender), in_flight (under a lease), retrying (waiting for their next attempt).",
	}, []string{"state"})
	oldestDue = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_callback_oldest_due_seconds",
		Help: "How long the oldest due callback event has been waiting for a sender (0 when none is due): the senders' lag.",
	})
	endpointFailures = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_callback_endpoint_consecutive_failures",
		Help: "Consecutive failed attempts of each tenant's most failing callback endpoint, by tenant (capped like every tenant label, then \"other\"); tenants whose endpoints' last attempts succeeded are absent.",
	}, []string{"tenant"})
	secretsOldKey = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_callback_secrets_old_key",
		Help: "Endpoint secrets sealed under another key than the first of HERALD_CALLBACK_SECRET_KEY, installation-wide: the senders seal them again under the first; at 0 a rotation is complete and the other keys can be removed.",
	})
	inFlight = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_callback_in_flight",
		Help: "Callback attempts this sender has in flight.",
	})
)

// Every outcome and reason starts at 0, so that increase() and rate() see a process's first event and the
// dashboard and alerts find the series before anything happened.
func init() {
	for _, o := range []string{"delivered", "rejected", "timeout", "network", "blocked", "canceled"} {
		attempts.WithLabelValues(o)
	}
	for _, r := range []string{"expired", "gone"} {
		dropped.WithLabelValues(r)
	}
}
