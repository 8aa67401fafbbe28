package operator_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/pgtest"
)

var (
	restConfig *rest.Config
	k8s        client.Client
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		dir, _ := filepath.Abs(filepath.Join("..", "..", "bin", "k8s"))
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
			fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set and ./bin/k8s has no kube-apiserver: run `make envtest` (hack/envtest.sh) first")
			return 1
		}
		os.Setenv("KUBEBUILDER_ASSETS", dir)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	restConfig = cfg
	if k8s, err = client.New(cfg, client.Options{Scheme: operator.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return pgtest.Run(m)
}

func TestRunRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		opts operator.Options
		want string
	}{
		{operator.Options{}, "the database URL is required (HERALD_DATABASE_URL)"},
		{operator.Options{DatabaseURL: "postgres://x", RotationGracePeriod: -time.Second}, "the rotation grace period must not be negative, got -1s"},
		{operator.Options{DatabaseURL: "postgres://x", ResyncPeriod: time.Millisecond}, "the resync period must be at least 1s, got 1ms"},
		{operator.Options{DatabaseURL: "postgres://x", MaxDBConns: -1}, "the maximum number of database connections must be at least 1, got -1"},
	}
	for _, tt := range tests {
		err := operator.Run(context.Background(), tt.opts)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Run(%+v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(t *testing.T, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startRun runs operator.Run as `herald operator` would, and stops it at the end of the test.
func startRun(t *testing.T, opts operator.Options) {
	t.Helper()
	opts.RestConfig = restConfig
	opts.Logger = logr.FromSlogHandler(slog.NewTextHandler(io.Discard, nil))
	opts.SkipControllerNameValidation = true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- operator.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancellation, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of cancellation")
		}
	})
}

func TestRunElectsALeaderServesProbesAndMetricsAndReconciles(t *testing.T) {
	metrics, probes := freeAddr(t), freeAddr(t)
	startRun(t, operator.Options{
		DatabaseURL:             pgtest.NewDatabase(t),
		MetricsAddr:             metrics,
		ProbeAddr:               probes,
		LeaderElection:          true,
		LeaderElectionNamespace: "default",
		ResyncPeriod:            time.Second,
	})

	for _, path := range []string{"/healthz", "/readyz"} {
		eventually(t, 20*time.Second, path, func() error {
			if code, body := get("http://" + probes + path); code != http.StatusOK {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
	}
	eventually(t, 20*time.Second, "leader lease", func() error {
		var lease coordinationv1.Lease
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: operator.DefaultLeaderElectionID}, &lease); err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return fmt.Errorf("lease has no holder")
		}
		return nil
	})

	tenant := &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "run-acme"}, Spec: notifyv1alpha1.TenantSpec{DisplayName: "Acme"}}
	if err := k8s.Create(context.Background(), tenant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), tenant)
		eventually(t, 10*time.Second, "Tenant deleted", func() error {
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tenant), tenant); err == nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
	})
	eventually(t, 20*time.Second, "Tenant ready", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tenant), tenant); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tenant.Status.Conditions, notifyv1alpha1.ConditionReady) {
			return fmt.Errorf("conditions %+v", tenant.Status.Conditions)
		}
		return nil
	})
	eventually(t, 10*time.Second, "metrics", func() error {
		code, body := get("http://" + metrics + "/metrics")
		if code != http.StatusOK || !strings.Contains(body, `controller_runtime_reconcile_total{controller="tenant"`) {
			return fmt.Errorf("%d, reconcile metrics missing", code)
		}
		return nil
	})
}

func TestRunStartsWithoutPostgreSQLAndReportsIt(t *testing.T) {
	probes := freeAddr(t)
	closed := freeAddr(t) // nothing listens there
	startRun(t, operator.Options{
		DatabaseURL: "postgres://postgres@" + closed + "/herald?sslmode=disable&connect_timeout=1",
		MetricsAddr: "0",
		ProbeAddr:   probes,
	})
	eventually(t, 20*time.Second, "/healthz up, /readyz failing on the key store", func() error {
		if code, body := get("http://" + probes + "/healthz"); code != http.StatusOK {
			return fmt.Errorf("healthz %d %s", code, body)
		}
		if code, body := get("http://" + probes + "/readyz"); code != http.StatusInternalServerError {
			return fmt.Errorf("readyz %d %s", code, body)
		}
		return nil
	})

	tenant := &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "run-nodb"}, Spec: notifyv1alpha1.TenantSpec{DisplayName: "Acme"}}
	if err := k8s.Create(context.Background(), tenant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No key store to revoke in: drop the finalizer so the Tenant can go.
		_ = k8s.Delete(context.Background(), tenant)
		_ = k8s.Patch(context.Background(), tenant, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	eventually(t, 20*time.Second, "KeyStoreUnavailable", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tenant), tenant); err != nil {
			return err
		}
		c := meta.FindStatusCondition(tenant.Status.Conditions, notifyv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != notifyv1alpha1.ReasonKeyStoreUnavailable {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
}
