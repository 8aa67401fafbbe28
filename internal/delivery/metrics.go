package delivery

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/store"
)

// Worker metrics. herald_worker_consumer_lag is the autoscaling signal: the group's backlog per topic.
var (
	outcomes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_deliveries_total",
		Help: "Delivery attempts by resulting status and last_error_code (0 = none; codes Herald does not know are counted as 4xx, 5xx or other).",
	}, []string{"status", "error_code"})
	platformLatency = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_worker_platform_latency_seconds",
		Help:    "Latency of sendMessage calls to the messaging platform, by outcome class.",
		Buckets: []float64{.01, .025, .05, .075, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"outcome"})
	consumerLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_consumer_lag",
		Help: "Messages on the topic not yet committed by the worker group (end offset minus committed offset, summed over partitions).",
	}, []string{"topic"})
	limiterWait = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "herald_worker_ratelimit_wait_seconds",
		Help:    "Time a delivery waited for the rate limiter, by limiter (global, chat) and priority.",
		Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"limiter", "priority"})
	rateShare = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_worker_rate_limit",
		Help: "Messages per second this worker may send: its lease on part of the bot's global limit, which the workers share by demand.",
	})
	rateDemand = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_worker_rate_demand",
		Help: "Messages per second this worker could send now (its chats with work at one per chat interval, or what it sent lately), as it last told the other workers when renewing its rate lease.",
	})
	assignedPartitions = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_worker_partitions",
		Help: "Partitions of the two priority topics this worker holds in the consumer group.",
	})
	tenantBacklog = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_tenant_backlog",
		Help: "Messages this worker holds per tenant (tenant label capped at 100 names, then \"other\"; \"system\" for messages of no tenant), by priority: a tenant's backlog waiting for its turn.",
	}, []string{"tenant", "priority"})
	bufferedGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_buffered",
		Help: "Messages fetched and not finished (waiting for their chat, their turn, or in flight), by priority.",
	}, []string{"priority"})
	inFlight = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_in_flight",
		Help: "Fetched messages not yet finished, by priority.",
	}, []string{"priority"})
	generations = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_generations_total",
		Help: "Consumer group generations this worker's readers saw end and begin (a rebalance ends one): at each end, fetched messages that had not started are dropped for the partitions' next owner.",
	}, []string{"event"})
	skipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_skipped_total",
		Help: "Kafka messages dropped without a send, by reason (not_claimable, leased, not_found, bad_envelope, stale_result).",
	}, []string{"reason"})
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
	throttles = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_throttled_total",
		Help: "429 answers from the platform, by scope (chat, bot).",
	}, []string{"scope"})
	redriveFound = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_redrive_found_total",
		Help: "Notifications the redrive found stuck, by status: queued (queued for longer than the queued-redrive threshold: its envelope was lost, or is still waiting behind a backlog) or delivering (its lease expired: the worker died).",
	}, []string{"status"})
)

func init() {
	// The series the alerts count exist from the start at 0, so that increase() and rate() see a process's
	// first event: a series born at 1 has no earlier sample to increase from, and an alert would miss it.
	for _, s := range []store.Status{store.StatusQueued, store.StatusDelivering} {
		redriveFound.WithLabelValues(string(s))
	}
	for _, scope := range []string{"chat", "bot"} {
		throttles.WithLabelValues(scope)
	}
}

// recordOutcome counts a recorded attempt.
func recordOutcome(status store.Status, code int) {
	outcomes.WithLabelValues(string(status), errorCodeLabel(code)).Inc()
}

// errorCodeLabel is the error_code label of an attempt. The platform's error_code is any integer the other
// end sends, so only the codes Herald knows are labels of their own; the rest are counted by class.
func errorCodeLabel(code int) string {
	switch code {
	case 0, 400, 401, 403, 404, 409, 413, 420, 429, 500, 502, 503, 504,
		messenger.CodeTimeout, messenger.CodeNetwork, messenger.CodeBadResponse, messenger.CodeCanceled, CodeNoLink:
		return strconv.Itoa(code)
	}
	switch {
	case code >= 400 && code < 500:
		return "4xx"
	case code >= 500 && code < 600:
		return "5xx"
	}
	return "other"
}
