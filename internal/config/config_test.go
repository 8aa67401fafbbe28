package config

import (
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// grammar is a command line with one command per settings struct, as cmd/herald builds it.
type grammar struct {
	Process
	Ingress  struct{ Ingress }       `cmd:""`
	Webhook  struct{ Webhook }       `cmd:""`
	SetURL   struct{ WebhookSetURL } `cmd:"" name:"set-url"`
	Worker   struct{ Worker }        `cmd:""`
	Callback struct{ Callbacks }     `cmd:"" name:"callbacks"`
	Operator struct{ Operator }      `cmd:""`
	Migrate  struct{ Migrate }       `cmd:""`
	Dev      struct{ Dev }           `cmd:""`
	Sim      struct{ Sim }           `cmd:""`
	Admin    struct{ Admin }         `cmd:""`
}

func parse(t *testing.T, args ...string) (*grammar, error) {
	t.Helper()
	var g grammar
	p, err := NewParser(&g, kong.Writers(io.Discard, io.Discard), kong.Exit(func(int) { t.Fatal("kong exited") }))
	if err != nil {
		t.Fatalf("the grammar is refused: %v", err)
	}
	_, err = p.Parse(args)
	return &g, err
}

// problemsOf returns the problems of an invalid configuration, failing the test on any other outcome.
func problemsOf(t *testing.T, err error) string {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("want an invalid configuration, got %v", err)
	}
	return cerr.Error()
}

// The variable names are a contract with the Helm chart, scripts and operators' manifests: renaming one
// breaks installs silently.
func TestVariableNamesAreTheContract(t *testing.T) {
	var g grammar
	p, err := NewParser(&g)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = kong.Visit(p.Model.Node, func(n kong.Visitable, next kong.Next) error {
		if f, ok := n.(*kong.Flag); ok {
			for _, env := range f.Envs {
				if !slices.Contains(got, env) {
					got = append(got, env)
				}
			}
		}
		return next(nil)
	})
	slices.Sort(got)
	want := []string{
		"HERALD_BEHIND_PROXY", "HERALD_BOT_TOKEN_KEY", "HERALD_CALLBACK_ALLOW_INSECURE", "HERALD_CALLBACK_ALLOW_PRIVATE", "HERALD_CALLBACK_CONCURRENCY",
		"HERALD_CALLBACK_ENDPOINT_CONCURRENCY", "HERALD_CALLBACK_SECRET_KEY",
		"HERALD_DATABASE_URL", "HERALD_DEEP_LINK_BASE", "HERALD_DEV_ADMINS", "HERALD_DEV_DATA_DIR", "HERALD_HTTP_ADDR",
		"HERALD_KAFKA_BROKERS", "HERALD_KAFKA_TOPIC_PREFIX", "HERALD_LEADER_ELECT", "HERALD_LEADER_ELECTION_NAMESPACE",
		"HERALD_LOG_FORMAT", "HERALD_LOG_LEVEL", "HERALD_MAX_CONNECTIONS", "HERALD_MAX_IN_FLIGHT", "HERALD_MAX_IN_FLIGHT_BYTES", "HERALD_MESSENGER_API_URL", "HERALD_MESSENGER_BOT_TOKEN",
		"HERALD_MESSENGER_BOT_USERNAME", "HERALD_MESSENGER_PER_CHAT_INTERVAL", "HERALD_MESSENGER_RATE_LIMIT",
		"HERALD_METRICS_ADDR", "HERALD_METRICS_CERT_DIR", "HERALD_METRICS_SECURE", "HERALD_ORPHAN_GRACE_PERIOD", "HERALD_PG_BIN", "HERALD_PHONE_HASH_KEY",
		"HERALD_PPROF_ADDR", "HERALD_PROBE_ADDR", "HERALD_PUBLIC_URL", "HERALD_RESYNC_PERIOD", "HERALD_RETENTION_BODY_DAYS", "HERALD_RETENTION_CALLBACK_DAYS", "HERALD_RETENTION_EXPIRED",
		"HERALD_RETENTION_NOTIFICATION_DAYS", "HERALD_ROTATION_GRACE_PERIOD", "HERALD_SHUTDOWN_DELAY", "HERALD_SIM_PER_CHAT_RATE", "HERALD_SIM_WEBHOOK_PLAIN_HTTP", "HERALD_TENANT_REQUESTS_PER_SECOND",
		"HERALD_TENANT_SENDS_PER_SECOND", "HERALD_TRUSTED_PROXIES", "HERALD_WEBHOOK_SECRET", "HERALD_WEBHOOK_UPDATES", "HERALD_WORKER_BACKOFF_BASE",
		"HERALD_WORKER_BACKOFF_MAX", "HERALD_WORKER_BUFFER", "HERALD_WORKER_CONCURRENCY",
		"HERALD_WORKER_GROUP_ID", "HERALD_WORKER_LEASE", "HERALD_WORKER_MAX_ATTEMPTS",
	}
	if !slices.Equal(got, want) {
		t.Errorf("variables:\n got %v\nwant %v", got, want)
	}
}

