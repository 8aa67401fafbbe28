package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"github.com/heraldhq/herald/internal/config"
	"github.com/heraldhq/herald/internal/operator"
)

// runOperator is `herald operator`: the Tenant and ApiKey reconcilers under a controller-runtime manager.
// The Kubernetes connection comes from the in-cluster config or $KUBECONFIG.
func runOperator(ctx context.Context, args []string, _, stderr io.Writer) error {
	var c config.Config
	fs := newFlagSet("operator", stderr)
	c.Bind(fs, config.DatabaseURL, config.LogLevel, config.LogFormat)
	var o operator.Options
	var envErr error
	env := func(name, def string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		return def
	}
	envBool := func(name string, def bool) bool {
		b, err := strconv.ParseBool(env(name, strconv.FormatBool(def)))
		if err != nil {
			envErr = fmt.Errorf("%s: %q is not a boolean", name, env(name, ""))
		}
		return b
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		v := env(name, "")
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			envErr = fmt.Errorf("%s: %q is not a duration", name, v)
			return def
		}
		return d
	}
	var secureMetrics bool
	fs.StringVar(&o.MetricsAddr, "metrics-addr", env("HERALD_METRICS_ADDR", ":8443"), "Prometheus /metrics address; 0 disables it (env HERALD_METRICS_ADDR)")
	fs.BoolVar(&secureMetrics, "metrics-secure", envBool("HERALD_METRICS_SECURE", true), "serve /metrics over HTTPS, only to bearer tokens the API server authorizes for get on /metrics; false: plain HTTP to anyone (env HERALD_METRICS_SECURE)")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", env("HERALD_METRICS_CERT_DIR", ""), "directory with tls.crt and tls.key for /metrics, reloaded on change; default: a self-signed certificate (env HERALD_METRICS_CERT_DIR)")
	fs.StringVar(&o.ProbeAddr, "probe-addr", env("HERALD_PROBE_ADDR", ":8081"), "/healthz and /readyz address; 0 disables it (env HERALD_PROBE_ADDR)")
	fs.BoolVar(&o.LeaderElection, "leader-elect", envBool("HERALD_LEADER_ELECT", false), "elect one active replica through a Lease (env HERALD_LEADER_ELECT)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", env("HERALD_LEADER_ELECTION_NAMESPACE", ""), "namespace of the Lease; default: the pod's (env HERALD_LEADER_ELECTION_NAMESPACE)")
	fs.DurationVar(&o.RotationGracePeriod, "rotation-grace-period", envDuration("HERALD_ROTATION_GRACE_PERIOD", 24*time.Hour), "how long a rotated-out key keeps working (env HERALD_ROTATION_GRACE_PERIOD)")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", envDuration("HERALD_RESYNC_PERIOD", 5*time.Minute), "how often every object is checked against the key store (env HERALD_RESYNC_PERIOD)")
	fs.DurationVar(&o.OrphanGracePeriod, "orphan-grace-period", envDuration("HERALD_ORPHAN_GRACE_PERIOD", 10*time.Minute), "how long the keys of an ApiKey that no longer exists stay before they are revoked (env HERALD_ORPHAN_GRACE_PERIOD)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if err := c.Validate(config.DatabaseURL, config.LogLevel, config.LogFormat); err != nil {
		return err
	}
	logger := c.Logger(stderr).With("component", "operator")
	o.DatabaseURL = c.DatabaseURL
	o.InsecureMetrics = !secureMetrics
	o.Logger = logr.FromSlogHandler(logger.Handler())
	return operator.Run(ctx, o)
}
