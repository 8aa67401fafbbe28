package operator_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/testing/kubetest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/rbactest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

var (
	restConfig *rest.Config
	k8s        client.Client
)

func TestMain(m *testing.M) {
	os.Exit(kubetest.Run(m, func(cfg *rest.Config, c client.Client) { restConfig, k8s = cfg, c }))
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
		{operator.Options{DatabaseURL: "postgres://x", OrphanGracePeriod: time.Millisecond}, "the orphan grace period must be at least 1s, got 1ms"},
		{operator.Options{DatabaseURL: "postgres://x", MetricsCertDir: "/nonexistent"}, "the metrics certificate directory /nonexistent has no tls.crt: stat /nonexistent/tls.crt: no such file or directory"},
		{operator.Options{DatabaseURL: "postgres://x", MetricsCertDir: "/tmp", InsecureMetrics: true}, "a metrics certificate directory needs secure metrics (--metrics-secure)"},
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

// startRun runs operator.Run as `herald operator` would, against envtest unless opts names another API
// server, and stops it at the end of the test.
func startRun(t *testing.T, opts operator.Options) {
	t.Helper()
	if opts.RestConfig == nil {
		opts.RestConfig = restConfig
	}
	kubetest.StartOperator(t, opts)
}

// The operator as it runs in a cluster: as its ServiceAccount with the RBAC of config/rbac, leader
// election on, probes, metrics over HTTPS for a scraper bound to the metrics-reader ClusterRole.
func TestRunElectsALeaderServesProbesAndMetricsAndReconciles(t *testing.T) {
	id := rbactest.Install(t, k8s, restConfig, "herald-run-"+suffix())
	metrics, probes := freeAddr(t), freeAddr(t)
	startRun(t, operator.Options{
		DatabaseURL:             pgtest.NewDatabase(t),
		MetricsAddr:             metrics,
		ProbeAddr:               probes,
		LeaderElection:          true,
		LeaderElectionNamespace: id.Namespace,
		ResyncPeriod:            time.Second,
		RestConfig:              id.Config,
	})

	for _, path := range []string{"/healthz", "/readyz"} {
		wait.For(t, 20*time.Second, path, func() error {
			if code, body := get("http://" + probes + path); code != http.StatusOK {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
	}
	wait.For(t, 20*time.Second, "leader lease", func() error {
		var lease coordinationv1.Lease
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: id.Namespace, Name: operator.DefaultLeaderElectionID}, &lease); err != nil {
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
		wait.For(t, 10*time.Second, "Tenant deleted", func() error {
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tenant), tenant); err == nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
	})
	wait.For(t, 20*time.Second, "Tenant ready", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tenant), tenant); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tenant.Status.Conditions, notifyv1alpha1.ConditionReady) {
			return fmt.Errorf("conditions %+v", tenant.Status.Conditions)
		}
		return nil
	})
	token := scraperToken(t, id, true)
	wait.For(t, 10*time.Second, "metrics", func() error {
		code, body := scrape(t, "https://"+metrics+"/metrics", token, nil)
		if code != http.StatusOK || !strings.Contains(body, `controller_runtime_reconcile_total{controller="tenant"`) {
			return fmt.Errorf("%d, reconcile metrics missing", code)
		}
		return nil
	})
}

