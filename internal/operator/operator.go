// Package operator runs the Herald operator: a controller-runtime manager with the Tenant and ApiKey
// reconcilers, leader election, metrics and health probes. `herald operator` calls Run.
package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/controllers"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

// Defaults of Options.
const (
	DefaultMetricsAddr         = ":8443"
	DefaultProbeAddr           = ":8081"
	DefaultLeaderElectionID    = "herald-operator.notify.herald.dev"
	DefaultRotationGracePeriod = 24 * time.Hour
	DefaultResyncPeriod        = 5 * time.Minute
	DefaultOrphanGracePeriod   = 10 * time.Minute
	DefaultMaxDBConns          = 4
)

// Options configure the operator. Zero values take the defaults above.
type Options struct {
	// DatabaseURL is the PostgreSQL URL of the key store (HERALD_DATABASE_URL). Required.
	DatabaseURL string
	// MetricsAddr serves Prometheus metrics at /metrics; "0" disables it. They are served over HTTPS to
	// callers whose bearer token the API server authenticates (TokenReview) and authorizes for a get of
	// the non-resource URL /metrics (SubjectAccessReview), unless InsecureMetrics.
	MetricsAddr string
	// InsecureMetrics serves /metrics over plain HTTP to anyone who can reach it.
	InsecureMetrics bool
	// MetricsCertDir holds tls.crt and tls.key for /metrics, reloaded when they change; empty: a
	// self-signed certificate made at start.
	MetricsCertDir string
	// ProbeAddr serves /healthz and /readyz; "0" disables it.
	ProbeAddr string
	// LeaderElection makes replicas elect one active operator through a Lease.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease; empty: the namespace the pod runs in.
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// RotationGracePeriod is how long a rotated-out key keeps working before it is revoked.
	RotationGracePeriod time.Duration
	// ResyncPeriod is how often every object is checked against the key store, repairing changes made
	// to it by hand.
	ResyncPeriod time.Duration
	// OrphanGracePeriod is how long the keys of an ApiKey that no longer exists (deleted without its
	// finalizer) must be seen so before they are revoked.
	OrphanGracePeriod time.Duration
	// UsageRefreshPeriod is how often, at most, a Tenant's status.usage (its last day's counts) is read
	// and written; zero: one minute (controllers.DefaultUsageRefreshPeriod). Tests shorten it.
	UsageRefreshPeriod time.Duration
	// MaxDBConns caps the PostgreSQL connections.
	MaxDBConns int32
	// MessengerAPIURL is the Bot API base (HERALD_MESSENGER_API_URL) through which tenants' own bots
	// (Tenant spec.bot) are registered.
	MessengerAPIURL string
	// PublicURL is where the platform reaches the webhook component (HERALD_PUBLIC_URL): a tenant's bot
	// gets its updates at PublicURL/messenger/webhook/{bot_id}. Empty: tenants cannot bring their own
	// bots (BotReady=False, reason NotConfigured).
	PublicURL string
	// BotTokenKey seals the tokens of tenants' own bots in PostgreSQL (HERALD_BOT_TOKEN_KEY). nil: as an
	// empty PublicURL.
	BotTokenKey *signing.Key
	// RestConfig reaches the API server; nil: the in-cluster config or the kubeconfig
	// (ctrl.GetConfig: --kubeconfig, $KUBECONFIG, ~/.kube/config).
	RestConfig *rest.Config
	// Logger receives the manager's and the reconcilers' logs; zero: slog.Default().
	Logger logr.Logger

	// SkipControllerNameValidation lets several managers run in one process (tests only).
	SkipControllerNameValidation bool
}

