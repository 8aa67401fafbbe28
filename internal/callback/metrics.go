package callback

import "github.com/heraldhq/herald/internal/metric"

// Callback metrics. The outbox gauges are read from PostgreSQL (every replica reports the same
// installation-wide figures: aggregate with max, not sum).
var (
	attempts = metric.CounterVec("herald_callback_attempts_total",
		"Callback attempts by outcome: delivered (2xx within the timeout), rejected (any other answer, redirects included), timeout, network, blocked (an address the guard refuses), canceled (shutdown; not counted as an attempt).", "outcome")
	attemptDuration = metric.HistogramVec("herald_callback_attempt_duration_seconds",
		"Duration of callback attempts, by outcome.",
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "outcome")
	dropped = metric.CounterVec("herald_callback_dropped_total",
		"Callback events given up, by reason: expired (still failing after the retry window, 24 h), gone (the notification no longer exists).", "reason")
	queueDepth = metric.GaugeVec("herald_callback_queue_depth",
		"Callback events not yet delivered or dropped, installation-wide, by state: due (waiting for a sender), in_flight (under a lease), retrying (waiting for their next attempt).", "state")
	oldestDue = metric.Gauge("herald_callback_oldest_due_seconds",
		"How long the oldest due callback event has been waiting for a sender (0 when none is due): the senders' lag.")
	endpointFailures = metric.GaugeVec("herald_callback_endpoint_consecutive_failures",
		"Consecutive failed attempts of each tenant's most failing callback endpoint, by tenant (capped like every tenant label, then \"other\"); tenants whose endpoints' last attempts succeeded are absent.", "tenant")
	secretsOldKey = metric.Gauge("herald_callback_secrets_old_key",
		"Endpoint secrets sealed under another key than the first of HERALD_CALLBACK_SECRET_KEY, installation-wide: the senders seal them again under the first; at 0 a rotation is complete and the other keys can be removed.")
	inFlight = metric.Gauge("herald_callback_in_flight",
		"Callback attempts this sender has in flight.")
)

// Every outcome and reason starts at 0.
func init() {
	metric.StartAtZero(attempts, "delivered", "rejected", "timeout", "network", "blocked", "canceled")
	metric.StartAtZero(dropped, "expired", "gone")
}
