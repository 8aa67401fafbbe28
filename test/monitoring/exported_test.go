package monitoring

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	notifyv1alpha1 "github.com/heraldhq/herald/api/v1alpha1"
	"github.com/heraldhq/herald/internal/dev/devenv"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/operator"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/testing/devtest"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/kubetest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// namesUsed are the metric names the dashboard and the alerts read, each with where it is read; the
// names the rules record themselves are not looked for in /metrics.
func namesUsed(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	for _, q := range readDashboard(t).queries() {
		expr, err := substitute(q.expr, concrete)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range metricNames(t, expr) {
			used[n] = append(used[n], "dashboard "+q.where)
		}
	}
	recorded := map[string]bool{}
	rules := readRules(t, rulesPath(t)).rules()
	for _, r := range rules {
		if r.Record != "" {
			recorded[r.Record] = true
		}
	}
	for _, r := range rules {
		for _, n := range metricNames(t, r.Expr) {
			if !recorded[n] {
				used[n] = append(used[n], "rule "+r.Record+r.Alert)
			}
		}
	}
	return used
}

// TestEveryMetricTheDashboardAndAlertsReadIsExported runs Herald — `herald dev` (the tenant API, the webhook,
// a worker, the retention purge and the messenger simulator in one process, exporting every component's
// metrics on one /metrics) and the operator against a real API server (envtest) — drives traffic through
// it, including the events some metrics count (a 429 and a 5xx from the platform, a tenant over its limit,
// invalid keys, an orphan envelope, notifications stuck queued and delivering), and requires every metric
// name the dashboard and the alerts read on one of the two /metrics. The names come from the files; nothing
// here lists them.
func TestEveryMetricTheDashboardAndAlertsReadIsExported(t *testing.T) {
	used := namesUsed(t)
	if len(used) < 20 {
		t.Fatalf("only %d metric names found in the dashboard and the rules", len(used))
	}
	ctx := context.Background()

	// PostgreSQL and a broker of our own, so that the test can reach into both.
	st, dbURL := pgtest.NewStore(t)
	broker := kafkatest.New(t, "herald")
	// Two notifications the redrive must find when the worker starts: one queued for an hour whose envelope
	// never reached Kafka, one left delivering by a worker that died (its lease expired).
	fx := fixture.New(st)
	hourAgo := time.Now().Add(-time.Hour)
	fx.Notification(t, fixture.System("", 4242), fixture.Body("lost"),
		fixture.PublishedAt(hourAgo), fixture.CreatedAt(hourAgo), fixture.UpdatedAt(hourAgo))
	fx.Notification(t, fixture.System("", 4243), fixture.Body("held by a dead worker"), fixture.InState(notification.Delivering),
		fixture.Attempts(1), fixture.Lease(time.Now().Add(-time.Minute)), fixture.PublishedAt(hourAgo))

	base, key := startDev(t, devenv.Options{DataDir: t.TempDir(), DatabaseURL: dbURL, KafkaBrokers: broker.Addrs(),
		TopicPrefix: "herald", DeepLinkBase: "https://t.me", RateLimit: 30,
		// A burst of 2, so that a few sends in a row go over the limit.
		TenantSendsPerSecond: 1,
		// Callbacks to the simulator's receiver, as herald dev's configuration allows.
		CallbackPolicy: egress.Policy{AllowInsecure: true, AllowPrivate: true}})
	operatorMetrics := startOperator(t)

	c := &devClient{t: t, base: base, key: key}
	// A callback endpoint (the simulator's receiver) that fails throughout (each event's attempts back off
	// from 5 s): the callback metrics, the endpoint's consecutive failures included.
	c.do("POST", "/v1/callbacks", `{"url":"`+base+`/sim/callbacks"}`, true, 201)
	c.do("POST", "/sim/callbacks/fail", `{"count":1000,"status":503}`, false, 200)
	// Link, verify, send: the webhook's updates, the tenant API, a delivery.
	link := c.do("POST", "/v1/link-token", `{"user_id":"alice"}`, true, 200)["deep_link"].(string)
	c.do("POST", "/sim/users/1001/open-link", `{"url":"`+link+`"}`, false, 200)
	wait.Until(c.t, 30*time.Second, "the link", func() bool {
		return c.status("POST", "/v1/phone-verification/start", `{"user_id":"alice"}`, true) == 202
	})
	c.do("POST", "/sim/users/1001/share-contact", `{"phone_number":"15551234567"}`, false, 200)
	wait.Until(c.t, 30*time.Second, "the verification", func() bool {
		return c.do("GET", "/v1/phone-verification/status/alice", "", true, 200)["status"] == "verified"
	})
	id := c.do("POST", "/v1/send", `{"user_id":"alice","message":"first"}`, true, 202)["tracking_id"].(string)
	wait.Until(c.t, 30*time.Second, "the delivery", func() bool { return c.do("GET", "/v1/status/"+id, "", true, 200)["status"] == "delivered" })
	// The platform answers the next send 429, then the one after 500.
	c.do("POST", "/sim/faults", `{"next_429":{"count":1,"retry_after":1},"next_5xx":1}`, false, 200)
	time.Sleep(1100 * time.Millisecond) // the tenant's bucket refills
	c.status("POST", "/v1/send", `{"user_id":"alice","message":"throttled"}`, true)
	time.Sleep(1100 * time.Millisecond)
	c.status("POST", "/v1/send", `{"user_id":"alice","message":"server error"}`, true)
	// Over the tenant's limit: 429 rate_limited.
	refused := 0
	for range 5 {
		if c.status("POST", "/v1/send", `{"user_id":"alice","message":"burst"}`, true) == 429 {
			refused++
		}
	}
	if refused == 0 {
		t.Error("five sends in a row at 1/s with a burst of 2 were all accepted; the refusal metrics are not exercised")
	}
	// Invalid keys from one address: past 20 in a minute, throttled.
	for range 25 {
		req, _ := http.NewRequest("GET", base+"/v1/status/00000000-0000-0000-0000-000000000000", nil)
		req.Header.Set("Authorization", "Bearer hk_not-a-key")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}
	// An envelope without a row: dropped by the worker (skipped, not_found).
	producer := broker.Producer(t, "herald")
	if err := producer.Publish(ctx, queue.NewOutgoing(uuid.Must(uuid.NewV7()).String(), "demo", "nobody", 0, 5)); err != nil {
		t.Fatal(err)
	}

	// Every name on one of the two /metrics. Some series appear only once their event has happened (the
	// retry of the 429, the redrive's first pass), so scrape until all are there or time is up.
	// A name seen once was exported: some series exist only while their condition lasts (an endpoint's
	// consecutive failures, until it answers again).
	var missing []string
	exported := map[string]bool{}
	deadline := time.Now().Add(90 * time.Second)
	for {
		for n := range scrape(t, base+"/metrics") {
			exported[n] = true
		}
		for n := range scrape(t, operatorMetrics) {
			exported[n] = true
		}
		missing = missing[:0]
		for n := range used {
			if !exported[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("%s is not exported by a running Herald; read by:\n  %s", n, strings.Join(used[n], "\n  "))
	}
	if len(missing) == 0 {
		t.Logf("%d metric names read by the dashboard and the alerts, all exported", len(used))
	}
}

// seriesName is the metric name of a sample line of the text exposition format.
var seriesName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]`)

// scrape returns the names of the series a /metrics answers, histograms' _bucket, _sum and _count included.
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("scraping %s: %s", url, res.Status)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := seriesName.FindStringSubmatch(sc.Text()); m != nil {
			names[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return names
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

// startDev runs herald dev until the end of the test and returns its base URL and the demo tenant's key.
func startDev(t *testing.T, o devenv.Options) (base, key string) {
	t.Helper()
	d := devtest.Start(t, o, 40*time.Second)
	return d.Base, d.Key
}

// startOperator runs the operator against envtest with plain-HTTP metrics, makes it reconcile a Tenant, and
// returns the URL of its /metrics.
func startOperator(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	kubetest.StartOperator(t, operator.Options{DatabaseURL: pgtest.NewDatabase(t), MetricsAddr: addr, InsecureMetrics: true,
		ProbeAddr: "0", RestConfig: restConfig})
	tenant := &notifyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-acme"}, Spec: notifyv1alpha1.TenantSpec{DisplayName: "Acme"}}
	if err := k8s.Create(context.Background(), tenant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), tenant) })
	wait.Until(t, 30*time.Second, "the operator to reconcile the Tenant", func() bool {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tenant), tenant)
		return err == nil && tenant.IsInKeyStore()
	})
	return "http://" + addr + "/metrics"
}

// devClient calls herald dev's tenant API and simulator.
type devClient struct {
	t         *testing.T
	base, key string
}

func (c *devClient) request(method, path, body string, withKey bool) (int, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if withKey {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (c *devClient) status(method, path, body string, withKey bool) int {
	c.t.Helper()
	s, _ := c.request(method, path, body, withKey)
	return s
}

// do expects the status (200 stands for any 2xx) and returns the JSON body.
func (c *devClient) do(method, path, body string, withKey bool, want int) map[string]any {
	c.t.Helper()
	s, b := c.request(method, path, body, withKey)
	if (want == 200 && (s < 200 || s > 299)) || (want != 200 && s != want) {
		c.t.Fatalf("%s %s: %d %s", method, path, s, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("%s %s: %d %s", method, path, s, b)
	}
	return m
}
