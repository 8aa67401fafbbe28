package main

import (
	"context"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/server"
)

var workerSettings = []string{config.DatabaseURL, config.KafkaBrokers, config.KafkaTopicPrefix, config.HTTPAddr,
	config.MessengerAPIURL, config.BotToken, config.RateLimit, config.PerChatInterval, config.WorkerGroupID,
	config.WorkerAttempts, config.WorkerConcurrent, config.WorkerLease, config.BackoffBase, config.BackoffMax, config.LogLevel, config.LogFormat}

// runWorker delivers notifications from Kafka to the messenger, serving /healthz, /readyz and /metrics on
// HERALD_HTTP_ADDR. On SIGTERM it drains (delivery.Options.GracePeriod) before it exits.
func runWorker(ctx context.Context, args []string, _, stderr io.Writer) error {
	var c config.Config
	fs := newFlagSet("worker", stderr)
	c.Bind(fs, workerSettings...)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Validate(workerSettings...); err != nil {
		return err
	}
	logger := c.Logger(stderr).With("component", "worker")
	// Concurrent deliveries each hold a connection only for their claim and their status write.
	st, err := openBackends(ctx, &c, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	w, err := delivery.New(delivery.Options{
		Store:           st,
		Sender:          messenger.New(c.MessengerAPIURL, c.BotToken, nil),
		Brokers:         c.Brokers(),
		TopicPrefix:     c.KafkaTopicPrefix,
		GroupID:         c.WorkerGroupID,
		Logger:          logger,
		RateLimit:       c.RateLimit,
		PerChatInterval: c.PerChatInterval,
		MaxAttempts:     c.WorkerMaxAttempts,
		Concurrency:     c.WorkerConcurrency,
		Lease:           c.WorkerLease,
		Backoff:         delivery.Backoff{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: delivery.DefaultBackoff.Jitter},
	})
	if err != nil {
		return err
	}
	r := server.NewRouter(logger, storeReady(st), kafkaReady(c.Brokers()))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.Run(gctx) })
	g.Go(func() error { return server.Serve(gctx, c.HTTPAddr, r, logger) })
	return g.Wait()
}