func TestDefaultsAreSharedAndTyped(t *testing.T) {
	g, err := parse(t, "worker", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-token", "1:abc")
	if err != nil {
		t.Fatal(err)
	}
	w := g.Worker.Worker
	if w.HTTPAddr != ":8080" || w.KafkaTopicPrefix != "herald" || w.MessengerRateLimit != 30 || w.MessengerPerChatInterval != time.Second ||
		w.WorkerMaxAttempts != 8 || w.WorkerConcurrency != 256 || w.WorkerLease != 2*time.Minute || w.WorkerBackoffBase != 15*time.Second ||
		w.WorkerBackoffMax != 30*time.Minute || w.WorkerGroupID != "herald-workers" || w.MessengerAPIURL != "https://api.telegram.org" ||
		w.LogLevel != "info" || w.LogFormat != "json" {
		t.Errorf("worker defaults: %+v", w)
	}
	g, err = parse(t, "operator", "--database-url", "postgres://u@h/db")
	if err != nil {
		t.Fatal(err)
	}
	o := g.Operator.Operator
	if o.MetricsAddr != ":8443" || !o.MetricsSecure || o.ProbeAddr != ":8081" || o.LeaderElect || o.RotationGracePeriod != 24*time.Hour ||
		o.ResyncPeriod != 5*time.Minute || o.OrphanGracePeriod != 10*time.Minute {
		t.Errorf("operator defaults: %+v", o)
	}
}

func TestEnvironmentSetsValuesAndFlagsWin(t *testing.T) {
	t.Setenv("HERALD_KAFKA_TOPIC_PREFIX", "from-env")
	t.Setenv("HERALD_MESSENGER_RATE_LIMIT", "12.5")
	t.Setenv("HERALD_KAFKA_BROKERS", " k1:9092, ,k2:9092 ")
	t.Setenv("HERALD_LEADER_ELECT", "true")
	t.Setenv("HERALD_DATABASE_URL", "postgres://u@h/db")
	t.Setenv("HERALD_MESSENGER_BOT_TOKEN", "1:abc")
	g, err := parse(t, "worker", "--http-addr", ":9999")
	if err != nil {
		t.Fatal(err)
	}
	w := g.Worker.Worker
	if w.KafkaTopicPrefix != "from-env" || w.MessengerRateLimit != 12.5 || w.HTTPAddr != ":9999" || !slices.Equal(w.Brokers(), []string{"k1:9092", "k2:9092"}) {
		t.Errorf("got prefix %q rate %v addr %q brokers %q", w.KafkaTopicPrefix, w.MessengerRateLimit, w.HTTPAddr, w.KafkaBrokers)
	}
	g, err = parse(t, "worker", "--kafka-topic-prefix", "from-flag", "--messenger-rate-limit=7")
	if err != nil || g.Worker.KafkaTopicPrefix != "from-flag" || g.Worker.MessengerRateLimit != 7 {
		t.Errorf("the flag must win over the environment: %q %v %v", g.Worker.KafkaTopicPrefix, g.Worker.MessengerRateLimit, err)
	}
	g, err = parse(t, "operator")
	if err != nil || !g.Operator.LeaderElect {
		t.Errorf("HERALD_LEADER_ELECT=true: %v %v", g.Operator.LeaderElect, err)
	}
	if g, err = parse(t, "operator", "--leader-elect=false"); err != nil || g.Operator.LeaderElect {
		t.Errorf("--leader-elect=false must win over HERALD_LEADER_ELECT=true: %v %v", g.Operator.LeaderElect, err)
	}
}

func TestEveryProblemIsReportedAtOnceNamingTheVariableAndTheFlag(t *testing.T) {
	t.Setenv("HERALD_WORKER_MAX_ATTEMPTS", "many")
	t.Setenv("HERALD_WORKER_LEASE", "long")
	t.Setenv("HERALD_DEV_ADMINS", "12,abc")
	t.Setenv("HERALD_WEBHOOK_SECRET", "bad secret!")
	_, err := parse(t, "webhook", "--database-url", "mysql://x", "--kafka-brokers", "nohost", "--phone-hash-key", "short",
		"--log-level", "loud", "--updates", "carrier-pigeon", "--shutdown-delay", "2m")
	msg := problemsOf(t, err)
	for _, want := range []string{
		`HERALD_DEV_ADMINS (--dev-admins): "abc" is not a messenger user id`,
		"HERALD_DATABASE_URL (--database-url): must be a postgres:// URL",
		`HERALD_KAFKA_BROKERS (--kafka-brokers): broker "nohost" needs a port`,
		"HERALD_PHONE_HASH_KEY (--phone-hash-key):",
		"HERALD_LOG_LEVEL (--log-level):",
		"HERALD_WEBHOOK_UPDATES (--updates): must be webhook or polling",
		"HERALD_SHUTDOWN_DELAY (--shutdown-delay): must be between 0s and 1m",
		// --updates is not polling, so the secret is checked, and the bot token is not.
		"HERALD_WEBHOOK_SECRET (--webhook-secret): must be 16-256 characters",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	// The worker's variables are no concern of the webhook, and secrets are never echoed.
	for _, unwanted := range []string{"HERALD_WORKER_MAX_ATTEMPTS", "HERALD_MESSENGER_BOT_TOKEN", "bad secret!"} {
		if strings.Contains(msg, unwanted) {
			t.Errorf("the error says %q:\n%s", unwanted, msg)
		}
	}

	_, err = parse(t, "worker", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-token", "1:abc",
		"--worker-backoff-base", "1m", "--worker-backoff-max", "30s")
	msg = problemsOf(t, err)
	for _, want := range []string{
		`HERALD_WORKER_MAX_ATTEMPTS (--worker-max-attempts): "many" is not an integer`,
		`HERALD_WORKER_LEASE (--worker-lease): "long" is not a duration`,
		"HERALD_WORKER_BACKOFF_MAX (--worker-backoff-max): must not be shorter than HERALD_WORKER_BACKOFF_BASE (1m0s)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
}

func TestAFlagWinsOverAVariableThatDoesNotParse(t *testing.T) {
	t.Setenv("HERALD_WORKER_MAX_ATTEMPTS", "many")
	g, err := parse(t, "worker", "--worker-max-attempts", "3", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092",
		"--messenger-bot-token", "1:abc")
	if err != nil || g.Worker.WorkerMaxAttempts != 3 {
		t.Errorf("got %d, %v", g.Worker.WorkerMaxAttempts, err)
	}
}

func TestAnEmptyTypedVariableMeansTheDefault(t *testing.T) {
	for _, env := range []string{"HERALD_WORKER_LEASE", "HERALD_WORKER_MAX_ATTEMPTS", "HERALD_MESSENGER_RATE_LIMIT", "HERALD_LEADER_ELECT"} {
		t.Setenv(env, "")
	}
	g, err := parse(t, "worker", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-token", "1:abc")
	if err != nil || g.Worker.WorkerLease != 2*time.Minute || g.Worker.WorkerMaxAttempts != 8 || g.Worker.MessengerRateLimit != 30 {
		t.Errorf("got %+v, %v", g.Worker.Delivery, err)
	}
}

func TestAMalformedFlagIsAUsageError(t *testing.T) {
	_, err := parse(t, "worker", "--worker-max-attempts", "lots")
	var perr *kong.ParseError
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), "--worker-max-attempts") {
		t.Errorf("got %v", err)
	}
}

func TestWebhookPollingNeedsTheBotAPIInsteadOfTheSecret(t *testing.T) {
	t.Setenv("HERALD_WEBHOOK_SECRET", "")
	t.Setenv("HERALD_MESSENGER_BOT_TOKEN", "")
	_, err := parse(t, "webhook", "--updates", "polling")
	msg := problemsOf(t, err)
	if !strings.Contains(msg, "HERALD_MESSENGER_BOT_TOKEN") || strings.Contains(msg, "HERALD_WEBHOOK_SECRET") {
		t.Errorf("polling configuration error:\n%s", msg)
	}
}

func TestDevChecksOnlyWhatIsGivenAndHasItsOwnDefaults(t *testing.T) {
	for _, env := range []string{"HERALD_DATABASE_URL", "HERALD_KAFKA_BROKERS", "HERALD_WEBHOOK_SECRET", "HERALD_PHONE_HASH_KEY",
		"HERALD_MESSENGER_API_URL", "HERALD_MESSENGER_BOT_TOKEN", "HERALD_MESSENGER_BOT_USERNAME", "HERALD_LOG_FORMAT"} {
		unsetenv(t, env)
	}
	g, err := parse(t, "dev")
	if err != nil {
		t.Fatalf("herald dev on embedded defaults: %v", err)
	}
	if g.Dev.MessengerAPIURL != "" || g.Dev.LogFormat != "text" || g.Dev.DataDir != ".dev" {
		t.Errorf("dev defaults: api url %q (want the simulator), log format %q, data dir %q", g.Dev.MessengerAPIURL, g.Dev.LogFormat, g.Dev.DataDir)
	}
	// The other commands keep theirs.
	if g, _ := parse(t, "set-url", "--messenger-bot-token", "1:a", "--webhook-secret", "s"); g.SetURL.MessengerAPIURL != "https://api.telegram.org" || g.SetURL.LogFormat != "json" {
		t.Errorf("set-url defaults: %q %q", g.SetURL.MessengerAPIURL, g.SetURL.LogFormat)
	}
	_, err = parse(t, "dev", "--messenger-api-url", "https://api.telegram.org", "--phone-hash-key", "short")
	msg := problemsOf(t, err)
	for _, want := range []string{"HERALD_MESSENGER_BOT_TOKEN", "HERALD_MESSENGER_BOT_USERNAME", "HERALD_PHONE_HASH_KEY"} {
		if !strings.Contains(msg, want) {
			t.Errorf("a real platform needs a real bot, and a given key is checked: %s missing from\n%s", want, msg)
		}
	}
}

// The callback key seals every endpoint's secret: herald callbacks refuses to start without a well-formed
// one, the ingress without one starts (an installation without callbacks keeps its API; the routes that
// make a secret answer 503) but refuses a malformed one, and neither quotes it. herald dev generates one and allows http:// and private
// addresses (its receiver is the simulator on 127.0.0.1); nothing else does unless told.
func TestCallbackSettings(t *testing.T) {
	unsetenv(t, "HERALD_CALLBACK_SECRET_KEY")
	key := "0DWOf8Sl5yhEBDaqE1T0mhK7G8EH5lbSQ2f06vZAUVs="
	for _, command := range []string{"ingress", "callbacks"} {
		args := []string{command, "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-username", "bot"}
		if command == "callbacks" {
			args = args[:3]
		}
		g, err := parse(t, args...)
		switch command {
		case "callbacks":
			if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_CALLBACK_SECRET_KEY (--callback-secret-key): must be the standard base64 of 32 random bytes") {
				t.Errorf("%s without a key:\n%s", command, msg)
			}
		default:
			if err != nil || g.Ingress.Key() != nil {
				t.Errorf("%s without a key: %v (key %v), want it to start without one", command, err, g.Ingress.Key())
			}
		}
		_, err = parse(t, append(args, "--callback-secret-key", "not-a-key-but-a-secret-all-the-same")...)
		if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_CALLBACK_SECRET_KEY") || strings.Contains(msg, "not-a-key") {
			t.Errorf("%s quotes the key:\n%s", command, msg)
		}
		g, err = parse(t, append(args, "--callback-secret-key", key)...)
		if err != nil {
			t.Fatalf("%s with a key: %v", command, err)
		}
		// While the key is rotated: a list, the first sealing.
		if _, err := parse(t, append(args, "--callback-secret-key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,"+key)...); err != nil {
			t.Errorf("%s with a list of two keys: %v", command, err)
		}
		_, err = parse(t, append(args, "--callback-secret-key", key+",not-a-key-but-a-secret-all-the-same")...)
		if msg := problemsOf(t, err); !strings.Contains(msg, "comma-separated list") || strings.Contains(msg, "not-a-key") || strings.Contains(msg, key) {
			t.Errorf("%s with a malformed list:\n%s", command, msg)
		}
		p := g.Ingress.Policy()
		if command == "callbacks" {
			p = g.Callback.Policy()
			if g.Callback.CallbackConcurrency != 256 || g.Callback.CallbackEndpointConcurrency != 8 {
				t.Errorf("callbacks defaults: %+v", g.Callback.CallbackSending)
			}
		}
		if p.AllowInsecure || p.AllowPrivate {
			t.Errorf("%s allows http or private addresses by default: %+v", command, p)
		}
	}
	_, err := parse(t, "callbacks", "--database-url", "postgres://u@h/db", "--callback-secret-key", key,
		"--callback-concurrency", "4", "--callback-endpoint-concurrency", "5")
	if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_CALLBACK_ENDPOINT_CONCURRENCY") {
		t.Errorf("an endpoint may not take more than the sender: %s", msg)
	}
	for _, env := range []string{"HERALD_DATABASE_URL", "HERALD_KAFKA_BROKERS", "HERALD_WEBHOOK_SECRET", "HERALD_PHONE_HASH_KEY",
		"HERALD_MESSENGER_API_URL", "HERALD_MESSENGER_BOT_TOKEN", "HERALD_MESSENGER_BOT_USERNAME", "HERALD_CALLBACK_ALLOW_PRIVATE"} {
		unsetenv(t, env)
	}
	g, err := parse(t, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if p := g.Dev.Policy(); !p.AllowInsecure || !p.AllowPrivate {
		t.Errorf("dev policy %+v, want both allowed", p)
	}
	if g, err := parse(t, "dev", "--callback-allow-private=false"); err != nil || g.Dev.Policy().AllowPrivate {
		t.Errorf("dev --callback-allow-private=false: %+v %v", g.Dev.Policy(), err)
	}
	if _, err := parse(t, "dev", "--callback-secret-key", "short"); !strings.Contains(problemsOf(t, err), "HERALD_CALLBACK_SECRET_KEY") {
		t.Error("dev does not check a key it is given")
	}
}

