package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/updates"
)

var webhookSettings = []string{config.DatabaseURL, config.KafkaBrokers, config.KafkaTopicPrefix, config.HTTPAddr,
	config.WebhookSecret, config.PhoneHashKey, config.DevAdmins, config.UpdatesMode, config.MessengerAPIURL,
	config.BotToken, config.ShutdownDelay, config.LogLevel, config.LogFormat}

// pruneInterval is how often the webhook forgets old processed update ids.
const pruneInterval = time.Hour

// runWebhook is `herald webhook`: POST /messenger/webhook, or with --updates=polling a long poll of
// getUpdates feeding the same handler; `herald webhook set-url URL` registers the webhook with the platform.
func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "set-url" {
		return runWebhookSetURL(ctx, args[1:], stdout, stderr)
	}
	var c config.Config
	fs := newFlagSet("webhook", stderr)
	c.Bind(fs, webhookSettings...)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: herald webhook [flags]\n       herald webhook set-url [flags] URL\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	// The secret guards the webhook route; polling needs the Bot API instead.
	required := []string{config.DatabaseURL, config.KafkaBrokers, config.KafkaTopicPrefix, config.HTTPAddr,
		config.PhoneHashKey, config.DevAdmins, config.UpdatesMode, config.ShutdownDelay, config.LogLevel, config.LogFormat}
	polling := c.UpdatesMode == "polling"
	if polling {
		required = append(required, config.MessengerAPIURL, config.BotToken)
	} else {
		required = append(required, config.WebhookSecret)
	}
	if err := c.Validate(required...); err != nil {
		return err
	}
	admins, _ := c.DevAdminIDs() // validated above
	logger := c.Logger(stderr).With("component", "webhook")
	server.TuneGC()

	st, err := openBackends(ctx, &c, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	producer := queue.NewProducer(c.Brokers(), c.KafkaTopicPrefix)
	defer producer.Close()
	ob := outbox.New(st, producer, outbox.Options{Logger: logger})
	defer ob.Close()

	rc := updates.New(st, ob, updates.Options{
		Secret: c.WebhookSecret, PhoneHashKey: []byte(c.PhoneHashKey), DevAdmins: admins, Logger: logger,
	})
	defer rc.Close() // after the server and the poller stopped: updates in flight are answered first
	r := server.NewRouter(logger, storeReady(st), kafkaReady(c.Brokers()))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		rc.Prune(gctx, pruneInterval)
		return nil
	})
	if polling {
		// No public URL: the HTTP address serves only /healthz, /readyz and /metrics.
		client := messenger.New(c.MessengerAPIURL, c.BotToken, nil)
		g.Go(func() error { return updates.Poll(gctx, client, rc, logger) })
	} else {
		rc.Routes(r)
	}
	g.Go(func() error {
		return server.Serve(gctx, c.HTTPAddr, r, logger, server.ServeOptions{ShutdownDelay: c.ShutdownDelay})
	})
	return g.Wait()
}

// runWebhookSetURL is `herald webhook set-url URL`: setWebhook with the secret and the update kinds Herald
// handles.
func runWebhookSetURL(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	settings := []string{config.MessengerAPIURL, config.BotToken, config.WebhookSecret, config.LogLevel, config.LogFormat}
	var c config.Config
	fs := newFlagSet("webhook set-url", stderr)
	c.Bind(fs, settings...)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: herald webhook set-url [flags] URL\n\nURL is the public address of POST "+updates.Path+".\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("usage: herald webhook set-url [flags] URL")}
	}
	if err := c.Validate(settings...); err != nil {
		return err
	}
	url := fs.Arg(0)
	client := messenger.New(c.MessengerAPIURL, c.BotToken, nil)
	if err := updates.SetWebhookURL(ctx, client, url, c.WebhookSecret); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "webhook set to %s (allowed_updates: %s)\n", url, strings.Join(updates.AllowedUpdates, ","))
	return nil
}
