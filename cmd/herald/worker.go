package main

import (
	"time"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/send"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/retention"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

// workerCmd is `herald worker`: it delivers notifications from Kafka to the messenger, serving /healthz,
// /readyz and /metrics on --http-addr, and runs the retention purge (one worker at a time). On SIGTERM it
// drains (delivery.Options.GracePeriod) before it exits.
type workerCmd struct{ config.Worker }

func (c *workerCmd) Run(e runEnv) error {
	logger := c.Logger(e.stderr).With("component", "worker")
	defer startTracing(e.ctx, "herald-worker", logger)()
	// Concurrent deliveries each hold a connection only for their claim and their status write, which
	// are planned once (store.StablePlans).
	st, err := openBackends(e.ctx, &c.Database, &c.Kafka, logger, store.StablePlans)
	if err != nil {
		return err
	}
	defer st.Close()
	shared := messenger.New(c.MessengerAPIURL, c.MessengerBotToken, nil)
	// The tenants' own bots: their tokens (opened with HERALD_BOT_TOKEN_KEY) and their rates.
	bots := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: c.Key(), APIURL: c.MessengerAPIURL, Shared: shared, Logger: logger})
	w, err := delivery.New(delivery.Options{
		Store:           st,
		Sender:          shared,
		Bots:            bots,
		Brokers:         c.Brokers(),
		TopicPrefix:     c.KafkaTopicPrefix,
		GroupID:         c.WorkerGroupID,
		Logger:          logger,
		RateLimit:       c.MessengerRateLimit,
		PerChatInterval: c.MessengerPerChatInterval,
		MaxAttempts:     c.WorkerMaxAttempts,
		Concurrency:     c.WorkerConcurrency,
		Buffer:          c.WorkerBuffer,
		Lease:           c.WorkerLease,
		Backoff:         notification.Backoff{Base: c.WorkerBackoffBase, Max: c.WorkerBackoffMax, Jitter: send.DefaultBackoff.Jitter},
	})
	if err != nil {
		return err
	}
	purger := retention.New(retention.Options{Store: st, Policy: retentionPolicy(&c.Retention), Logger: logger})
	r, g, gctx := serving(e.ctx, logger, storeReady(st), kafkaReady(c.Brokers()))
	g.Go(func() error { return bots.Run(gctx, 0) })
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return purger.Run(gctx) })
	g.Go(func() error {
		return server.Serve(gctx, c.HTTPAddr, r, logger, server.ServeOptions{MetricsAddr: c.MetricsAddr})
	})
	return g.Wait()
}

// retentionPolicy is the purge's policy from the HERALD_RETENTION_* settings.
func retentionPolicy(c *config.Retention) store.RetentionPolicy {
	day := 24 * time.Hour
	return store.RetentionPolicy{
		Bodies:         time.Duration(c.RetentionBodyDays) * day,
		Notifications:  time.Duration(c.RetentionNotificationDays) * day,
		Expired:        c.RetentionExpired,
		CallbackEvents: time.Duration(c.RetentionCallbackDays) * day,
	}
}
