// Package config declares every Herald setting, once: a flag, its HERALD_* environment variable (the flag
// wins), a type, a default, a help line, and the rule it must meet, checked at start.
//
// Settings come in small groups (Database, Kafka, HTTP, BotAPI, …), each with its rules. Each command's
// settings (Ingress, Webhook, Worker, …, at the end of this file) embed exactly the groups that command
// reads, so a setting shared by several components has one default and one rule, and `herald <command>
// --help` lists only what that command uses. The parser is kong (parse.go); cmd/herald embeds these
// structs in its commands and only wires.
//
// To add a setting: a field with name, env, default and help tags in the group it belongs to (or a new
// group, embedded in the commands that read it), its rule in the group's check, then `make docs`.
// The field's name is the flag's name in CamelCase.
package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/signing"
)

// A tag `dev:"…"` says what an empty value means under `herald dev`; docs/configuration.md shows it.
// A `${name=default}` default can be replaced by a command with `set:"name=value"` (herald dev does).

// Process settings apply to every command.
type Process struct {
	PprofAddr string `name:"pprof-addr" env:"HERALD_PPROF_ADDR" placeholder:"ADDR" help:"serve Go's net/http/pprof on this address (keep it on loopback: 127.0.0.1:6060); empty: off"`
}

// Database is PostgreSQL: the source of truth, and the operator's key store.
type Database struct {
	DatabaseURL string `name:"database-url" env:"HERALD_DATABASE_URL" placeholder:"URL" dev:"a private cluster in --data-dir" help:"PostgreSQL URL (postgres://…)"`
}

func (c *Database) check(p *problems) {
	if c.DatabaseURL == "" {
		p.add(&c.DatabaseURL, "required")
	} else if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		p.add(&c.DatabaseURL, "must be a postgres:// URL")
	}
}

// Kafka is the transport between the HTTP components and the workers.
type Kafka struct {
	KafkaBrokers     List   `name:"kafka-brokers" env:"HERALD_KAFKA_BROKERS" default:"" placeholder:"HOST:PORT" dev:"an embedded broker" help:"comma-separated Kafka brokers"`
	KafkaTopicPrefix string `name:"kafka-topic-prefix" env:"HERALD_KAFKA_TOPIC_PREFIX" default:"herald" help:"topic prefix: the topics are PREFIX.notifications.high and PREFIX.notifications.normal"`
}

// Brokers is the broker list as the Kafka clients take it.
func (c *Kafka) Brokers() []string { return []string(c.KafkaBrokers) }

var topicPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

func (c *Kafka) check(p *problems) {
	c.checkBrokers(p)
	c.checkTopicPrefix(p)
}

func (c *Kafka) checkBrokers(p *problems) {
	if len(c.KafkaBrokers) == 0 {
		p.add(&c.KafkaBrokers, "required: at least one host:port")
	}
	for _, b := range c.KafkaBrokers {
		if !strings.Contains(b, ":") {
			p.add(&c.KafkaBrokers, "broker %q needs a port", b)
		}
	}
}

func (c *Kafka) checkTopicPrefix(p *problems) {
	if !topicPrefixPattern.MatchString(c.KafkaTopicPrefix) {
		p.add(&c.KafkaTopicPrefix, "must be 1-200 of A-Za-z0-9._-")
	}
}

// HTTP is the one listen address of each ingress, webhook, worker, dev and sim process.
type HTTP struct {
	// herald dev sets http_addr to loopback: its simulator's control API is unauthenticated and its console
	// hands out the demo key.
	HTTPAddr string `name:"http-addr" env:"HERALD_HTTP_ADDR" default:"${http_addr=:8080}" help:"the listen address: the API or webhook routes plus /healthz, /readyz, and /metrics unless HERALD_METRICS_ADDR moves it"`
}

func (c *HTTP) check(p *problems) {
	if !strings.Contains(c.HTTPAddr, ":") {
		p.add(&c.HTTPAddr, "must be host:port or :port")
	}
}

// Metrics is where the HTTP components serve /metrics.
type Metrics struct {
	MetricsAddr string `name:"metrics-addr" env:"HERALD_METRICS_ADDR" default:"" placeholder:"ADDR" help:"serve /metrics on this address of its own (the Helm chart: :9090), so that publishing the API port never publishes the metrics; empty: on HERALD_HTTP_ADDR (the operator: its metrics address, 0 disables it)"`
}

func (c *Metrics) check(p *problems, h *HTTP) {
	if c.MetricsAddr == "" {
		return
	}
	if !strings.Contains(c.MetricsAddr, ":") {
		p.add(&c.MetricsAddr, "must be host:port or :port")
	} else if c.MetricsAddr == h.HTTPAddr {
		p.add(&c.MetricsAddr, "must differ from HERALD_HTTP_ADDR (%s); leave it empty to serve /metrics there", h.HTTPAddr)
	}
}

