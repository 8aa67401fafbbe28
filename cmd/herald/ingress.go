package main

import (
	"context"

	"io"
	"log/slog"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

var ingressSettings = []string{config.DatabaseURL, config.KafkaBrokers, config.KafkaTopicPrefix, config.HTTPAddr,
	config.BotUsername, config.DeepLinkBase, config.ShutdownDelay, config.LogLevel, config.LogFormat}

func runIngress(ctx context.Context, args []string, _, stderr io.Writer) error {
	var c config.Config
	fs := newFlagSet("ingress", stderr)
	c.Bind(fs, ingressSettings...)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Validate(ingressSettings...); err != nil {
		return err
	}
	logger := c.Logger(stderr).With("component", "ingress")
	server.TuneGC()
	st, err := openBackends(ctx, &c, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	producer := queue.NewProducer(c.Brokers(), c.KafkaTopicPrefix)
	defer producer.Close()
	ob := outbox.New(st, producer, outbox.Options{Logger: logger})
	defer ob.Close() // after Serve returns: in-flight sends are answered first

	api := ingress.New(st, ob, logger, ingress.Options{DeepLinkBase: c.DeepLinkBase, BotUsername: c.BotUsername})
	r := server.NewRouter(logger, storeReady(st), kafkaReady(c.Brokers()))
	api.Routes(r)
	return server.Serve(ctx, c.HTTPAddr, r, logger, server.ServeOptions{ShutdownDelay: c.ShutdownDelay})
}

// openBackends opens the store and makes sure the Kafka topics exist: what ingress, webhook and worker all
// do at start. Topics are usually managed by the platform team, so a broker that refuses to create them is
// only a warning.
func openBackends(ctx context.Context, c *config.Config, logger *slog.Logger) (*store.Store, error) {
	st, err := store.Open(ctx, c.DatabaseURL, 32)
	if err != nil {
		return nil, err
	}
	if err := queue.EnsureTopics(ctx, c.Brokers(), c.KafkaTopicPrefix, queue.DefaultPartitions, 1); err != nil {
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

func runMigrate(ctx context.Context, args []string, _, stderr io.Writer) error {
	var c config.Config
	fs := newFlagSet("migrate", stderr)
	c.Bind(fs, config.DatabaseURL, config.LogLevel, config.LogFormat)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Validate(config.DatabaseURL, config.LogLevel, config.LogFormat); err != nil {
		return err
	}
	if err := store.Migrate(ctx, c.DatabaseURL); err != nil {
		return err
	}
	c.Logger(stderr).Info("migrations applied")
	return nil
}
