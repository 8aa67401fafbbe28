package main

import (
	"fmt"
	"strings"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/updates"
)

// webhookCmd is `herald webhook` (serve, the default, hidden so that the command reads as before) and
// `herald webhook set-url URL`.
type webhookCmd struct {
	Serve  webhookServeCmd  `cmd:"" default:"withargs" hidden:"" help:"serve POST /messenger/webhook and the tenants' bots' POST /messenger/webhook/{bot_id}, or with --updates=polling long-poll every bot's getUpdates; herald webhook set-url URL registers the shared bot's webhook with the platform"`
	SetURL webhookSetURLCmd `cmd:"" name:"set-url" help:"register URL with the platform (setWebhook), with the secret and the update kinds Herald handles"`
}

// webhookServeCmd is `herald webhook`: POST /messenger/webhook and POST /messenger/webhook/{bot_id} (the
// tenants' own bots), or with --updates=polling a long poll of every bot's getUpdates feeding the same
// handler.
type webhookServeCmd struct{ config.Webhook }

func (c *webhookServeCmd) Run(e runEnv) error {
	logger := c.Logger(e.stderr).With("component", "webhook")
	defer startTracing(e.ctx, "herald-webhook", logger)()
	server.TuneGC()

	st, ob, closeAll, err := openOutbox(e.ctx, &c.Database, &c.Kafka, logger)
	if err != nil {
		return err
	}
	defer closeAll()

	// The tenants' own bots: their webhook secrets (webhook mode), or their tokens to poll with (polling mode,
	// which needs HERALD_BOT_TOKEN_KEY to open them).
	// The shared bot's client polls (polling mode) and answers the taps on /stop and /resume keyboards (both
	// modes): without its token a tap still takes effect, but its notice and its edit are not shown.
	var shared *messenger.Client
	if c.MessengerBotToken != "" {
		shared = messenger.New(c.MessengerAPIURL, c.MessengerBotToken, nil)
	} else {
		logger.Warn("HERALD_MESSENGER_BOT_TOKEN is not set: taps on the shared bot's /stop and /resume keyboards take effect but are not answered")
	}
	bots := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: c.Key(), APIURL: c.MessengerAPIURL, Shared: shared, Logger: logger})
	rc := updates.New(st, ob, updates.Options{
		Secret: c.WebhookSecret, PhoneHashKey: []byte(c.PhoneHashKey), DevAdmins: c.DevAdmins, Bots: bots, Logger: logger,
	})
	defer rc.Close() // after the server and the poller stopped: updates in flight are answered first
	r, g, gctx := serving(e.ctx, logger, storeReady(st), kafkaReady(c.Brokers()))
	g.Go(func() error { return bots.Run(gctx, 0) })
	if c.Polling() {
		// No public URL: the HTTP address serves only /healthz, /readyz and /metrics.
		g.Go(func() error { return updates.PollBots(gctx, shared, bots, rc, logger) })
	} else {
		rc.Routes(r)
	}
	g.Go(func() error {
		return server.Serve(gctx, c.HTTPAddr, r, logger, server.ServeOptions{ShutdownDelay: c.ShutdownDelay, MetricsAddr: c.MetricsAddr})
	})
	return g.Wait()
}

// webhookSetURLCmd is `herald webhook set-url URL`: setWebhook with the secret and the update kinds Herald
// handles.
type webhookSetURLCmd struct {
	config.WebhookSetURL
	URL string `arg:"" name:"url" help:"the public address of POST /messenger/webhook"`
}

func (c *webhookSetURLCmd) Run(e runEnv) error {
	client := messenger.New(c.MessengerAPIURL, c.MessengerBotToken, nil)
	if err := updates.SetWebhookURL(e.ctx, client, c.URL, c.WebhookSecret); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "webhook set to %s (allowed_updates: %s)\n", c.URL, strings.Join(updates.AllowedUpdates, ","))
	return nil
}
