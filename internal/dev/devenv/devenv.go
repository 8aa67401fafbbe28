// Package devenv is `herald dev`: the whole gateway in one process for a laptop. The tenant API, the
// webhook and the messenger simulator (with its callback receiver) share one listen address; a delivery
// worker and the callback sender run beside them; a private PostgreSQL (kept in the data directory between
// runs) and an embedded Kafka broker stand in for the real ones unless their URLs are given.
package devenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/console"
	"github.com/heraldhq/herald/internal/dev/kafkalocal"
	"github.com/heraldhq/herald/internal/dev/pglocal"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/retention"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/updates"
)

// Options configure the dev environment. Empty URLs mean "embedded".
type Options struct {
	HTTPAddr        string
	DataDir         string // holds postgres/ and secrets.json; kept between runs
	DatabaseURL     string
	KafkaBrokers    []string
	TopicPrefix     string
	MessengerAPIURL string // empty: the simulator, on HTTPAddr
	BotToken        string
	BotUsername     string
	DeepLinkBase    string
	WebhookSecret   string // empty: generated and kept in secrets.json
	PhoneHashKey    string // empty: generated and kept in secrets.json
	// CallbackSecretKey seals the callback endpoints' secrets; empty: generated and kept in secrets.json.
	CallbackSecretKey string
	// BotTokenKey seals the tokens of tenants' own bots; empty: generated and kept in secrets.json.
	BotTokenKey string
	// CallbackPolicy: herald dev allows http:// and private addresses, so that callbacks can reach the
	// simulator's receiver on 127.0.0.1.
	CallbackPolicy egress.Policy
	// CallbackConcurrency and CallbackEndpointConcurrency bound the sender's attempts in flight, in all and
	// per endpoint; 0: the sender's defaults.
	CallbackConcurrency         int
	CallbackEndpointConcurrency int
	PGBin                       string // the PostgreSQL server binaries; empty: found (pglocal.FindBinaries)
	RateLimit                   float64
	// TenantSendsPerSecond and TenantRequestsPerSecond are the default tenant limits.
	TenantSendsPerSecond    float64
	TenantRequestsPerSecond float64
	DevAdmins               []int64
	Retention               store.RetentionPolicy // the purge runs here too; zero: store.DefaultRetention
	Logger                  *slog.Logger
	Stdout                  io.Writer // where the walkthrough goes
}

// secrets are generated once and kept in DataDir so links, phone digests and the demo key survive restarts.
type secrets struct {
	WebhookSecret string `json:"webhook_secret"`
	PhoneHashKey  string `json:"phone_hash_key"`
	// CallbackSecretKey was added later: a secrets.json without it gets one, the rest unchanged.
	CallbackSecretKey string `json:"callback_secret_key"`
	// BotTokenKey likewise.
	BotTokenKey string `json:"bot_token_key"`
	DemoKey     string `json:"demo_key,omitempty"`
	// ShopBotToken is the simulator's token of the second demo tenant's own bot: kept, so that the bot keeps
	// its id, and the links made through it stay valid, across runs.
	ShopBotToken string `json:"shop_bot_token"`
	ShopKey      string `json:"shop_key,omitempty"`
}

