package rate

import "github.com/heraldhq/herald/internal/metric"

// The lease's metrics (the worker's, by name: herald_worker_*).
var (
	rateShare = metric.Gauge("herald_worker_rate_limit",
		"Messages per second this worker may send: its lease on part of the bot's global limit, which the workers share by demand.")
	rateDemand = metric.Gauge("herald_worker_rate_demand",
		"Messages per second this worker could send now (its chats with work at one per chat interval, or what it sent lately), as it last told the other workers when renewing its rate lease.")
)
