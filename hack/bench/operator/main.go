// Command operator measures the operator registering tenants' own bots: against a real kube-apiserver and
// etcd (envtest, with Herald's CRDs), a fresh PostgreSQL and the messenger simulator as the Bot API (every
// token it is given is a bot), it runs `herald operator` as its own process, applies -tenants Tenants each
// with a bot token in a Secret of its own, as fast as the API server takes them, and prints:
//
//   - the time from the first apply until every Tenant is BotReady (getMe and setWebhook done, the bot
//     recorded, the tenant moved onto it), and until the last apply;
//   - the operator's memory then: resident (RSS, and its peak) and Go heap in use;
//   - the reconciles it ran, and what the store and the simulator hold (a bot row, a tenant on it, a
//     webhook, per Tenant).
//
// Run it with `make bench-operator` (KUBEBUILDER_ASSETS: hack/envtest.sh; -herald: a built herald).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/benchutil"
	"github.com/heraldhq/herald/internal/testing/reporoot"
)

var (
	tenants = flag.Int("tenants", 500, "Tenants, each with a bot of its own")
	herald  = flag.String("herald", "bin/herald", "the herald binary whose operator is measured")
	within  = flag.Duration("timeout", 5*time.Minute, "give up when not every Tenant is BotReady by then")
	applies = flag.Int("appliers", 8, "Tenants and Secrets applied at once")
	latency = flag.Duration("api-latency", 100*time.Millisecond, "added to every Bot API call, as the platform's round trip from a cluster")
)

const namespace = "bench"

func main() {
	flag.Parse()
	benchutil.Main("bench-operator", run)
}