// Run starts everything and blocks until ctx is done, then stops it all cleanly.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("while creating the data directory %s: %w", o.DataDir, err)
	}
	lock, err := lockDataDir(o.DataDir)
	if errors.Is(err, ErrAlreadyRunning) {
		return fmt.Errorf("%w (%s): stop it, or give this one its own --data-dir (HERALD_DEV_DATA_DIR) and --http-addr", err, o.DataDir)
	}
	if err != nil {
		return err
	}
	defer lock.Close()
	sec, err := loadSecrets(filepath.Join(o.DataDir, "secrets.json"))
	if err != nil {
		return err
	}
	if o.WebhookSecret == "" {
		o.WebhookSecret = sec.WebhookSecret
	}
	if o.PhoneHashKey == "" {
		o.PhoneHashKey = sec.PhoneHashKey
	}
	if o.CallbackSecretKey == "" {
		o.CallbackSecretKey = sec.CallbackSecretKey
	}
	callbackKey, err := signing.ParseKey(o.CallbackSecretKey)
	if err != nil {
		return fmt.Errorf("HERALD_CALLBACK_SECRET_KEY %w", err)
	}
	if o.BotTokenKey == "" {
		o.BotTokenKey = sec.BotTokenKey
	}
	botKey, err := signing.ParseKey(o.BotTokenKey)
	if err != nil {
		return fmt.Errorf("HERALD_BOT_TOKEN_KEY %w", err)
	}

	// PostgreSQL.
	if o.DatabaseURL == "" {
		// The lock is ours, so a server running on the directory was left by a run that was killed.
		pg, err := pglocal.Start(ctx, pglocal.Options{Dir: filepath.Join(o.DataDir, "postgres"), BinDir: o.PGBin, Durable: true, ReplaceRunning: true})
		if err != nil {
			if errors.Is(err, pglocal.ErrNoBinaries) {
				return fmt.Errorf("%w\n(or set HERALD_DATABASE_URL to use an existing PostgreSQL)", err)
			}
			return fmt.Errorf("while starting the private PostgreSQL: %w", err)
		}
		defer func() {
			if err := pg.Stop(); err != nil {
				log.Warn("stopping PostgreSQL", "err", err)
			}
		}()
		if err := pg.CreateDatabase(ctx, "herald", ""); err != nil && !strings.Contains(err.Error(), "already exists") {
			return err
		}
		o.DatabaseURL = pg.URL("herald")
		log.Info("private PostgreSQL running", "url", o.DatabaseURL, "data", filepath.Join(o.DataDir, "postgres"))
	}
	if err := store.Migrate(ctx, o.DatabaseURL); err != nil {
		return err
	}
	st, err := store.Open(ctx, o.DatabaseURL, 32)
	if err != nil {
		return err
	}
	defer st.Close()

	// Kafka.
	if len(o.KafkaBrokers) == 0 {
		b, err := kafkalocal.Start(o.TopicPrefix, 0, 4)
		if err != nil {
			return err
		}
		defer b.Close()
		o.KafkaBrokers = b.Addrs()
		log.Info("embedded Kafka broker running", "brokers", o.KafkaBrokers)
	} else if err := queue.EnsureTopics(ctx, o.KafkaBrokers, o.TopicPrefix, queue.DefaultPartitions, 1); err != nil {
		log.Warn("could not ensure topics", "err", err)
	}
	producer := queue.NewProducer(o.KafkaBrokers, o.TopicPrefix)
	defer producer.Close()

	// One listener for the API, the webhook and the simulator.
	ln, err := net.Listen("tcp", o.HTTPAddr)
	if err != nil {
		return fmt.Errorf("while listening on %s: %w", o.HTTPAddr, err)
	}
	warnIfExposed(log, ln.Addr())
	base := "http://" + loopbackAddr(ln.Addr())
	checks := []server.ReadyCheck{{Name: "postgresql", Check: st.Ping},
		{Name: "kafka", Check: func(ctx context.Context) error { return queue.Ping(ctx, o.KafkaBrokers) }}}
	router := server.NewRouter(log, checks...)

	var simulator *sim.Server
	polling := o.MessengerAPIURL != ""
	if !polling {
		// WebhookPlainHTTP: the admin CLI registers a tenant's bot only at an https URL (the platform calls
		// no other), and herald dev serves plain http; so the simulator posts to https://<our address> over
		// http, as a load balancer terminating TLS would, and --print-env gives the CLI that URL.
		simulator = sim.New(sim.Options{Token: o.BotToken, BotUsername: o.BotUsername, GlobalRate: o.RateLimit, Logger: log.With("component", "sim"),
			CallbackSecrets: receiverSecrets(st, callbackKey), WebhookPlainHTTP: true})
		defer simulator.Close()
		o.BotToken, o.BotUsername, o.MessengerAPIURL = simulator.Token(), simulator.BotUsername(), base
		// On a developer's machine: no name but an address or localhost (DNS rebinding), as the console.
		local := router.With(server.LocalOnly)
		local.Handle("/bot*", simulator)
		local.Handle("/sim", simulator)
		local.Handle("/sim/*", simulator)
	}
	client := messenger.New(o.MessengerAPIURL, o.BotToken, nil)
	// The tenants' own bots, for the webhook (their secrets), the poller and the worker (their tokens).
	bots := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: botKey, APIURL: o.MessengerAPIURL, Shared: client,
		Logger: log.With("component", "bots")})

	ob := outbox.New(st, producer, outbox.Options{Logger: log})
	defer ob.Close()
	api := ingress.New(st, ob, log.With("component", "ingress"), ingress.Options{DeepLinkBase: o.DeepLinkBase, BotUsername: o.BotUsername,
		SendsPerSecond: o.TenantSendsPerSecond, RequestsPerSecond: o.TenantRequestsPerSecond,
		CallbackKey: callbackKey, CallbackPolicy: o.CallbackPolicy})
	api.Routes(router)
	receiver := updates.New(st, ob, updates.Options{
		Secret: o.WebhookSecret, PhoneHashKey: []byte(o.PhoneHashKey), DevAdmins: o.DevAdmins, Bots: bots, Logger: log.With("component", "webhook")})
	defer receiver.Close()
	receiver.Routes(router)

	worker, err := delivery.New(delivery.Options{Store: st, Sender: client, Bots: bots, Brokers: o.KafkaBrokers, TopicPrefix: o.TopicPrefix,
		Outbox: ob, Logger: log.With("component", "worker"), RateLimit: o.RateLimit})
	if err != nil {
		return err
	}

	callbacks, err := callback.New(callback.Options{Store: st, Key: callbackKey, Policy: o.CallbackPolicy,
		Concurrency: o.CallbackConcurrency, EndpointConcurrency: o.CallbackEndpointConcurrency,
		Logger: log.With("component", "callbacks"), PollInterval: 200 * time.Millisecond, GracePeriod: 5 * time.Second})
	if err != nil {
		return err
	}

	demoKey, err := ensureDemoTenant(ctx, st, sec, filepath.Join(o.DataDir, "secrets.json"))
	if err != nil {
		return err
	}
	sec.DemoKey = demoKey
	// The second demo tenant has a bot of its own, which only the simulator can play.
	var shop *shopTenant
	if simulator != nil {
		if shop, err = ensureShopTenant(ctx, st, simulator, sec, filepath.Join(o.DataDir, "secrets.json")); err != nil {
			return err
		}
	}
	in := instance{APIBase: base, DatabaseURL: o.DatabaseURL, DemoKey: demoKey, BotTokenKey: o.BotTokenKey}
	if simulator != nil {
		in.MessengerAPIURL, in.PublicURL = base, "https://"+loopbackAddr(ln.Addr())
	}
	if err := writeInstance(o.DataDir, in); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(o.DataDir, instanceFile))

	// The dev console, at / (herald dev only: it hands out the demo key).
	cons := console.New(console.Options{Store: st, Sim: simulator, TenantID: "demo", APIKey: demoKey, BotUsername: o.BotUsername,
		Logger: log.With("component", "console")})
	cons.Routes(router)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return server.ServeListener(gctx, ln, router, log) })
	g.Go(func() error {
		server.WatchDependencies(gctx, log, server.DependencyCheckInterval, checks...)
		return nil
	})
	g.Go(func() error { return bots.Run(gctx, 0) })
	g.Go(func() error { return worker.Run(gctx) })
	g.Go(func() error { return callbacks.Run(gctx) })
	g.Go(func() error {
		if polling {
			// A real bot without a public URL: long-poll its updates (and those of any tenant's own bot).
			printWalkthrough(o.Stdout, walkthrough{Base: base, Key: demoKey, DatabaseURL: o.DatabaseURL, DataDir: o.DataDir})
			return updates.PollBots(gctx, client, bots, receiver, log.With("component", "webhook"))
		}
		// The simulator delivers updates to our own webhook, with the secret header.
		if err := updates.SetWebhookURL(gctx, client, base+updates.Path, o.WebhookSecret); err != nil {
			return fmt.Errorf("while registering the webhook with the simulator: %w", err)
		}
		w := walkthrough{Base: base, Key: demoKey, Simulated: true, DatabaseURL: o.DatabaseURL, DataDir: o.DataDir}
		if shop != nil {
			// Registered as the admin CLI registers a bot, its webhook at ours (the simulator forgot it).
			username, err := shop.register(gctx, st, bots, o.MessengerAPIURL, botKey, base)
			if err != nil {
				return err
			}
			w.ShopKey, w.ShopBot = shop.key, username
		}
		printWalkthrough(o.Stdout, w)
		<-gctx.Done()
		return nil
	})
	if o.Retention == (store.RetentionPolicy{}) {
		o.Retention = store.DefaultRetention
	}
	purger := retention.New(retention.Options{Store: st, Policy: o.Retention, Logger: log.With("component", "retention")})
	g.Go(func() error { return purger.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		cons.Close() // end the event streams, so the server's shutdown does not wait for the pages
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) || errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("stopped")
	return err
}

