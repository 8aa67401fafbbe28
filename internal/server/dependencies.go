package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// DependencyCheckInterval is how often WatchDependencies checks each dependency in production.
const DependencyCheckInterval = 10 * time.Second

// dependencyUp is the fact behind the "PostgreSQL / Kafka unavailable" alerts. /readyz knows it too, but
// only when something asks (a kubelet probing one pod, never `herald dev`), and it answers the kubelet,
// not Prometheus: a failing readiness probe takes the pod out of its Service and leaves no trace in
// /metrics. The dependency label is one of the ReadyCheck names the commands pass (postgresql, kafka).
var dependencyUp = promauto.NewGaugeVec(prometheus.GaugeOpts{
	Name: "herald_dependency_up",
	Help: "Whether this process reached a dependency at its last check (1) or not (0), by dependency (postgresql, kafka); checked every 10 s with the readiness checks.",
}, []string{"dependency"})

// WatchDependencies runs each check at once and then every interval until ctx ends, and reports the
// results in herald_dependency_up. A change is logged once, not at every check. It returns when ctx ends.
func WatchDependencies(ctx context.Context, logger *slog.Logger, interval time.Duration, checks ...ReadyCheck) {
	up := make(map[string]bool, len(checks))
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, c := range checks {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := c.Check(cctx)
			cancel()
			if ctx.Err() != nil {
				// Shutting down: a check cut short says nothing about the dependency.
				return
			}
			was, seen := up[c.Name]
			up[c.Name] = err == nil
			switch {
			case err != nil && (was || !seen):
				logger.Warn("dependency unreachable", "dependency", c.Name, "err", err)
			case err == nil && seen && !was:
				logger.Info("dependency reachable again", "dependency", c.Name)
			}
			v := 0.0
			if err == nil {
				v = 1
			}
			dependencyUp.WithLabelValues(c.Name).Set(v)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