// scraperToken makes a ServiceAccount in the identity's namespace, bound to the metrics-reader
// ClusterRole of config/rbac when bound is true, and returns a token of it (TokenRequest).
func scraperToken(t *testing.T, id *rbactest.Identity, bound bool) string {
	t.Helper()
	ctx := context.Background()
	name := "scraper-" + suffix()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: id.Namespace, Name: name}}
	if err := k8s.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if bound {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + id.Namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: id.ClusterRole(rbactest.MetricsReaderRole)},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: id.Namespace}},
		}
		if err := k8s.Create(ctx, crb); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, crb) })
	}
	cs := kubernetes.NewForConfigOrDie(restConfig)
	tr, err := cs.CoreV1().ServiceAccounts(id.Namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// scrape GETs url over HTTPS with token as bearer ("" for none), trusting roots (nil: any certificate, as
// a ServiceMonitor with insecureSkipVerify does for the self-signed default).
func scrape(t *testing.T, url, token string, roots *x509.CertPool) (int, string) {
	t.Helper()
	tlsConfig := &tls.Config{InsecureSkipVerify: roots == nil, RootCAs: roots} //nolint:gosec // the self-signed default
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /metrics answers only bearer tokens the API server authenticates and authorizes for get on /metrics:
// the operator checks them with TokenReview and SubjectAccessReview, which its RBAC (config/rbac) allows.
func TestMetricsAreServedOnlyToTokensAllowedToReadThem(t *testing.T) {
	id := rbactest.Install(t, k8s, restConfig, "herald-metrics-"+suffix())
	metrics := freeAddr(t)
	startRun(t, operator.Options{DatabaseURL: pgtest.NewDatabase(t), MetricsAddr: metrics, ProbeAddr: "0", RestConfig: id.Config})
	reader, stranger := scraperToken(t, id, true), scraperToken(t, id, false)
	url := "https://" + metrics + "/metrics"

	wait.For(t, 20*time.Second, "a metrics reader gets the metrics", func() error {
		if code, body := scrape(t, url, reader, nil); code != http.StatusOK || !strings.Contains(body, "controller_runtime_") {
			return fmt.Errorf("%d %.200s", code, body)
		}
		return nil
	})
	for _, c := range []struct {
		who, token string
		want       []int
	}{
		{"without a token", "", []int{http.StatusUnauthorized}},
		// controller-runtime's filter answers 500 when the TokenReview reports an error for the token
		// (rather than "not authenticated"); either way no metrics.
		{"with a token the API server does not know", "not-a-token", []int{http.StatusUnauthorized, http.StatusInternalServerError}},
		{"with the token of a ServiceAccount not bound to the metrics reader", stranger, []int{http.StatusForbidden}},
	} {
		if code, body := scrape(t, url, c.token, nil); !slices.Contains(c.want, code) || strings.Contains(body, "controller_runtime_") {
			t.Errorf("scrape %s: %d %.200s, want %v and no metrics", c.who, code, body, c.want)
		}
	}
	if code, body := get("http://" + metrics + "/metrics"); code == http.StatusOK {
		t.Errorf("plain HTTP scrape: %d %.200s, want it refused", code, body)
	}
}

// With a certificate directory (a kubernetes.io/tls Secret mounted), /metrics presents that certificate.
func TestMetricsServeTheCertificateOfTheCertDir(t *testing.T) {
	dir := t.TempDir()
	roots := writeCert(t, dir)
	id := rbactest.Install(t, k8s, restConfig, "herald-cert-"+suffix())
	metrics := freeAddr(t)
	startRun(t, operator.Options{DatabaseURL: pgtest.NewDatabase(t), MetricsAddr: metrics, ProbeAddr: "0", MetricsCertDir: dir, RestConfig: id.Config})
	reader := scraperToken(t, id, true)
	wait.For(t, 20*time.Second, "metrics over the given certificate", func() error {
		if code, body := scrape(t, "https://"+metrics+"/metrics", reader, roots); code != http.StatusOK {
			return fmt.Errorf("%d %.200s", code, body)
		}
		return nil
	})
}

// writeCert writes a self-signed certificate for 127.0.0.1 as tls.crt and tls.key into dir and returns a
// pool that trusts it.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald-operator-metrics"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func TestRunStartsWithoutPostgreSQLAndReportsIt(t *testing.T) {
	probes := freeAddr(t)
	closed := freeAddr(t) // nothing listens there
	startRun(t, operator.Options{
		DatabaseURL: "postgres://postgres@" + closed + "/herald?sslmode=disable&connect_timeout=1",
		MetricsAddr: "0",
		ProbeAddr:   probes,
	})
	wait.For(t, 20*time.Second, "/healthz up, /readyz failing on the key store", func() error {
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
	wait.For(t, 20*time.Second, "KeyStoreUnavailable", func() error {
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