func TestValidConfigurationPasses(t *testing.T) {
	g, err := parse(t, "webhook", "--webhook-secret", "s3cr3t_-s3cr3t_-", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k1:9092, k2:9092",
		"--phone-hash-key", "0123456789abcdef", "--dev-admins", "1, 2")
	if err != nil {
		t.Fatalf("valid configuration rejected: %v", err)
	}
	if b := g.Webhook.Brokers(); len(b) != 2 || b[1] != "k2:9092" {
		t.Errorf("brokers %v", b)
	}
	if ids := g.Webhook.DevAdmins; len(ids) != 2 || ids[1] != 2 {
		t.Errorf("dev admins %v", ids)
	}
}

// Every command's settings have a check, or NewParser refuses the grammar: a command that read settings
// without checking them would start on whatever it was given.
func TestAGrammarWithAnUncheckedCommandIsRefused(t *testing.T) {
	var g struct {
		Cmd struct{ Database } `cmd:""`
		Two struct {
			Log
			Database
		} `cmd:""`
	}
	if _, err := NewParser(&g); err == nil || !strings.Contains(err.Error(), "two") {
		t.Errorf("got %v", err)
	}
}

func TestSettingsTableListsEveryVariableOnce(t *testing.T) {
	var g grammar
	p, err := NewParser(&g)
	if err != nil {
		t.Fatal(err)
	}
	table := SettingsTable(p.Model)
	for _, want := range []string{
		"| `HERALD_LOG_FORMAT` | `--log-format` | log format: json or text | `json` (dev: `text`) |",
		"| `HERALD_MESSENGER_API_URL` | `--messenger-api-url` | Bot API base URL | `https://api.telegram.org` (dev: the simulator) | webhook, set-url, worker, operator, dev |",
		"| `HERALD_PPROF_ADDR` |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	if n := strings.Count(table, "`HERALD_DATABASE_URL`"); n != 1 {
		t.Errorf("HERALD_DATABASE_URL is in %d rows", n)
	}
}

func TestUpdateDocsKeepsTheProse(t *testing.T) {
	doc := "# Title\n\nprose\n\n" + docsBegin + "\nold table\n" + docsEnd + "\n\nmore prose\n"
	got, err := UpdateDocs(doc, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Title\n\nprose\n\n" + docsBegin + "\nnew table\n" + docsEnd + "\n\nmore prose\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := UpdateDocs("no markers", "t"); err == nil {
		t.Error("a document without markers was accepted")
	}
}

// unsetenv removes a variable for the test (t.Setenv can only set one).
func unsetenv(t *testing.T, env string) {
	t.Helper()
	t.Setenv(env, "")
	if err := os.Unsetenv(env); err != nil {
		t.Fatal(err)
	}
}
