package config

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
)

var allSettings = []string{DatabaseURL, KafkaBrokers, KafkaTopicPrefix, HTTPAddr, WebhookSecret, MessengerAPIURL, BotToken,
	BotUsername, DeepLinkBase, PhoneHashKey, RateLimit, PerChatInterval, DevAdmins, LogLevel, LogFormat, WorkerGroupID,
	WorkerAttempts, WorkerConcurrent, WorkerLease, UpdatesMode}

func TestEverySettingIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range allSettings {
		if !strings.Contains(string(doc), "`"+envOf(s)+"`") || !strings.Contains(string(doc), "`--"+s+"`") {
			t.Errorf("docs/configuration.md does not document %s (--%s)", envOf(s), s)
		}
	}
}

func TestEnvironmentSetsDefaultsAndFlagsWin(t *testing.T) {
	t.Setenv("HERALD_KAFKA_TOPIC_PREFIX", "from-env")
	t.Setenv("HERALD_MESSENGER_RATE_LIMIT", "12.5")
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Bind(fs, KafkaTopicPrefix, RateLimit, HTTPAddr)
	if err := fs.Parse([]string{"--http-addr", ":9999"}); err != nil {
		t.Fatal(err)
	}
	if c.KafkaTopicPrefix != "from-env" || c.RateLimit != 12.5 || c.HTTPAddr != ":9999" {
		t.Errorf("got prefix %q rate %v addr %q", c.KafkaTopicPrefix, c.RateLimit, c.HTTPAddr)
	}
	fs = flag.NewFlagSet("x", flag.ContinueOnError)
	c = Config{}
	c.Bind(fs, KafkaTopicPrefix)
	if err := fs.Parse([]string{"--kafka-topic-prefix", "from-flag"}); err != nil || c.KafkaTopicPrefix != "from-flag" {
		t.Errorf("the flag must win over the environment: %q %v", c.KafkaTopicPrefix, err)
	}
}

func TestValidateNamesEveryProblemByVariable(t *testing.T) {
	t.Setenv("HERALD_WORKER_MAX_ATTEMPTS", "many")
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Bind(fs, allSettings...)
	_ = fs.Parse([]string{"--webhook-secret", "bad secret!", "--database-url", "mysql://x", "--kafka-brokers", "nohost",
		"--phone-hash-key", "short", "--messenger-rate-limit", "0", "--dev-admins", "12,abc", "--log-level", "loud",
		"--updates", "carrier-pigeon", "--messenger-bot-username", "@bot"})
	err := c.Validate(allSettings...)
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"HERALD_WORKER_MAX_ATTEMPTS", "HERALD_WEBHOOK_SECRET", "HERALD_DATABASE_URL", "HERALD_KAFKA_BROKERS",
		"HERALD_PHONE_HASH_KEY", "HERALD_MESSENGER_RATE_LIMIT", "HERALD_DEV_ADMINS", "HERALD_LOG_LEVEL", "HERALD_WEBHOOK_UPDATES",
		"HERALD_MESSENGER_BOT_USERNAME", "HERALD_MESSENGER_BOT_TOKEN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "bad secret!") {
		t.Error("the error echoes the secret's value")
	}
}

func TestValidConfigurationPasses(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Bind(fs, allSettings...)
	_ = fs.Parse([]string{"--webhook-secret", "s3cr3t_-", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k1:9092, k2:9092",
		"--phone-hash-key", "0123456789abcdef", "--messenger-bot-token", "1:abc", "--messenger-bot-username", "herald_bot", "--dev-admins", "1, 2"})
	if err := c.Validate(allSettings...); err != nil {
		t.Fatalf("valid configuration rejected: %v", err)
	}
	if b := c.Brokers(); len(b) != 2 || b[1] != "k2:9092" {
		t.Errorf("brokers %v", b)
	}
	if ids, _ := c.DevAdminIDs(); len(ids) != 2 || ids[1] != 2 {
		t.Errorf("dev admins %v", ids)
	}
}
