package main

import (
	"context"
	"log/slog"

	"github.com/go-chi/chi/v5"
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
	// Go's default GOGC (100), not server.TuneGC's 400: the ingress allocates little per send, and at 400 its
	// heap grew to several times what it keeps live (docs/benchmarks.md, "Less garbage, the default GOGC").
	st, ob, closeAll, err := openOutbox(e.ctx, &c.Database, &c.Kafka, logger)
	if err != nil {
		return err
	}
	defer closeAll() // after Serve returns: in-flight sends are answered first

	proxies, err := server.ParseTrustedProxies(c.TrustedProxies)
	if err != nil {
		return err // the configuration check has refused it already
	}
	api := ingress.New(st, ob, logger, ingress.Options{DeepLinkBase: c.DeepLinkBase, BotUsername: c.MessengerBotUsername,
		SendsPerSecond: c.TenantSendsPerSecond, RequestsPerSecond: c.TenantRequestsPerSecond,
		MaxInFlight: c.MaxInFlight, MaxInFlightBytes: c.MaxInFlightBytes,
		TrustedProxies: proxies, CallbackKey: c.Key(), CallbackPolicy: c.Policy()})
	r, g, gctx := serving(e.ctx, logger, storeReady(st), kafkaReady(c.Brokers()))
	api.Routes(r)
	g.Go(func() error {
		return server.Serve(gctx, c.HTTPAddr, r, logger, server.ServeOptions{ShutdownDelay: c.ShutdownDelay, MetricsAddr: c.MetricsAddr,
			MaxConnections: c.MaxConnections})
	})
	return g.Wait()
}

// openBackends opens the store and makes sure the Kafka topics exist: what ingress, webhook and worker all
// do at start. Topics are usually managed by the platform team, so a broker that refuses to create them is
// only a warning.
func openBackends(ctx context.Context, db *config.Database, kafka *config.Kafka, logger *slog.Logger, opts ...store.Option) (*store.Store, error) {
	st, err := store.Open(ctx, db.DatabaseURL, 32, opts...)
	if err != nil {
		return nil, err
	}
	if err := queue.EnsureTopics(ctx, kafka.Brokers(), kafka.KafkaTopicPrefix, queue.DefaultPartitions, 1); err != nil {
		logger.Warn("could not ensure topics", "err", err)
	}
	return st, nil
}

// openOutbox is openBackends with a producer and the outbox over them: how the ingress and the webhook
// record and publish. closeAll closes the outbox first, then the producer and the store.
func openOutbox(ctx context.Context, db *config.Database, kafka *config.Kafka, logger *slog.Logger) (st *store.Store, ob *outbox.Outbox, closeAll func(), err error) {
	st, err = openBackends(ctx, db, kafka, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	producer := queue.NewProducer(kafka.Brokers(), kafka.KafkaTopicPrefix)
	ob = outbox.New(st, producer, outbox.Options{Logger: logger})
	return st, ob, func() {
		ob.Close()
		_ = producer.Close()
		st.Close()
	}, nil
}

// serving is what every component's process runs beside its own work: a router whose /readyz asks the
// checks, and, in the group it returns, the watch that reports them as herald_dependency_up until ctx
// ends.
func serving(ctx context.Context, logger *slog.Logger, checks ...server.ReadyCheck) (chi.Router, *errgroup.Group, context.Context) {
	r := server.NewRouter(logger, checks...)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		server.WatchDependencies(gctx, logger, server.DependencyCheckInterval, checks...)
		return nil
	})
	return r, g, gctx
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