// Proxies say how the tenant API finds a request's client address behind load balancers: failed
// authentications are counted per client address.
type Proxies struct {
	TrustedProxies List `name:"trusted-proxies" env:"HERALD_TRUSTED_PROXIES" default:"" placeholder:"CIDR" help:"comma-separated CIDRs or addresses of the load balancers in front of Herald: X-Forwarded-For is honoured only from them, and the client is its right-most address outside them; empty: the TCP peer is the client"`
	BehindProxy    bool `name:"behind-proxy" env:"HERALD_BEHIND_PROXY" default:"false" help:"clients reach the ingress through a reverse proxy or load balancer (the chart sets it when kubernetesIngress.enabled): without trusted proxies the ingress then warns at start that every client shares the proxy's address"`
}

// UntrustedProxyWarning is what the ingress logs at start when it is told it stands behind a proxy that is
// not trusted; empty when there is nothing to say.
func (c *Proxies) UntrustedProxyWarning() string {
	if !c.BehindProxy || len(c.TrustedProxies) > 0 {
		return ""
	}
	return "the ingress is behind a proxy (HERALD_BEHIND_PROXY) but HERALD_TRUSTED_PROXIES is empty: every client behind it " +
		"shares the proxy's address, and one client's invalid keys throttle the invalid keys of all; list the proxies " +
		"(chart: ingress.trustedProxies)"
}

func (c *Proxies) check(p *problems) {
	for _, s := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(s); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(s); err != nil {
			p.add(&c.TrustedProxies, "%q is neither a CIDR nor an IP address", s)
		}
	}
}

// Drain is how the load-balanced HTTP components (ingress, webhook) stop.
type Drain struct {
	ShutdownDelay time.Duration `name:"shutdown-delay" env:"HERALD_SHUTDOWN_DELAY" default:"0s" help:"after SIGTERM, how long to keep serving while /readyz answers 503, so load balancers stop routing first"`
}

func (c *Drain) check(p *problems) {
	if c.ShutdownDelay < 0 || c.ShutdownDelay > time.Minute {
		p.add(&c.ShutdownDelay, "must be between 0s and 1m")
	}
}

// BotToken is the bot's token: Herald's credential at the Bot API, and the token herald sim accepts.
type BotToken struct {
	MessengerBotToken string `name:"messenger-bot-token" env:"HERALD_MESSENGER_BOT_TOKEN" placeholder:"TOKEN" dev:"the simulator's" help:"bot token"`
}

func (c *BotToken) check(p *problems) {
	if c.MessengerBotToken == "" || strings.ContainsAny(c.MessengerBotToken, "/ ") {
		p.add(&c.MessengerBotToken, "required, without spaces or slashes")
	}
}

// MessengerAPI is where Herald calls the messaging platform.
type MessengerAPI struct {
	// herald dev sets messenger_api_url to empty: its simulator, unless a URL is given.
	MessengerAPIURL string `name:"messenger-api-url" env:"HERALD_MESSENGER_API_URL" default:"${messenger_api_url=https://api.telegram.org}" dev:"the simulator" help:"Bot API base URL"`
}

func (c *MessengerAPI) check(p *problems) { checkHTTPURL(p, &c.MessengerAPIURL) }

// BotAPI is how Herald calls the messaging platform as the shared bot.
type BotAPI struct {
	MessengerAPI
	BotToken
}

func (c *BotAPI) check(p *problems) {
	c.MessengerAPI.check(p)
	c.BotToken.check(p)
}

// BotKey seals the tokens of tenants' own bots in PostgreSQL (internal/bot): the operator and the admin CLI
// seal them, the webhook and the workers open them. Optional: without it no tenant can bring its own bot.
type BotKey struct {
	BotTokenKey string `name:"bot-token-key" env:"HERALD_BOT_TOKEN_KEY" placeholder:"KEY" dev:"generated, kept in --data-dir" help:"key that seals the tokens of tenants' own bots in PostgreSQL: the standard base64 of 32 random bytes (openssl rand -base64 32); to rotate it, a comma-separated list: the first seals, every one opens; empty: tenants cannot bring their own bots"`
}

func (c *BotKey) check(p *problems) {
	// Never quote the value: it is a secret.
	if c.BotTokenKey == "" {
		return
	}
	if _, err := signing.ParseKey(c.BotTokenKey); err != nil {
		p.add(&c.BotTokenKey, "%v", err)
	}
}

// Key is the parsed key, nil when none is set; call it after the check passed.
func (c *BotKey) Key() *signing.Key { return parsedKey(c.BotTokenKey, "BotKey") }

