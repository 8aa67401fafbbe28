package main

import (
	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/devenv"
)

// devCmd is `herald dev` (make run).
type devCmd struct{ config.Dev }

// Help is the detail of `herald dev --help`.
func (c *devCmd) Help() string {
	return "What is left empty is embedded or generated: a private PostgreSQL and generated secrets kept in " +
		"--data-dir, an embedded Kafka broker, and the messenger simulator on --http-addr."
}

func (c *devCmd) Run(e runEnv) error {
	return devenv.Run(e.ctx, devenv.Options{
		HTTPAddr: c.HTTPAddr, DataDir: c.DataDir, DatabaseURL: c.DatabaseURL, KafkaBrokers: c.Brokers(), TopicPrefix: c.KafkaTopicPrefix,
		MessengerAPIURL: c.MessengerAPIURL, BotToken: c.MessengerBotToken, BotUsername: c.MessengerBotUsername, DeepLinkBase: c.DeepLinkBase,
		WebhookSecret: c.WebhookSecret, PhoneHashKey: c.PhoneHashKey, RateLimit: c.MessengerRateLimit, DevAdmins: c.DevAdmins,
		TenantSendsPerSecond: c.TenantSendsPerSecond, TenantRequestsPerSecond: c.TenantRequestsPerSecond,
		CallbackSecretKey: c.CallbackSecretKey, CallbackPolicy: c.Policy(),
		Logger: c.Logger(e.stderr), Stdout: e.stdout,
	})
}