func (o *Options) setDefaults() {
	if o.MetricsAddr == "" {
		o.MetricsAddr = DefaultMetricsAddr
	}
	if o.ProbeAddr == "" {
		o.ProbeAddr = DefaultProbeAddr
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.RotationGracePeriod == 0 {
		o.RotationGracePeriod = DefaultRotationGracePeriod
	}
	if o.ResyncPeriod == 0 {
		o.ResyncPeriod = DefaultResyncPeriod
	}
	if o.MaxDBConns == 0 {
		o.MaxDBConns = DefaultMaxDBConns
	}
	if o.OrphanGracePeriod == 0 {
		o.OrphanGracePeriod = DefaultOrphanGracePeriod
	}
	if o.UsageRefreshPeriod == 0 {
		o.UsageRefreshPeriod = controllers.DefaultUsageRefreshPeriod
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.FromSlogHandler(slog.Default().Handler())
	}
}

// Validate reports the first invalid option, in words an operator of the operator can act on.
func (o *Options) Validate() error {
	if o.DatabaseURL == "" {
		return errors.New("the database URL is required (HERALD_DATABASE_URL)")
	}
	return o.validateManager()
}

func (o *Options) validateManager() error {
	switch {
	case o.RotationGracePeriod < 0:
		return fmt.Errorf("the rotation grace period must not be negative, got %s", o.RotationGracePeriod)
	case o.ResyncPeriod < time.Second:
		return fmt.Errorf("the resync period must be at least 1s, got %s", o.ResyncPeriod)
	case o.OrphanGracePeriod < time.Second:
		return fmt.Errorf("the orphan grace period must be at least 1s, got %s", o.OrphanGracePeriod)
	case o.UsageRefreshPeriod < time.Second:
		return fmt.Errorf("the usage refresh period must be at least 1s, got %s", o.UsageRefreshPeriod)
	case o.MaxDBConns < 1:
		return fmt.Errorf("the maximum number of database connections must be at least 1, got %d", o.MaxDBConns)
	case o.MetricsCertDir != "" && o.InsecureMetrics:
		return errors.New("a metrics certificate directory needs secure metrics (--metrics-secure)")
	case o.MessengerAPIURL == "" && (o.PublicURL != "" || o.BotTokenKey != nil):
		return errors.New("tenants' own bots need the Bot API URL (HERALD_MESSENGER_API_URL)")
	}
	if o.MetricsCertDir != "" {
		// controller-runtime would quietly fall back to a self-signed certificate.
		for _, f := range []string{metricsCertName, metricsKeyName} {
			if _, err := os.Stat(filepath.Join(o.MetricsCertDir, f)); err != nil {
				return fmt.Errorf("the metrics certificate directory %s has no %s: %w", o.MetricsCertDir, f, err)
			}
		}
	}
	return nil
}

// Files of Options.MetricsCertDir, as a kubernetes.io/tls Secret (cert-manager's, for one) names them.
const (
	metricsCertName = "tls.crt"
	metricsKeyName  = "tls.key"
)

// The operator's own permissions for authenticating and authorizing scrapers of /metrics, and the
// ClusterRole a scraper's ServiceAccount is bound to:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:urls=/metrics,verbs=get,roleName=herald-operator-metrics-reader

// metricsOptions serves /metrics the way kubebuilder v4 scaffolds do: HTTPS with authentication and
// authorization by the API server, HTTP/1.1 only (HTTP/2 Rapid Reset, CVE-2023-44487).
func metricsOptions(o Options) metricsserver.Options {
	if o.InsecureMetrics {
		return metricsserver.Options{BindAddress: o.MetricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.MetricsAddr,
		SecureServing:  true,
		FilterProvider: metricsAuth,
		CertDir:        o.MetricsCertDir,
		CertName:       metricsCertName,
		KeyName:        metricsKeyName,
		TLSOpts:        []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}

// Run runs the operator until ctx is cancelled. PostgreSQL need not be up at start: reconcilers report
// its absence in the objects' status and retry.
func Run(ctx context.Context, opts Options) error {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	ctrl.SetLogger(opts.Logger)
	cfg := opts.RestConfig
	if cfg == nil {
		var err error
		if cfg, err = ctrl.GetConfig(); err != nil {
			return fmt.Errorf("while loading the Kubernetes client configuration: %w", err)
		}
	}
	st, err := store.OpenLazy(opts.DatabaseURL, opts.MaxDBConns)
	if err != nil {
		return err
	}
	defer st.Close()
	mgr, err := NewManager(cfg, st, opts)
	if err != nil {
		return err
	}
	opts.Logger.Info("starting the operator", "leaderElection", opts.LeaderElection, "secureMetrics", !opts.InsecureMetrics,
		"rotationGracePeriod", opts.RotationGracePeriod.String(), "resyncPeriod", opts.ResyncPeriod.String(),
		"orphanGracePeriod", opts.OrphanGracePeriod.String(), "tenantBots", opts.PublicURL != "" && opts.BotTokenKey != nil)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("while running the operator: %w", err)
	}
	return nil
}

// Scheme holds the types the operator reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := notifyv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// NewManager builds the manager with both reconcilers, the Secret watches and the orphan sweep on st; Run
// starts it. Tests use it to run the real
// manager against envtest.
func NewManager(cfg *rest.Config, st *store.Store, opts Options) (manager.Manager, error) {
	opts.setDefaults()
	if err := opts.validateManager(); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme(),
		Logger:                        opts.Logger,
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        opts.ProbeAddr,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Secrets are never cached: the operator may read them only in the namespaces it was granted, where
		// it reads them from the API server and watches their metadata (controllers.SecretWatcher).
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("while creating the manager: %w", err)
	}
	copts := controllers.ControllerOptions{SkipNameValidation: opts.SkipControllerNameValidation}
	secrets, err := controllers.NewSecretWatcher(cfg, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("while setting up the Secret watches: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, fmt.Errorf("while adding the Secret watches: %w", err)
	}
	// Without the key or the public URL no bot can be registered: a Tenant with spec.bot says so
	// (BotReady=False, NotConfigured) with the error naming what is missing.
	registrar, botsErr := bot.NewRegistrar(opts.MessengerAPIURL, nil, opts.BotTokenKey, opts.PublicURL)
	botStates := controllers.NewBotStateWatcher(st, opts.Logger)
	if err := mgr.Add(botStates); err != nil {
		return nil, fmt.Errorf("while adding the bot state watch: %w", err)
	}
	tenants := &controllers.TenantReconciler{
		Client:            mgr.GetClient(),
		APIReader:         mgr.GetAPIReader(),
		Store:             st,
		Recorder:          mgr.GetEventRecorder("herald-operator"),
		ResyncPeriod:      opts.ResyncPeriod,
		Bots:              registrar,
		BotsNotConfigured: botsErr,
		Secrets:           secrets,
		BotStates:         botStates,

		UsageRefreshPeriod: opts.UsageRefreshPeriod,
	}
	if err := tenants.SetupWithManager(context.Background(), mgr, copts); err != nil {
		return nil, fmt.Errorf("while setting up the Tenant controller: %w", err)
	}
	keys := &controllers.ApiKeyReconciler{
		Client:              mgr.GetClient(),
		APIReader:           mgr.GetAPIReader(),
		Store:               st,
		Recorder:            mgr.GetEventRecorder("herald-operator"),
		Secrets:             secrets,
		RotationGracePeriod: opts.RotationGracePeriod,
		ResyncPeriod:        opts.ResyncPeriod,
	}
	if err := keys.SetupWithManager(context.Background(), mgr, copts); err != nil {
		return nil, fmt.Errorf("while setting up the ApiKey controller: %w", err)
	}
	if err := mgr.Add(&controllers.OrphanSweeper{
		APIReader:   mgr.GetAPIReader(),
		Store:       st,
		Recorder:    mgr.GetEventRecorder("herald-operator"),
		Log:         opts.Logger.WithName("orphan-sweep"),
		GracePeriod: opts.OrphanGracePeriod,
	}); err != nil {
		return nil, fmt.Errorf("while adding the orphan sweep: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("while adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("key-store", func(req *http.Request) error { return st.Ping(req.Context()) }); err != nil {
		return nil, fmt.Errorf("while adding the readiness check: %w", err)
	}
	return mgr, nil
}