// parsedKey is a key setting parsed, nil when it is empty; the setting's check passed, so it parses.
func parsedKey(value, setting string) *signing.Key {
	if value == "" {
		return nil
	}
	k, err := signing.ParseKey(value)
	if err != nil {
		panic("config: " + setting + " used unchecked")
	}
	return k
}

// BotRegistration is where a tenant's own bot is registered to send its updates (setWebhook): the operator
// and the admin CLI register bots. Optional: without it no tenant can bring its own bot.
type BotRegistration struct {
	PublicURL string `name:"public-url" env:"HERALD_PUBLIC_URL" placeholder:"URL" help:"the https URL at which the messaging platform reaches the webhook component (herald webhook), like https://herald.example.com: a tenant's own bot gets its updates at URL/messenger/webhook/{bot_id}; empty: tenants cannot bring their own bots"`
}

func (c *BotRegistration) check(p *problems) {
	if c.PublicURL == "" {
		return
	}
	// The platform calls only https webhooks; the bot's path is added to the URL.
	if u, err := url.Parse(c.PublicURL); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		p.add(&c.PublicURL, "must be an https:// URL without a query, a fragment or credentials, like https://herald.example.com")
	}
}

// BotUsername names the bot in deep links (and in the simulator).
type BotUsername struct {
	MessengerBotUsername string `name:"messenger-bot-username" env:"HERALD_MESSENGER_BOT_USERNAME" placeholder:"NAME" dev:"the simulator's" help:"bot username for deep links, without @"`
}

var botUsernamePattern = regexp.MustCompile(`^[A-Za-z0-9_]{3,64}$`)

func (c *BotUsername) check(p *problems) {
	if !botUsernamePattern.MatchString(c.MessengerBotUsername) {
		p.add(&c.MessengerBotUsername, "required: the bot's username without @")
	}
}

// DeepLinks are the links a tenant's user opens to link a chat: DeepLinkBase/BotUsername?start=TOKEN.
type DeepLinks struct {
	BotUsername
	DeepLinkBase string `name:"deep-link-base" env:"HERALD_DEEP_LINK_BASE" default:"https://t.me" help:"deep link base"`
}

func (c *DeepLinks) check(p *problems) {
	c.BotUsername.check(p)
	c.checkBase(p)
}

func (c *DeepLinks) checkBase(p *problems) { checkHTTPURL(p, &c.DeepLinkBase) }

// RateLimit is the platform's global send limit, shared by all workers.
type RateLimit struct {
	MessengerRateLimit float64 `name:"messenger-rate-limit" env:"HERALD_MESSENGER_RATE_LIMIT" default:"30" help:"global messages per second per bot, shared by all workers"`
}

func (c *RateLimit) check(p *problems) {
	if c.MessengerRateLimit <= 0 || c.MessengerRateLimit > 100000 {
		p.add(&c.MessengerRateLimit, "must be a positive number of messages per second")
	}
}

// WebhookAuth is the secret the platform sends with every update, set with `herald webhook set-url`.
type WebhookAuth struct {
	WebhookSecret string `name:"webhook-secret" env:"HERALD_WEBHOOK_SECRET" placeholder:"SECRET" dev:"generated, kept in --data-dir" help:"expected X-Messenger-Bot-Api-Secret-Token / X-Telegram-Bot-Api-Secret-Token: 16-256 of A-Za-z0-9_- (the platform allows 1-256; Herald requires 16, so that it cannot be guessed)"`
}