func run(ctx context.Context, dbURL string) error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make bench-operator`, or set it to the directory hack/envtest.sh prints")
	}
	root, err := reporoot.Find()
	if err != nil {
		return err
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()
	// The applier must not be what is slow: no client-side rate limit (the operator has none either).
	cfg.QPS, cfg.Burst = -1, 0
	k8s, err := client.New(cfg, client.Options{Scheme: operator.Scheme()})
	if err != nil {
		return err
	}
	admin, err := env.AddUser(envtest.User{Name: "herald-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "herald-bench-operator-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		return err
	}

	platform, _, stopSim, err := benchutil.ServeSimulator(sim.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer stopSim()
	// The simulator answers at once; the platform's getMe and setWebhook take a round trip over the
	// internet, which is what the operator's registrations wait on.
	slow, err := benchutil.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(*latency)
		platform.ServeHTTP(w, r)
	}))
	if err != nil {
		return err
	}
	defer slow.Close()
	apiURL := slow.URL()

	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	logFile := filepath.Join(dir, "operator.log")
	out, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(*herald, "operator", "--metrics-addr="+metricsAddr, "--metrics-secure=false", "--probe-addr=0", "--leader-elect=false")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"), "HERALD_DATABASE_URL="+dbURL,
		"HERALD_MESSENGER_API_URL="+apiURL, "HERALD_PUBLIC_URL=https://herald.bench.invalid", "HERALD_BOT_TOKEN_KEY="+signing.GenerateKey(),
		"HERALD_LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s operator: %w", *herald, err)
	}
	defer func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() }()
	if err := waitMetrics(ctx, metricsAddr, 30*time.Second); err != nil {
		return fmt.Errorf("the operator did not start (its log: %s): %w", logFile, err)
	}
	idle, err := memory(cmd.Process.Pid, metricsAddr)
	if err != nil {
		return err
	}

	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	fmt.Printf("%d Tenants, each with a bot whose token is in a Secret; Bot API calls take %s more; the operator: %s (pid %d), idle: %s\n",
		*tenants, *latency, *herald, cmd.Process.Pid, idle)
	start := time.Now()
	applied, err := apply(ctx, k8s, *tenants)
	if err != nil {
		return err
	}
	ready, err := waitReady(ctx, k8s, *tenants, start, *within)
	if err != nil {
		return fmt.Errorf("%w (the operator's log: %s)", err, logFile)
	}
	mem, err := memory(cmd.Process.Pid, metricsAddr)
	if err != nil {
		return err
	}
	fmt.Printf("all applied after %.1f s; all BotReady after %.1f s\n", applied.Sub(start).Seconds(), ready.Sub(start).Seconds())
	fmt.Printf("the operator then: %s\n", mem)
	reconciles, errs := reconcileTotals(metricsAddr)
	fmt.Printf("tenant reconciles: %.0f (%.0f errors)\n", reconciles, errs)
	return check(ctx, dbURL, platform, *tenants)
}

// apply creates n Secrets with bot tokens and n Tenants naming them, -appliers at a time, and returns when
// the last was applied.
func apply(ctx context.Context, k8s client.Client, n int) (time.Time, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, *applies)
	for range *applies {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := applyOne(ctx, k8s, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return time.Now(), <-errs
}

func applyOne(ctx context.Context, k8s client.Client, i int) error {
	name := fmt.Sprintf("tenant-%04d", i)
	secret := make([]byte, 26)
	_, _ = rand.Read(secret)
	token := strconv.FormatInt(6_000_000_001+int64(i), 10) + ":" + base64.RawURLEncoding.EncodeToString(secret)
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bot"},
		StringData: map[string]string{"token": token}}); err != nil {
		return fmt.Errorf("creating the Secret of %s: %w", name, err)
	}
	tn := &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: notifyv1alpha1.TenantSpec{
		DisplayName: "Tenant " + strconv.Itoa(i), ApiKeyNamespaces: []string{namespace},
		Bot: &notifyv1alpha1.TenantBot{TokenSecretRef: notifyv1alpha1.BotTokenSecretReference{Namespace: namespace, Name: name + "-bot", Key: "token"}},
	}}
	if err := k8s.Create(ctx, tn); err != nil {
		return fmt.Errorf("creating Tenant %s: %w", name, err)
	}
	return nil
}

// waitReady polls the Tenants until n are BotReady, and returns when they were seen so.
func waitReady(ctx context.Context, k8s client.Client, n int, start time.Time, within time.Duration) (time.Time, error) {
	deadline := start.Add(within)
	for {
		var list notifyv1alpha1.TenantList
		if err := k8s.List(ctx, &list); err != nil {
			return time.Time{}, err
		}
		ready := 0
		reasons := map[string]int{}
		for _, t := range list.Items {
			c := meta.FindStatusCondition(t.Status.Conditions, notifyv1alpha1.ConditionBotReady)
			switch {
			case c == nil:
				reasons["none yet"]++
			case c.Status == metav1.ConditionTrue && c.ObservedGeneration == t.Generation:
				ready++
			default:
				reasons[c.Reason]++
			}
		}
		if ready == n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d of %d Tenants BotReady after %s; the others: %v", ready, n, within, reasons)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check confirms that each Tenant got what BotReady says: a bot row, the tenant on it, a webhook.
func check(ctx context.Context, dbURL string, platform *sim.Server, n int) error {
	st, err := store.Open(ctx, dbURL, 1)
	if err != nil {
		return err
	}
	defer st.Close()
	var bots, onBots int
	if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM bots WHERE state = 'ready'), (SELECT count(*) FROM tenants WHERE bot_id IS NOT NULL)`).
		Scan(&bots, &onBots); err != nil {
		return err
	}
	hooks := 0
	for _, b := range platform.Bots() {
		if b.WebhookURL != "" {
			hooks++
		}
	}
	fmt.Printf("the store: %d bots ready, %d tenants on their own bot; the simulator: %d webhooks set\n", bots, onBots, hooks)
	if bots != n || onBots != n || hooks != n {
		return fmt.Errorf("want %d of each", n)
	}
	return nil
}

type procMemory struct {
	benchutil.ProcMemory
	heapInuse float64
}

func (m procMemory) String() string {
	return fmt.Sprintf("RSS %.1f MiB (peak %.1f MiB), Go heap in use %.1f MiB", mib(float64(m.RSS)), mib(float64(m.Peak)), mib(m.heapInuse))
}

func mib(b float64) float64 { return b / (1 << 20) }

func memory(pid int, metricsAddr string) (procMemory, error) {
	m, err := benchutil.Memory(pid)
	if err != nil {
		return procMemory{}, err
	}
	metrics, err := scrape(metricsAddr)
	if err != nil {
		return procMemory{}, err
	}
	return procMemory{ProcMemory: m, heapInuse: metrics["go_memstats_heap_inuse_bytes"]}, nil
}

// reconcileTotals are the Tenant controller's reconciles and errors so far.
func reconcileTotals(metricsAddr string) (total, errs float64) {
	metrics, err := scrape(metricsAddr)
	if err != nil {
		return 0, 0
	}
	for k, v := range metrics {
		switch {
		case strings.HasPrefix(k, `controller_runtime_reconcile_total{controller="tenant"`):
			total += v
		case strings.HasPrefix(k, `controller_runtime_reconcile_errors_total{controller="tenant"`):
			errs += v
		}
	}
	return total, errs
}

// scrape reads the operator's /metrics: series (name with labels) → value.
func scrape(addr string) (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return out, sc.Err()
}

func waitMetrics(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		_, err := scrape(addr)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
