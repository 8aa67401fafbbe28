package delivery

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Worker metrics. herald_worker_consumer_lag is the autoscaling signal: the group's backlog per topic.
var (
	outcomes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_deliveries_total",
		Help: "Delivery attempts by resulting status and last_error_code (0 = none).",
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
		Help: "Messages per second this worker may send: the global limit times its share of the partitions.",
	})
	inFlight = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_in_flight",
		Help: "Fetched messages not yet finished, by priority.",
	}, []string{"priority"})
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
)