// webhookSecretPattern: the platform accepts 1-256 characters; 16 random ones of 64 are 96 bits, beyond
// guessing through the webhook (which is public: the platform calls it from the internet).
var webhookSecretPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{16,256}$`)

func (c *WebhookAuth) check(p *problems) {
	// Never quote the value: it is a secret.
	if !webhookSecretPattern.MatchString(c.WebhookSecret) {
		p.add(&c.WebhookSecret, "must be 16-256 characters of A-Za-z0-9_- (Herald requires at least 16; generate one with: openssl rand -hex 24)")
	}
}

// UpdateHandling is what handling the platform's updates needs: phone verification and /dev_* commands.
type UpdateHandling struct {
	PhoneHashKey string `name:"phone-hash-key" env:"HERALD_PHONE_HASH_KEY" placeholder:"KEY" dev:"generated, kept in --data-dir" help:"key for the HMAC-SHA256 phone digests (at least 16 characters)"`
	DevAdmins    IDList `name:"dev-admins" env:"HERALD_DEV_ADMINS" default:"" placeholder:"ID" help:"comma-separated messenger user ids allowed every /dev_* command"`
}

func (c *UpdateHandling) check(p *problems) {
	c.checkPhoneHashKey(p)
	// DevAdmins is checked as it is parsed (IDList).
}

func (c *UpdateHandling) checkPhoneHashKey(p *problems) {
	if len(c.PhoneHashKey) < 16 {
		p.add(&c.PhoneHashKey, "required: at least 16 characters")
	}
}

// Delivery tunes the workers.
type Delivery struct {
	MessengerPerChatInterval time.Duration `name:"messenger-per-chat-interval" env:"HERALD_MESSENGER_PER_CHAT_INTERVAL" default:"1s" help:"minimum interval between two messages to one chat"`
	WorkerGroupID            string        `name:"worker-group-id" env:"HERALD_WORKER_GROUP_ID" default:"herald-workers" help:"Kafka consumer group of the workers"`
	WorkerMaxAttempts        int           `name:"worker-max-attempts" env:"HERALD_WORKER_MAX_ATTEMPTS" default:"8" help:"delivery attempts before a notification fails"`
	WorkerConcurrency        int           `name:"worker-concurrency" env:"HERALD_WORKER_CONCURRENCY" default:"256" help:"deliveries in flight per worker (claim, platform call, status write)"`
	WorkerBuffer             int           `name:"worker-buffer" env:"HERALD_WORKER_BUFFER" default:"20000" help:"messages a worker reads ahead into its lanes (waiting for their chat, their tenant's turn, or in flight): tenants are served in turn among these; each bot has a share of them, and its messages past its share are held compactly, up to 20 times as many"`
	WorkerLease              time.Duration `name:"worker-lease" env:"HERALD_WORKER_LEASE" default:"2m" help:"how long a claimed delivery may stay in flight before it is redriven"`
	WorkerBackoffBase        time.Duration `name:"worker-backoff-base" env:"HERALD_WORKER_BACKOFF_BASE" default:"15s" help:"wait after the first transient delivery failure (5xx, timeout), doubled after each"`
	WorkerBackoffMax         time.Duration `name:"worker-backoff-max" env:"HERALD_WORKER_BACKOFF_MAX" default:"30m" help:"longest wait between two delivery attempts"`
}

func (c *Delivery) check(p *problems) {
	if c.MessengerPerChatInterval < 0 {
		p.add(&c.MessengerPerChatInterval, "must not be negative")
	}
	if c.WorkerGroupID == "" {
		p.add(&c.WorkerGroupID, "required")
	}
	if c.WorkerMaxAttempts < 1 || c.WorkerMaxAttempts > 100 {
		p.add(&c.WorkerMaxAttempts, "must be 1..100")
	}
	if c.WorkerConcurrency < 1 || c.WorkerConcurrency > 10000 {
		p.add(&c.WorkerConcurrency, "must be 1..10000")
	}
	if c.WorkerBuffer < c.WorkerConcurrency || c.WorkerBuffer > 1000000 {
		p.add(&c.WorkerBuffer, "must be at least %s and at most 1000000", "HERALD_WORKER_CONCURRENCY")
	}
	if c.WorkerLease < 5*time.Second {
		p.add(&c.WorkerLease, "must be at least 5s")
	}
	if c.WorkerBackoffBase < 10*time.Millisecond {
		p.add(&c.WorkerBackoffBase, "must be at least 10ms")
	}
	if c.WorkerBackoffMax < c.WorkerBackoffBase {
		p.add(&c.WorkerBackoffMax, "must not be shorter than HERALD_WORKER_BACKOFF_BASE (%s)", c.WorkerBackoffBase)
	}
}

// Retention is how long Herald keeps what it stores; the workers (and herald dev) purge the rest
// (internal/store/retention.go has the rules, docs/security.md the whole list).
type Retention struct {
	RetentionBodyDays         int           `name:"retention-body-days" env:"HERALD_RETENTION_BODY_DAYS" default:"7" help:"days a message body is kept after its notification reached a final state (delivered, failed, …); 0: erased at the next purge"`
	RetentionNotificationDays int           `name:"retention-notification-days" env:"HERALD_RETENTION_NOTIFICATION_DAYS" default:"90" help:"days a notification's delivery metadata (what GET /v1/status reads) is kept after its final state; at least HERALD_RETENTION_BODY_DAYS"`
	RetentionExpired          time.Duration `name:"retention-expired" env:"HERALD_RETENTION_EXPIRED" default:"24h" help:"how long expired link tokens and phone verification sessions are kept past their expiry (a user who tries one late is told it expired, not that it is unknown)"`
	RetentionCallbackDays     int           `name:"retention-callback-days" env:"HERALD_RETENTION_CALLBACK_DAYS" default:"7" help:"days a status callback event is kept after it was delivered or dropped; 0: deleted at the next purge"`
}

func (c *Retention) check(p *problems) {
	if c.RetentionBodyDays < 0 || c.RetentionBodyDays > 3650 {
		p.add(&c.RetentionBodyDays, "must be 0..3650 days")
	}
	if c.RetentionNotificationDays < 1 || c.RetentionNotificationDays > 3650 {
		p.add(&c.RetentionNotificationDays, "must be 1..3650 days")
	} else if c.RetentionNotificationDays < c.RetentionBodyDays {
		p.add(&c.RetentionNotificationDays, "must not be shorter than HERALD_RETENTION_BODY_DAYS (%d): a row is deleted only once its body is erased", c.RetentionBodyDays)
	}
	if c.RetentionExpired < 0 || c.RetentionExpired > 30*24*time.Hour {
		p.add(&c.RetentionExpired, "must be between 0s and 720h")
	}
	if c.RetentionCallbackDays < 0 || c.RetentionCallbackDays > 3650 {
		p.add(&c.RetentionCallbackDays, "must be 0..3650 days")
	}
}

// CallbackKey seals the secrets of status callback endpoints in PostgreSQL (internal/signing): the
// ingress seals them, the callback sender opens them.
type CallbackKey struct {
	CallbackSecretKey string `name:"callback-secret-key" env:"HERALD_CALLBACK_SECRET_KEY" placeholder:"KEY" dev:"generated, kept in --data-dir" help:"key that seals the signing secrets of callback endpoints in PostgreSQL: the standard base64 of 32 random bytes (openssl rand -base64 32); to rotate it, a comma-separated list: the first seals, every one opens, and herald callbacks seals the secrets again under the first (docs/callbacks.md)"`
}

func (c *CallbackKey) check(p *problems) {
	// Never quote the value: it is a secret.
	if _, err := signing.ParseKey(c.CallbackSecretKey); err != nil {
		p.add(&c.CallbackSecretKey, "%v", err)
	}
}

// Key is the parsed key, nil when none is set (the ingress then answers the callback routes that make a
// secret 503); call it after the check passed.
func (c *CallbackKey) Key() *signing.Key { return parsedKey(c.CallbackSecretKey, "CallbackKey") }

// CallbackPolicy says where status callbacks may go (internal/egress): the ingress checks URLs with it,
// the sender every connection. herald dev turns both on (its receiver is the simulator on 127.0.0.1).
type CallbackPolicy struct {
	CallbackAllowInsecure bool `name:"callback-allow-insecure" env:"HERALD_CALLBACK_ALLOW_INSECURE" default:"${callback_allow=false}" help:"accept and call http:// callback URLs, not only https://"`
	CallbackAllowPrivate  bool `name:"callback-allow-private" env:"HERALD_CALLBACK_ALLOW_PRIVATE" default:"${callback_allow=false}" help:"let callbacks reach loopback, private, link-local, unspecified and other non-public addresses, on any port (cloud metadata addresses stay refused); otherwise only ports 443 and 8443"`
}

// Policy is the settings as internal/egress takes them.
func (c *CallbackPolicy) Policy() egress.Policy {
	return egress.Policy{AllowInsecure: c.CallbackAllowInsecure, AllowPrivate: c.CallbackAllowPrivate}
}

// CallbackSending tunes the callback sender.
type CallbackSending struct {
	CallbackConcurrency         int `name:"callback-concurrency" env:"HERALD_CALLBACK_CONCURRENCY" default:"256" help:"callback attempts in flight per sender"`
	CallbackEndpointConcurrency int `name:"callback-endpoint-concurrency" env:"HERALD_CALLBACK_ENDPOINT_CONCURRENCY" default:"8" help:"callback attempts in flight per endpoint, across senders: a slow endpoint holds at most this many"`
}

func (c *CallbackSending) check(p *problems) {
	if c.CallbackConcurrency < 1 || c.CallbackConcurrency > 10000 {
		p.add(&c.CallbackConcurrency, "must be 1..10000")
	}
	if c.CallbackEndpointConcurrency < 1 || c.CallbackEndpointConcurrency > c.CallbackConcurrency {
		p.add(&c.CallbackEndpointConcurrency, "must be at least 1 and at most %s", "HERALD_CALLBACK_CONCURRENCY")
	}
}

// Log is how every component logs.
type Log struct {
	LogLevel string `name:"log-level" env:"HERALD_LOG_LEVEL" default:"info" help:"log level: debug, info, warn, error"`
	// herald dev writes to a terminal, not a log pipeline: it sets log_format=text.
	LogFormat string `name:"log-format" env:"HERALD_LOG_FORMAT" default:"${log_format=json}" help:"log format: json or text"`
}

func (c *Log) check(p *problems) {
	if _, err := c.SlogLevel(); err != nil {
		p.add(&c.LogLevel, "%v", err)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		p.add(&c.LogFormat, "must be json or text")
	}
}

func checkHTTPURL(p *problems, v *string) {
	if u, err := url.Parse(*v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add(v, "must be an http(s) URL")
	}
}

// What each command reads. A command's check says which rules apply; the parser runs it after parsing
// (parse.go), so every command here must have one.

// TenantDefaults are the limits of a tenant that sets none of its own (its Tenant resource's spec.limits,
// or `herald tenant update`).
type TenantDefaults struct {
	TenantSendsPerSecond    float64 `name:"tenant-sends-per-second" env:"HERALD_TENANT_SENDS_PER_SECOND" default:"100" help:"notifications a tenant may have accepted per second, batch items one by one, when its spec sets none (burst: twice the rate)"`
	TenantRequestsPerSecond float64 `name:"tenant-requests-per-second" env:"HERALD_TENANT_REQUESTS_PER_SECOND" default:"50" help:"every other /v1 request a tenant may make per second when its spec sets none (burst: twice the rate)"`
}

func (c *TenantDefaults) check(p *problems) {
	if c.TenantSendsPerSecond <= 0 || c.TenantSendsPerSecond > 100000 {
		p.add(&c.TenantSendsPerSecond, "must be a positive number up to 100000")
	}
	if c.TenantRequestsPerSecond <= 0 || c.TenantRequestsPerSecond > 100000 {
		p.add(&c.TenantRequestsPerSecond, "must be a positive number up to 100000")
	}
}

// Admission bounds what one ingress replica takes on at once, and so its memory: past these bounds it
// sheds load (503 with Retry-After) or closes connections instead of queuing.
type Admission struct {
	MaxConnections   int   `name:"max-connections" env:"HERALD_MAX_CONNECTIONS" default:"1024" help:"connections the ingress holds: past it a new connection takes the place of one idle for a second or more, else is answered 503 unavailable with Retry-After and closed, 2,000 a second at most (faster ones wait in the accept queue; GET /healthz, /readyz and /metrics pass); 0: no bound"`
	MaxInFlight      int   `name:"max-in-flight" env:"HERALD_MAX_IN_FLIGHT" default:"512" help:"concurrent /v1 requests, one tenant's at most three quarters of them; past it a request is answered 503 unavailable with Retry-After at once"`
	MaxInFlightBytes int64 `name:"max-in-flight-bytes" env:"HERALD_MAX_IN_FLIGHT_BYTES" default:"16777216" placeholder:"BYTES" help:"request bodies of /v1 held at once, counted by Content-Length, one tenant's at most half of them (at least 13107200: two full batches, so that each half holds one); past it a request is answered 503 unavailable with Retry-After before its body is read"`
}

// minInFlightBytes is ingress.MinMaxInFlightBytes, two full batches (ingress.MaxBatchBodyBytes): one
// tenant may hold half of the bytes, and that half must hold a full batch.
const minInFlightBytes = 2 * 100 * 64 << 10

func (c *Admission) check(p *problems) {
	if c.MaxConnections < 0 || c.MaxConnections > 1_000_000 {
		p.add(&c.MaxConnections, "must be between 0 and 1000000")
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1_000_000 {
		p.add(&c.MaxInFlight, "must be between 1 and 1000000")
	}
	if c.MaxInFlightBytes < minInFlightBytes || c.MaxInFlightBytes > 1<<40 {
		p.add(&c.MaxInFlightBytes, "must be at least %d (two full batches' bodies: one tenant may hold half)", minInFlightBytes)
	}
}

// Ingress is `herald ingress`.
type Ingress struct {
	Database
	Kafka
	HTTP
	Metrics
	Drain
	Admission
	Proxies
	DeepLinks
	TenantDefaults
	CallbackKey
	CallbackPolicy
	Log
}

func (c *Ingress) check(p *problems) {
	c.Database.check(p)
	c.Kafka.check(p)
	c.HTTP.check(p)
	c.Metrics.check(p, &c.HTTP)
	c.Drain.check(p)
	c.Admission.check(p)
	c.Proxies.check(p)
	c.DeepLinks.check(p)
	c.TenantDefaults.check(p)
	// Optional here: an installation without callbacks keeps its ingress (the routes that make a secret answer
	// 503); herald callbacks requires it.
	if c.CallbackSecretKey != "" {
		c.CallbackKey.check(p)
	}
	c.Log.check(p)
}

// Webhook is `herald webhook`.
type Webhook struct {
	Database
	Kafka
	HTTP
	Metrics
	Drain
	WebhookAuth
	UpdateHandling
	Updates string `name:"updates" env:"HERALD_WEBHOOK_UPDATES" default:"webhook" help:"how updates arrive: webhook (POST /messenger/webhook, and /messenger/webhook/{bot_id} for the tenants' own bots) or polling (long-poll getUpdates of the shared bot and of every tenant's bot, whose tokens HERALD_BOT_TOKEN_KEY opens; no public URL needed)"`
	BotAPI
	BotKey
	Log
}

// Polling reports whether updates are long-polled rather than received on the webhook route.
func (c *Webhook) Polling() bool { return c.Updates == "polling" }

func (c *Webhook) check(p *problems) {
	c.Database.check(p)
	c.Kafka.check(p)
	c.HTTP.check(p)
	c.Metrics.check(p, &c.HTTP)
	c.Drain.check(p)
	c.UpdateHandling.check(p)
	if c.Updates != "webhook" && c.Updates != "polling" {
		p.add(&c.Updates, "must be webhook or polling")
	}
	// The secret guards the webhook route; polling needs the Bot API instead.
	if c.Polling() {
		c.BotAPI.check(p)
	} else {
		c.WebhookAuth.check(p)
	}
	c.BotKey.check(p)
	c.Log.check(p)
}

// WebhookSetURL is `herald webhook set-url URL`.
type WebhookSetURL struct {
	BotAPI
	WebhookAuth
	Log
}

func (c *WebhookSetURL) check(p *problems) {
	c.BotAPI.check(p)
	c.WebhookAuth.check(p)
	c.Log.check(p)
}

// Worker is `herald worker`.
type Worker struct {
	Database
	Kafka
	HTTP
	Metrics
	BotAPI
	BotKey
	RateLimit
	Delivery
	Retention
	Log
}

func (c *Worker) check(p *problems) {
	c.Database.check(p)
	c.Kafka.check(p)
	c.HTTP.check(p)
	c.Metrics.check(p, &c.HTTP)
	c.BotAPI.check(p)
	c.BotKey.check(p)
	c.RateLimit.check(p)
	c.Delivery.check(p)
	c.Retention.check(p)
	c.Log.check(p)
}

// Callbacks is `herald callbacks`, the sender of status callbacks.
type Callbacks struct {
	Database
	HTTP
	Metrics
	CallbackKey
	CallbackPolicy
	CallbackSending
	Log
}

func (c *Callbacks) check(p *problems) {
	c.Database.check(p)
	c.HTTP.check(p)
	c.Metrics.check(p, &c.HTTP)
	c.CallbackKey.check(p)
	c.CallbackSending.check(p)
	c.Log.check(p)
}

// Operator is `herald operator`. Its own settings are the fields below; a new one is a field with its
// tags here, a rule in check when a value can be wrong, and a line where cmd/herald/operator.go fills
// operator.Options.
type Operator struct {
	Database
	MetricsAddr             string        `name:"metrics-addr" env:"HERALD_METRICS_ADDR" default:":8443" help:"Prometheus /metrics address; 0 disables it"`
	MetricsSecure           bool          `name:"metrics-secure" env:"HERALD_METRICS_SECURE" default:"true" help:"serve /metrics over HTTPS, only to bearer tokens the API server authorizes for get on /metrics; false: plain HTTP to anyone"`
	MetricsCertDir          string        `name:"metrics-cert-dir" env:"HERALD_METRICS_CERT_DIR" placeholder:"DIR" help:"directory with tls.crt and tls.key for /metrics, reloaded on change; empty: a self-signed certificate"`
	ProbeAddr               string        `name:"probe-addr" env:"HERALD_PROBE_ADDR" default:":8081" help:"/healthz and /readyz address; 0 disables it"`
	LeaderElect             bool          `name:"leader-elect" env:"HERALD_LEADER_ELECT" default:"false" help:"elect one active replica through a Lease"`
	LeaderElectionNamespace string        `name:"leader-election-namespace" env:"HERALD_LEADER_ELECTION_NAMESPACE" placeholder:"NAMESPACE" help:"namespace of the Lease; empty: the pod's"`
	RotationGracePeriod     time.Duration `name:"rotation-grace-period" env:"HERALD_ROTATION_GRACE_PERIOD" default:"24h" help:"how long a rotated-out key keeps working"`
	ResyncPeriod            time.Duration `name:"resync-period" env:"HERALD_RESYNC_PERIOD" default:"5m" help:"how often every object is checked against the key store"`
	OrphanGracePeriod       time.Duration `name:"orphan-grace-period" env:"HERALD_ORPHAN_GRACE_PERIOD" default:"10m" help:"how long the keys of an ApiKey that no longer exists stay before they are revoked"`
	// Tenants' own bots (spec.bot): registered with the platform, their tokens sealed.
	MessengerAPI
	BotRegistration
	BotKey
	Log
}

func (c *Operator) check(p *problems) {
	c.Database.check(p)
	c.MessengerAPI.check(p)
	c.BotRegistration.check(p)
	c.BotKey.check(p)
	c.Log.check(p)
}

// Migrate is `herald migrate`.
type Migrate struct {
	Database
	Log
}

func (c *Migrate) check(p *problems) {
	c.Database.check(p)
	c.Log.check(p)
}

// Dev is `herald dev`: what is empty is embedded or generated (the dev tags), so only given values are
// checked.
type Dev struct {
	HTTP `set:"http_addr=127.0.0.1:8080"`
	Database
	Kafka
	BotAPI `set:"messenger_api_url="`
	DeepLinks
	WebhookAuth
	UpdateHandling
	RateLimit
	TenantDefaults
	Retention
	CallbackKey
	CallbackPolicy `set:"callback_allow=true"`
	CallbackSending
	BotKey
	DataDir string `name:"data-dir" env:"HERALD_DEV_DATA_DIR" default:".dev" help:"where the private PostgreSQL and the generated secrets are kept between runs"`
	PGBin   string `name:"pg-bin" env:"HERALD_PG_BIN" placeholder:"DIR" help:"directory of the PostgreSQL server binaries (initdb, pg_ctl, postgres) for the private PostgreSQL; empty: pg_config --bindir, the newest /usr/lib/postgresql/*/bin, or initdb on the PATH"`
	Log     `set:"log_format=text"`
}

func (c *Dev) check(p *problems) {
	c.HTTP.check(p)
	c.Retention.check(p)
	c.Kafka.checkTopicPrefix(p)
	c.DeepLinks.checkBase(p)
	c.RateLimit.check(p)
	c.TenantDefaults.check(p)
	c.CallbackSending.check(p)
	c.Log.check(p)
	if c.DatabaseURL != "" {
		c.Database.check(p)
	}
	if len(c.KafkaBrokers) > 0 {
		c.Kafka.checkBrokers(p)
	}
	if c.WebhookSecret != "" {
		c.WebhookAuth.check(p)
	}
	if c.PhoneHashKey != "" {
		c.UpdateHandling.checkPhoneHashKey(p)
	}
	if c.CallbackSecretKey != "" {
		c.CallbackKey.check(p)
	}
	c.BotKey.check(p)
	// A real platform needs a real bot; the simulator brings its own.
	if c.MessengerAPIURL != "" {
		c.BotAPI.check(p)
		c.BotUsername.check(p)
	}
	if c.DataDir == "" {
		p.add(&c.DataDir, "required")
	}
}

// Sim is `herald sim`: an empty token or username means the simulator's own.
type Sim struct {
	HTTP
	BotToken
	BotUsername
	RateLimit
	SimPerChatRate      float64 `name:"per-chat-rate" env:"HERALD_SIM_PER_CHAT_RATE" default:"1" help:"messages per second the simulated platform allows per chat"`
	SimWebhookPlainHTTP bool    `name:"webhook-plain-http" env:"HERALD_SIM_WEBHOOK_PLAIN_HTTP" default:"false" help:"post to https:// webhook URLs over plain http at the same host, as a load balancer terminating TLS would (for clusters without certificates)"`
	Log
}

func (c *Sim) check(p *problems) {
	c.HTTP.check(p)
	c.RateLimit.check(p)
	c.Log.check(p)
	if c.MessengerBotToken != "" {
		c.BotToken.check(p)
	}
	if c.MessengerBotUsername != "" {
		c.BotUsername.check(p)
	}
}

// Admin is what the admin CLI (`herald tenant …`, `herald apikey …`) reads.
type Admin struct {
	Database
}

func (c *Admin) check(p *problems) { c.Database.check(p) }

// AdminBot is what `herald tenant update` reads: the admin CLI's settings, and what registering a tenant's
// own bot needs (--bot-token-file), which the command asks for only when it registers one.
type AdminBot struct {
	Admin
	MessengerAPI
	BotRegistration
	BotKey
}

func (c *AdminBot) check(p *problems) {
	c.Admin.check(p)
	c.MessengerAPI.check(p)
	c.BotRegistration.check(p)
	c.BotKey.check(p)
}

// List is a comma-separated list of strings, trimmed, without empty items; a repeated flag adds to it.
type List []string

// Decode implements kong.MapperValue.
func (l *List) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("list", &s); err != nil {
		return err
	}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// IDList is a comma-separated list of messenger user ids.
type IDList []int64

// Decode implements kong.MapperValue.
func (l *IDList) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("list", &s); err != nil {
		return err
	}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		id, err := strconv.ParseInt(item, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a messenger user id", item)
		}
		*l = append(*l, id)
	}
	return nil
}
