package main

import (
	"github.com/go-logr/logr"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/operator"
)

// operatorCmd is `herald operator`: the Tenant and ApiKey reconcilers under a controller-runtime manager.
// The Kubernetes connection comes from the in-cluster config or $KUBECONFIG.
type operatorCmd struct{ config.Operator }

func (c *operatorCmd) Run(e runEnv) error {
	logger := c.Logger(e.stderr).With("component", "operator")
	return operator.Run(e.ctx, operator.Options{
		DatabaseURL:             c.DatabaseURL,
		MetricsAddr:             c.MetricsAddr,
		ProbeAddr:               c.ProbeAddr,
		LeaderElection:          c.LeaderElect,
		LeaderElectionNamespace: c.LeaderElectionNamespace,
		RotationGracePeriod:     c.RotationGracePeriod,
		ResyncPeriod:            c.ResyncPeriod,
		OrphanGracePeriod:       c.OrphanGracePeriod,
		InsecureMetrics:         !c.MetricsSecure,
		MetricsCertDir:          c.MetricsCertDir,
		MessengerAPIURL:         c.MessengerAPIURL,
		PublicURL:               c.PublicURL,
		BotTokenKey:             c.Key(),
		Logger:                  logr.FromSlogHandler(logger.Handler()),
	})
}