// ensureDemoTenant creates the demo tenant and key on the first run. The demo key is kept in the dev data
// directory so the walkthrough can show it on every run: a convenience of `herald dev` only — production
// never keeps a key in clear.
func ensureDemoTenant(ctx context.Context, st *store.Store, sec secrets, path string) (string, error) {
	tenants, err := st.ListTenants(ctx)
	if err != nil {
		return "", err
	}
	if len(tenants) > 0 {
		return sec.DemoKey, nil
	}
	if err := st.CreateTenant(ctx, "demo", "Demo Developer"); err != nil {
		return "", err
	}
	label := "Demo App"
	k := apikey.New()
	if _, err := st.InsertAPIKey(ctx, "demo", k.Digest, k.Prefix, &label, nil); err != nil {
		return "", err
	}
	sec.DemoKey = k.Secret
	return k.Secret, saveSecrets(path, sec)
}

// The second demo tenant, with a bot of its own.
const (
	shopTenantID = "shop"
	shopLabel    = "Demo Shop"
	shopBotName  = "demo_shop_bot"
	// shopBotID is its bot's id in the simulator: below the ids the simulator gives bots made without one.
	shopBotID = 7_000_000_000
)

// shopTenant is the second demo tenant: its key (empty when it was made by a run whose secrets.json is
// gone) and its bot's token in the simulator.
type shopTenant struct {
	key, botToken string
}

