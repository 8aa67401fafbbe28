package main

import (
	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/server"
)

// workerCmd is `herald worker`: it delivers notifications from Kafka to the messenger, serving /healthz,
// /readyz and /metrics on --http-addr. On SIGTERM it drains (delivery.Options.GracePeriod) before it exits.
type workerCmd struct{ config.Worker }

func (c *workerCmd) Run(e runEnv) error {
	logger := c.Logger(e.stderr).With("component", "worker")
	defer startTracing(e.ctx, "herald-worker", logger)()
	// Concurrent deliveries each hold a connection only for their claim and their status write.
	st, err := openBackends(e.ctx, &c.Database, &c.Kafka, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	w, err := delivery.New(delivery.Options{
		Store:           st,
		Sender:          messenger.New(c.MessengerAPIURL, c.MessengerBotToken, nil),
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
		Backoff:         delivery.Backoff{Base: c.WorkerBackoffBase, Max: c.WorkerBackoffMax, Jitter: delivery.DefaultBackoff.Jitter},
	})
	if err != nil {
		return err
	}
	r := server.NewRouter(logger, storeReady(st), kafkaReady(c.Brokers()))
	g, gctx := errgroup.WithContext(e.ctx)
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return server.Serve(gctx, c.HTTPAddr, r, logger) })
	return g.Wait()
}
