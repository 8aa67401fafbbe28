// Package config is Herald's configuration contract: every setting has a flag and a HERALD_* environment
// variable (the flag wins), and every component validates what it uses at start, failing with a message
// that names the variable.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config holds every setting; a component binds only the ones it uses.
type Config struct {
	DatabaseURL      string
	KafkaBrokers     string
	KafkaTopicPrefix string
	HTTPAddr         string
	WebhookSecret    string
	MessengerAPIURL  string
	BotToken         string
	BotUsername      string
	DeepLinkBase     string
	PhoneHashKey     string
	RateLimit        float64
	PerChatInterval  time.Duration
	DevAdmins        string
	LogLevel         string
	LogFormat        string

	// Worker tuning.
	WorkerGroupID     string
	WorkerMaxAttempts int
	WorkerConcurrency int
	WorkerLease       time.Duration
	BackoffBase       time.Duration
	BackoffMax        time.Duration

	// HTTP servers.
	ShutdownDelay time.Duration

	// Webhook receiver.
	UpdatesMode string

	envErrs []error
}

// Setting names, used to pick what a component binds.
const (
	DatabaseURL      = "database-url"
	KafkaBrokers     = "kafka-brokers"
	KafkaTopicPrefix = "kafka-topic-prefix"
	HTTPAddr         = "http-addr"
	WebhookSecret    = "webhook-secret"
	MessengerAPIURL  = "messenger-api-url"
	BotToken         = "messenger-bot-token"
	BotUsername      = "messenger-bot-username"
	DeepLinkBase     = "deep-link-base"
	PhoneHashKey     = "phone-hash-key"
	RateLimit        = "messenger-rate-limit"
	PerChatInterval  = "messenger-per-chat-interval"
	DevAdmins        = "dev-admins"
	LogLevel         = "log-level"
	LogFormat        = "log-format"
	WorkerGroupID    = "worker-group-id"
	WorkerAttempts   = "worker-max-attempts"
	WorkerConcurrent = "worker-concurrency"
	WorkerLease      = "worker-lease"
	BackoffBase      = "worker-backoff-base"
	BackoffMax       = "worker-backoff-max"
	ShutdownDelay    = "shutdown-delay"
	UpdatesMode      = "updates"
)

// EnvName is the environment variable of a setting: HERALD_ + upper snake case.
func EnvName(setting string) string {
	return "HERALD_" + strings.ToUpper(strings.ReplaceAll(setting, "-", "_"))
}

// envOverrides maps settings whose variable name is not the mechanical one.
var envOverrides = map[string]string{
	BotToken:        "HERALD_MESSENGER_BOT_TOKEN",
	BotUsername:     "HERALD_MESSENGER_BOT_USERNAME",
	RateLimit:       "HERALD_MESSENGER_RATE_LIMIT",
	PerChatInterval: "HERALD_MESSENGER_PER_CHAT_INTERVAL",
	UpdatesMode:     "HERALD_WEBHOOK_UPDATES",
}

func envOf(setting string) string {
	if v, ok := envOverrides[setting]; ok {
		return v
	}
	return EnvName(setting)
}