// ensureShopTenant creates the second demo tenant, with its key, on the first run that has the demo tenant
// (also on a data directory made before it existed), and gives the simulator its bot, with the token kept
// in secrets.json.
func ensureShopTenant(ctx context.Context, st *store.Store, simulator *sim.Server, sec secrets, path string) (*shopTenant, error) {
	if _, err := st.GetTenant(ctx, "demo"); errors.Is(err, store.ErrNotFound) {
		return nil, nil // not herald dev's database: leave it alone, as ensureDemoTenant does
	} else if err != nil {
		return nil, err
	}
	if _, err := simulator.CreateBot(sim.BotConfig{Token: sec.ShopBotToken, Username: shopBotName, FirstName: shopLabel}); err != nil {
		return nil, fmt.Errorf("while giving the simulator the second demo tenant's bot: %w", err)
	}
	switch _, err := st.GetTenant(ctx, shopTenantID); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		return &shopTenant{key: sec.ShopKey, botToken: sec.ShopBotToken}, nil
	}
	if err := st.CreateTenant(ctx, shopTenantID, "Demo Shop Developer"); err != nil {
		return nil, err
	}
	label := shopLabel
	k := apikey.New()
	if _, err := st.InsertAPIKey(ctx, shopTenantID, k.Digest, k.Prefix, &label, nil); err != nil {
		return nil, err
	}
	sec.ShopKey = k.Secret
	return &shopTenant{key: k.Secret, botToken: sec.ShopBotToken}, saveSecrets(path, sec)
}

