package rate

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The lease's metrics (the worker's, by name: herald_worker_*).
var (
	rateShare = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_worker_rate_limit",
		Help: "Messages per second this worker may send: its lease on part of the bot's global limit, which the workers share by demand.",
	})
	rateDemand = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_worker_rate_demand",
		Help: "Messages per second this worker could send now (its chats with work at one per chat interval, or what it sent lately), as it last told the other workers when renewing its rate lease.",
	})
)