// Bind registers the named settings on fs, with defaults taken from the environment.
func (c *Config) Bind(fs *flag.FlagSet, names ...string) {
	for _, n := range names {
		env := envOf(n)
		usage := fmt.Sprintf("%s (env %s)", descriptions[n], env)
		switch n {
		case DatabaseURL:
			fs.StringVar(&c.DatabaseURL, n, c.env(n, ""), usage)
		case KafkaBrokers:
			fs.StringVar(&c.KafkaBrokers, n, c.env(n, ""), usage)
		case KafkaTopicPrefix:
			fs.StringVar(&c.KafkaTopicPrefix, n, c.env(n, "herald"), usage)
		case HTTPAddr:
			fs.StringVar(&c.HTTPAddr, n, c.env(n, ":8080"), usage)
		case WebhookSecret:
			fs.StringVar(&c.WebhookSecret, n, c.env(n, ""), usage)
		case MessengerAPIURL:
			fs.StringVar(&c.MessengerAPIURL, n, c.env(n, "https://api.telegram.org"), usage)
		case BotToken:
			fs.StringVar(&c.BotToken, n, c.env(n, ""), usage)
		case BotUsername:
			fs.StringVar(&c.BotUsername, n, c.env(n, ""), usage)
		case DeepLinkBase:
			fs.StringVar(&c.DeepLinkBase, n, c.env(n, "https://t.me"), usage)
		case PhoneHashKey:
			fs.StringVar(&c.PhoneHashKey, n, c.env(n, ""), usage)
		case RateLimit:
			fs.Float64Var(&c.RateLimit, n, c.envFloat(n, 30), usage)
		case PerChatInterval:
			fs.DurationVar(&c.PerChatInterval, n, c.envDuration(n, time.Second), usage)
		case DevAdmins:
			fs.StringVar(&c.DevAdmins, n, c.env(n, ""), usage)
		case LogLevel:
			fs.StringVar(&c.LogLevel, n, c.env(n, "info"), usage)
		case LogFormat:
			fs.StringVar(&c.LogFormat, n, c.env(n, "json"), usage)
		case WorkerGroupID:
			fs.StringVar(&c.WorkerGroupID, n, c.env(n, "herald-workers"), usage)
		case WorkerAttempts:
			fs.IntVar(&c.WorkerMaxAttempts, n, c.envInt(n, 8), usage)
		case WorkerConcurrent:
			fs.IntVar(&c.WorkerConcurrency, n, c.envInt(n, 256), usage)
		case WorkerLease:
			fs.DurationVar(&c.WorkerLease, n, c.envDuration(n, 2*time.Minute), usage)
		case BackoffBase:
			fs.DurationVar(&c.BackoffBase, n, c.envDuration(n, 15*time.Second), usage)
		case BackoffMax:
			fs.DurationVar(&c.BackoffMax, n, c.envDuration(n, 30*time.Minute), usage)
		case ShutdownDelay:
			fs.DurationVar(&c.ShutdownDelay, n, c.envDuration(n, 0), usage)
		case UpdatesMode:
			fs.StringVar(&c.UpdatesMode, n, c.env(n, "webhook"), usage)
		default:
			panic("config: unknown setting " + n)
		}
	}
}

var descriptions = map[string]string{
	DatabaseURL:      "PostgreSQL URL",
	KafkaBrokers:     "comma-separated Kafka brokers",
	KafkaTopicPrefix: "Kafka topic prefix",
	HTTPAddr:         "listen address for the API or webhook routes plus /healthz, /readyz, /metrics",
	WebhookSecret:    "expected X-Messenger-Bot-Api-Secret-Token (1-256 of A-Za-z0-9_-)",
	MessengerAPIURL:  "Bot API base URL",
	BotToken:         "bot token",
	BotUsername:      "bot username for deep links",
	DeepLinkBase:     "deep link base",
	PhoneHashKey:     "key for the HMAC-SHA256 phone digests (at least 16 bytes)",
	RateLimit:        "global messages per second per bot, shared by all workers",
	PerChatInterval:  "minimum interval between two messages to one chat",
	DevAdmins:        "comma-separated messenger user ids allowed every /dev_* command",
	LogLevel:         "log level: debug, info, warn, error",
	LogFormat:        "log format: json or text",
	WorkerGroupID:    "Kafka consumer group of the workers",
	WorkerAttempts:   "delivery attempts before a notification fails",
	WorkerConcurrent: "deliveries in flight per worker",
	WorkerLease:      "how long a claimed delivery may stay in flight before it is redriven",
	BackoffBase:      "wait after the first transient delivery failure (5xx, timeout), doubled after each",
	BackoffMax:       "longest wait between two delivery attempts",
	ShutdownDelay:    "after SIGTERM, how long to keep serving while /readyz answers 503, so load balancers stop routing first",
	UpdatesMode:      "how updates arrive: webhook or polling",
}

func (c *Config) env(setting, def string) string {
	if v, ok := os.LookupEnv(envOf(setting)); ok {
		return v
	}
	return def
}

func (c *Config) envInt(setting string, def int) int {
	v := c.env(setting, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		c.envErrs = append(c.envErrs, fmt.Errorf("%s: %q is not an integer", envOf(setting), v))
		return def
	}
	return n
}

func (c *Config) envFloat(setting string, def float64) float64 {
	v := c.env(setting, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		c.envErrs = append(c.envErrs, fmt.Errorf("%s: %q is not a number", envOf(setting), v))
		return def
	}
	return n
}

func (c *Config) envDuration(setting string, def time.Duration) time.Duration {
	v := c.env(setting, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		c.envErrs = append(c.envErrs, fmt.Errorf("%s: %q is not a duration (like 1s, 2m)", envOf(setting), v))
		return def
	}
	return d
}

var secretPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// Validate checks the named settings and returns every problem at once.
func (c *Config) Validate(names ...string) error {
	errs := append([]error(nil), c.envErrs...)
	bad := func(setting, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s (--%s): %s", envOf(setting), setting, fmt.Sprintf(format, args...)))
	}
	for _, n := range names {
		switch n {
		case DatabaseURL:
			if c.DatabaseURL == "" {
				bad(n, "required")
			} else if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
				bad(n, "must be a postgres:// URL")
			}
		case KafkaBrokers:
			if len(c.Brokers()) == 0 {
				bad(n, "required: at least one host:port")
			}
			for _, b := range c.Brokers() {
				if !strings.Contains(b, ":") {
					bad(n, "broker %q needs a port", b)
				}
			}
		case KafkaTopicPrefix:
			if !regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`).MatchString(c.KafkaTopicPrefix) {
				bad(n, "must be 1-200 of A-Za-z0-9._-")
			}
		case HTTPAddr:
			if c.HTTPAddr == "" || !strings.Contains(c.HTTPAddr, ":") {
				bad(n, "must be host:port or :port")
			}
		case WebhookSecret:
			if !secretPattern.MatchString(c.WebhookSecret) {
				bad(n, "must be 1-256 characters of A-Za-z0-9_-")
			}
		case MessengerAPIURL, DeepLinkBase:
			v := c.MessengerAPIURL
			if n == DeepLinkBase {
				v = c.DeepLinkBase
			}
			if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(n, "must be an http(s) URL")
			}
		case BotToken:
			if c.BotToken == "" || strings.ContainsAny(c.BotToken, "/ ") {
				bad(n, "required, without spaces or slashes")
			}
		case BotUsername:
			if !regexp.MustCompile(`^[A-Za-z0-9_]{3,64}$`).MatchString(c.BotUsername) {
				bad(n, "required: the bot's username without @")
			}
		case PhoneHashKey:
			if len(c.PhoneHashKey) < 16 {
				bad(n, "required: at least 16 characters")
			}
		case RateLimit:
			if c.RateLimit <= 0 || c.RateLimit > 100000 {
				bad(n, "must be a positive number of messages per second")
			}
		case PerChatInterval:
			if c.PerChatInterval < 0 {
				bad(n, "must not be negative")
			}
		case DevAdmins:
			if _, err := c.DevAdminIDs(); err != nil {
				bad(n, "%v", err)
			}
		case LogLevel:
			if _, err := c.SlogLevel(); err != nil {
				bad(n, "%v", err)
			}
		case LogFormat:
			if c.LogFormat != "json" && c.LogFormat != "text" {
				bad(n, "must be json or text")
			}
		case WorkerGroupID:
			if c.WorkerGroupID == "" {
				bad(n, "required")
			}
		case WorkerAttempts:
			if c.WorkerMaxAttempts < 1 || c.WorkerMaxAttempts > 100 {
				bad(n, "must be 1..100")
			}
		case WorkerConcurrent:
			if c.WorkerConcurrency < 1 || c.WorkerConcurrency > 10000 {
				bad(n, "must be 1..10000")
			}
		case WorkerLease:
			if c.WorkerLease < 5*time.Second {
				bad(n, "must be at least 5s")
			}
		case BackoffBase:
			if c.BackoffBase < 10*time.Millisecond {
				bad(n, "must be at least 10ms")
			}
		case BackoffMax:
			if c.BackoffMax < c.BackoffBase {
				bad(n, "must not be shorter than %s (%s)", envOf(BackoffBase), c.BackoffBase)
			}
		case ShutdownDelay:
			if c.ShutdownDelay < 0 || c.ShutdownDelay > time.Minute {
				bad(n, "must be between 0s and 1m")
			}
		case UpdatesMode:
			if c.UpdatesMode != "webhook" && c.UpdatesMode != "polling" {
				bad(n, "must be webhook or polling")
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration:\n  %w", joinIndented(errs))
}

func joinIndented(errs []error) error {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = e.Error()
	}
	return errors.New(strings.Join(parts, "\n  "))
}

// Brokers splits KafkaBrokers.
func (c *Config) Brokers() []string {
	var out []string
	for _, b := range strings.Split(c.KafkaBrokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// DevAdminIDs parses DevAdmins.
func (c *Config) DevAdminIDs() ([]int64, error) {
	var out []int64
	for _, s := range strings.Split(c.DevAdmins, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a messenger user id", s)
		}
		out = append(out, id)
	}
	return out, nil
}
