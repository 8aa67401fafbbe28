package main

import (
	"context"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

// ingressCmd is `herald ingress`: the tenant API, /v1.
type ingressCmd struct{ config.Ingress }

func (c *ingressCmd) Run(e runEnv) error {
	logger := c.Logger(e.stderr).With("component", "ingress")
	defer startTracing(e.ctx, "herald-ingress", logger)()
	if warning := c.UntrustedProxyWarning(); warning != "" {
		logger.Warn(warning)
	}
	// Go's default GOGC (100), not server.TuneGC's 400: the ingress now allocates little per send, and at
	// 400 its heap grew to five times the ~10 MB it keeps live (docs/benchmarks.md).
	st, err := openBackends(e.ctx, &c.Database, &c.Kafka, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	producer := queue.NewProducer(c.Brokers(), c.KafkaTopicPrefix)
	defer producer.Close()
	ob := outbox.New(st, producer, outbox.Options{Logger: logger})
	defer ob.Close() // after Serve returns: in-flight sends are answered first

	proxies, err := server.ParseTrustedProxies(c.TrustedProxies)
	if err != nil {
		return err // the configuration check has refused it already
	}
	api := ingress.New(st, ob, logger, ingress.Options{DeepLinkBase: c.DeepLinkBase, BotUsername: c.MessengerBotUsername,
		SendsPerSecond: c.TenantSendsPerSecond, RequestsPerSecond: c.TenantRequestsPerSecond,
		MaxInFlight: c.MaxInFlight, MaxInFlightBytes: c.MaxInFlightBytes,
		TrustedProxies: proxies, CallbackKey: c.Key(), CallbackPolicy: c.Policy()})
	checks := []server.ReadyCheck{storeReady(st), kafkaReady(c.Brokers())}
	r := server.NewRouter(logger, checks...)
	api.Routes(r)
	g, gctx := errgroup.WithContext(e.ctx)
	g.Go(func() error {
		server.WatchDependencies(gctx, logger, server.DependencyCheckInterval, checks...)
		return nil
	})
	g.Go(func() error {
		return server.Serve(gctx, c.HTTPAddr, r, logger, server.ServeOptions{ShutdownDelay: c.ShutdownDelay, MetricsAddr: c.MetricsAddr,
			MaxConnections: c.MaxConnections})
	})
	return g.Wait()
}

// openBackends opens the store and makes sure the Kafka topics exist: what ingress, webhook and worker all
// do at start. Topics are usually managed by the platform team, so a broker that refuses to create them is
// only a warning.
func openBackends(ctx context.Context, db *config.Database, kafka *config.Kafka, logger *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, db.DatabaseURL, 32)
	if err != nil {
		return nil, err
	}
	if err := queue.EnsureTopics(ctx, kafka.Brokers(), kafka.KafkaTopicPrefix, queue.DefaultPartitions, 1); err != nil {
		logger.Warn("could not ensure topics", "err", err)
	}
	return st, nil
}

func storeReady(st *store.Store) server.ReadyCheck {
	return server.ReadyCheck{Name: "postgresql", Check: st.Ping}
}

func kafkaReady(brokers []string) server.ReadyCheck {
	return server.ReadyCheck{Name: "kafka", Check: func(ctx context.Context) error { return queue.Ping(ctx, brokers) }}
}

// migrateCmd is `herald migrate`.
type migrateCmd struct{ config.Migrate }

func (c *migrateCmd) Run(e runEnv) error {
	if err := store.Migrate(e.ctx, c.DatabaseURL); err != nil {
		return err
	}
	c.Logger(e.stderr).Info("migrations applied")
	return nil
}