// register registers the tenant's bot with the simulator at apiURL as the admin CLI does (getMe, setWebhook
// at publicURL/messenger/webhook/{id} with a fresh secret, the token sealed under key) and makes the
// tenant send through it. The registry reads it at once, so that the bot's first update finds its secret.
func (s *shopTenant) register(ctx context.Context, st *store.Store, bots *bot.Registry, apiURL string, key *signing.Key, publicURL string) (string, error) {
	r, err := bot.NewRegistrar(apiURL, nil, key, publicURL)
	if err != nil {
		return "", err
	}
	b, err := r.Register(ctx, s.botToken, bot.Settings{})
	if err != nil {
		return "", fmt.Errorf("while registering the second demo tenant's bot with the simulator: %w", err)
	}
	if err := st.UpsertBot(ctx, b); err != nil {
		return "", err
	}
	if _, err := st.SetTenantBot(ctx, shopTenantID, b.ID); err != nil {
		return "", err
	}
	return b.Username, bots.Refresh(ctx)
}

func loadSecrets(path string) (secrets, error) {
	var s secrets
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("while reading %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	changed := false
	for _, v := range []*string{&s.WebhookSecret, &s.PhoneHashKey} {
		if *v == "" {
			*v, changed = randomString(32), true
		}
	}
	for _, k := range []*string{&s.CallbackSecretKey, &s.BotTokenKey} {
		if *k == "" {
			*k, changed = signing.GenerateKey(), true
		}
	}
	if s.ShopBotToken == "" {
		s.ShopBotToken, changed = strconv.FormatInt(shopBotID, 10)+":"+randomString(24), true
	}
	if changed {
		return s, saveSecrets(path, s)
	}
	return s, nil
}

// receiverPath is where the simulator takes callbacks.
const receiverPath = "/sim/callbacks"

// receiverSecrets gives the simulator's callback receiver the secrets of every endpoint that points at it,
// so that GET /sim/callbacks shows whether each signature verifies.
func receiverSecrets(st *store.Store, key *signing.Key) func(ctx context.Context) ([]signing.Secret, error) {
	return func(ctx context.Context) ([]signing.Secret, error) {
		sealed, err := st.CallbackSecretsByURL(ctx, "%"+receiverPath)
		if err != nil {
			return nil, err
		}
		var out []signing.Secret
		for _, s := range sealed {
			if sec, err := key.Open(s.Sealed, s.EndpointID); err == nil {
				out = append(out, sec)
			}
		}
		return out, nil
	}
}

func saveSecrets(path string, s secrets) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("while writing %s: %w", path, err)
	}
	return nil
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// warnIfExposed warns when herald dev listens beyond loopback: its simulator's control API (/sim) lets
// anyone act as any messenger user, and the demo tenant's key is kept in the data directory. It is meant for
// one developer's machine.
func warnIfExposed(log *slog.Logger, a net.Addr) {
	tcp, ok := a.(*net.TCPAddr)
	if ok && tcp.IP.IsLoopback() {
		return
	}
	log.Warn("herald dev is listening beyond loopback: anyone who can reach this address can use the unauthenticated "+
		"simulator control API (/sim) and the tenant API with the demo key; keep it on 127.0.0.1 unless you mean it",
		"addr", a.String())
}

// loopbackAddr turns a wildcard listen address into one a local client can dial.
func loopbackAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
