package consume

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/delivery/rate"
)

// The consumer's metrics (the worker's, by name: herald_worker_*). herald_worker_consumer_lag is the
// autoscaling signal: the group's backlog per topic.
var (
	consumerLag = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_consumer_lag",
		Help: "Messages on the topic not yet committed by the worker group (end offset minus committed offset, summed over partitions).",
	}, []string{"topic"})
	assignedPartitions = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "herald_worker_partitions",
		Help: "Partitions of the two priority topics this worker holds in the consumer group.",
	})
	tenantBacklog = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_tenant_backlog",
		Help: "Messages this worker holds per tenant (tenant label capped at 100 names, then \"other\"; \"system\" for messages of no tenant), by priority: a tenant's backlog waiting for its turn.",
	}, []string{"tenant", "priority"})
	heldGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_held",
		Help: "Messages fetched and held in a compact form, past their bot's share of the buffer, by priority: they enter the lanes as their bot's lanes drain.",
	}, []string{"priority"})
	bufferedGauge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "herald_worker_buffered",
		Help: "Messages in lanes, fetched and not finished (waiting for their chat, their turn, or in flight), by priority; those held past their bot's share are herald_worker_held.",
	}, []string{"priority"})
	generations = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "herald_worker_generations_total",
		Help: "Consumer group generations this worker's readers saw end and begin (a rebalance ends one): at each end, fetched messages that had not started are dropped for the partitions' next owner.",
	}, []string{"event"})
)

func init() {
	// The dashboard reads the held messages from the start, when a worker holds none.
	for _, p := range []rate.Priority{rate.High, rate.Normal} {
		heldGauge.WithLabelValues(p.String())
	}
}
