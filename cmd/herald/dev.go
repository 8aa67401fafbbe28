package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/devenv"
)

var devSettings = []string{config.HTTPAddr, config.DatabaseURL, config.KafkaBrokers, config.KafkaTopicPrefix, config.MessengerAPIURL,
	config.BotToken, config.BotUsername, config.DeepLinkBase, config.WebhookSecret, config.PhoneHashKey, config.RateLimit,
	config.DevAdmins, config.LogLevel, config.LogFormat}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config.Config
	fs := newFlagSet("dev", stderr)
	c.Bind(fs, devSettings...)
	dataDir := fs.String("data-dir", ".dev", "where the private PostgreSQL and generated secrets are kept between runs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// In dev, an unset messenger URL means the simulator rather than the real platform.
	if !isSet(fs, config.MessengerAPIURL) {
		c.MessengerAPIURL = ""
	}
	check := []string{config.HTTPAddr, config.KafkaTopicPrefix, config.DeepLinkBase, config.RateLimit, config.DevAdmins, config.LogLevel, config.LogFormat}
	for setting, value := range map[string]string{config.DatabaseURL: c.DatabaseURL, config.KafkaBrokers: c.KafkaBrokers,
		config.WebhookSecret: c.WebhookSecret, config.PhoneHashKey: c.PhoneHashKey} {
		if value != "" {
			check = append(check, setting)
		}
	}
	if c.MessengerAPIURL != "" {
		check = append(check, config.MessengerAPIURL, config.BotToken, config.BotUsername)
	}
	if err := c.Validate(check...); err != nil {
		return err
	}
	if !isSet(fs, config.LogFormat) {
		c.LogFormat = "text" // a terminal, not a log pipeline
	}
	admins, _ := c.DevAdminIDs()
	return devenv.Run(ctx, devenv.Options{
		HTTPAddr: c.HTTPAddr, DataDir: *dataDir, DatabaseURL: c.DatabaseURL, KafkaBrokers: c.Brokers(), TopicPrefix: c.KafkaTopicPrefix,
		MessengerAPIURL: c.MessengerAPIURL, BotToken: c.BotToken, BotUsername: c.BotUsername, DeepLinkBase: c.DeepLinkBase,
		WebhookSecret: c.WebhookSecret, PhoneHashKey: c.PhoneHashKey, RateLimit: c.RateLimit, DevAdmins: admins,
		Logger: c.Logger(stderr), Stdout: stdout,
	})
}

// isSet reports whether a setting came from its flag or its environment variable.
func isSet(fs *flag.FlagSet, setting string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == setting })
	_, env := os.LookupEnv(config.EnvName(setting))
	return set || env
}
