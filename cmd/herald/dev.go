package main

import (
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/dev/devenv"
)

// devCmd is `herald dev` (make run).
type devCmd struct {
	config.Dev
	PrintEnv bool `name:"print-env" help:"print the exports that point the admin CLI and a shell at the herald dev running on --data-dir (HERALD_DATABASE_URL, HERALD_BOT_TOKEN_KEY, HERALD_MESSENGER_API_URL, HERALD_PUBLIC_URL, HERALD, KEY), and exit"`
}

// Help is the detail of `herald dev --help`.
func (c *devCmd) Help() string {
	return "What is left empty is embedded or generated: a private PostgreSQL and generated secrets kept in " +
		"--data-dir, an embedded Kafka broker, and the messenger simulator on --http-addr."
}

func (c *devCmd) Run(e runEnv) error {
	if c.PrintEnv {
		return devenv.PrintEnv(e.stdout, c.DataDir)
	}
	logger := c.Logger(e.stderr)
	defer startTracing(e.ctx, "herald-dev", logger)()
	return devenv.Run(e.ctx, devenv.Options{
		HTTPAddr: c.HTTPAddr, DataDir: c.DataDir, DatabaseURL: c.DatabaseURL, KafkaBrokers: c.Brokers(), TopicPrefix: c.KafkaTopicPrefix,
		MessengerAPIURL: c.MessengerAPIURL, BotToken: c.MessengerBotToken, BotUsername: c.MessengerBotUsername, DeepLinkBase: c.DeepLinkBase,
		WebhookSecret: c.WebhookSecret, PhoneHashKey: c.PhoneHashKey, RateLimit: c.MessengerRateLimit, DevAdmins: c.DevAdmins,
		TenantSendsPerSecond: c.TenantSendsPerSecond, TenantRequestsPerSecond: c.TenantRequestsPerSecond,
		Retention:         retentionPolicy(&c.Retention),
		CallbackSecretKey: c.CallbackSecretKey, CallbackPolicy: c.Policy(), BotTokenKey: c.BotTokenKey,
		CallbackConcurrency: c.CallbackConcurrency, CallbackEndpointConcurrency: c.CallbackEndpointConcurrency, PGBin: c.PGBin,
		Logger: logger, Stdout: e.stdout,
	})
}
