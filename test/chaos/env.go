package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/dev/pglocal"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/updates"
)

// DefaultWorkers is how many worker processes an installation runs unless Config.Workers says otherwise.
const DefaultWorkers = 2

// Config describes one installation. Zero values take the defaults in the comments.
type Config struct {
	Users           int           // linked and phone-verified users; 40
	RateLimit       float64       // the bot's global messages per second, for the workers and the simulator; 40
	PerChatInterval time.Duration // minimum spacing of two messages to one chat, ditto; 1 s
	Partitions      int           // partitions of each topic; 12 (the product's default)
	Workers         int           // worker processes in one group; DefaultWorkers
	Ingresses       int           // ingress processes; 1
	// WorkerEnv adds or overrides KEY=VALUE settings of the workers (and of workers started later).
	WorkerEnv []string
	// Env adds or overrides KEY=VALUE settings of every herald process and command (not the broker's).
	Env []string
}

func (c Config) withDefaults() Config {
	if c.Users == 0 {
		c.Users = 40
	}
	if c.RateLimit == 0 {
		c.RateLimit = 40
	}
	if c.PerChatInterval == 0 {
		c.PerChatInterval = time.Second
	}
	if c.Partitions == 0 {
		c.Partitions = 12
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Ingresses == 0 {
		c.Ingresses = 1
	}
	return c
}

// workerGroup is the workers' Kafka consumer group.
const workerGroup = "herald-chaos"

// WorkerLease is HERALD_WORKER_LEASE of every worker: the shortest the product accepts, so that a crashed
// worker's claims are redriven within seconds rather than the production two minutes.
const WorkerLease = 5 * time.Second

// workerDefaults are the workers' settings besides the addresses. The backoff settings shorten the retry
// schedule from 15 s × 2^n to what a scenario of seconds can wait for; workers that predate them ignore
// unknown HERALD_* variables.
var workerDefaults = []string{
	"HERALD_WORKER_GROUP_ID=" + workerGroup,
	"HERALD_WORKER_LEASE=" + WorkerLease.String(),
	"HERALD_WORKER_BACKOFF_BASE=200ms",
	"HERALD_WORKER_BACKOFF_MAX=2s",
}

// User is one tenant user, linked to a simulated messenger user whose private chat has the same id.
type User struct {
	ID     string
	ChatID int64
	Phone  string
}

// Env is one installation of Herald on real processes: PostgreSQL (a database of its own in the shared
// cluster), the broker behind a cuttable proxy, the messenger simulator, a webhook, ingresses and workers,
// a tenant with an API key, and Users linked and verified through the real flow.
type Env struct {
	T           *testing.T
	Cfg         Config
	Run         string // a short id, part of every message token
	DatabaseURL string
	PG          *pglocal.Cluster
	Proxy       *Proxy
	Broker      *Proc
	Sim         *Proc
	Webhook     *Proc
	Ingresses   []*Proc
	Workers     []*Proc // every worker ever started, dead or alive, in start order
	Key         string  // the tenant's API key
	Users       []User
	Ready       time.Time // when setup finished

	dir       string
	herald    string
	prefix    string
	commonEnv []string
	mu        sync.Mutex
	procs     []*Proc
	workerSeq int
	faults    []Fault
}

const (
	tenantID      = "chaos"
	tenantLabel   = "Chaos"
	webhookSecret = "chaos-webhook-secret"
	phoneHashKey  = "chaos-phone-hash-key-0123456789"
	botTokenKey   = "Y2hhb3MtYm90LXRva2VuLWtleS0wMTIzNDU2Nzg5YWI=" // the base64 of 32 bytes
	firstChatID   = 7_000_001
)

// Start brings up an installation and links its users; the test fails if anything does not come up.
// Everything is torn down when the test ends, and process logs are printed if it failed.
func Start(t *testing.T, cfg Config) *Env {
	t.Helper()
	cfg = cfg.withDefaults()
	herald, kfake, err := binaries()
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	e := &Env{T: t, Cfg: cfg, Run: hex.EncodeToString(b[:]), dir: logDir(t), herald: herald, prefix: "chaos"}
	t.Cleanup(e.cleanup)
	// Setup is generous: on a busy two-core machine a cold start of six processes can take a while.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	if err := e.start(ctx, kfake); err != nil {
		t.Fatalf("chaos: setup: %v", err)
	}
	e.Ready = time.Now()
	t.Logf("installation ready in %v: %d users, %d worker(s), %d ingress(es), limit %v/s, per chat %v",
		e.Ready.Sub(start).Round(time.Millisecond), len(e.Users), cfg.Workers, cfg.Ingresses, cfg.RateLimit, cfg.PerChatInterval)
	return e
}

func (e *Env) start(ctx context.Context, kfake string) error {
	var err error
	if e.DatabaseURL, e.PG, err = newDatabase(ctx); err != nil {
		return err
	}
	if e.Proxy, err = NewProxy(); err != nil {
		return err
	}
	// The simulator's port stays reserved until it starts: the broker, started first on port 0, was once
	// given the same free port and the simulator could not listen.
	simHold := e.reservePort()
	defer simHold.Close() // when start fails before the simulator starts
	simAddr := simHold.Addr().String()
	e.commonEnv = append(baseEnv(),
		"HERALD_DATABASE_URL="+e.DatabaseURL,
		"HERALD_KAFKA_BROKERS="+e.Proxy.Addr(),
		"HERALD_KAFKA_TOPIC_PREFIX="+e.prefix,
		"HERALD_MESSENGER_API_URL=http://"+simAddr,
		"HERALD_MESSENGER_BOT_TOKEN="+sim.DefaultToken,
		"HERALD_MESSENGER_BOT_USERNAME="+sim.DefaultBotUsername,
		"HERALD_MESSENGER_RATE_LIMIT="+strconv.FormatFloat(e.Cfg.RateLimit, 'f', -1, 64),
		"HERALD_MESSENGER_PER_CHAT_INTERVAL="+e.Cfg.PerChatInterval.String(),
		"HERALD_LOG_FORMAT=text",
		"HERALD_LOG_LEVEL="+logLevel,
		// Tenants' own bots (AddBotTenant): their tokens sealed by the CLI, opened by the webhook and workers.
		"HERALD_BOT_TOKEN_KEY="+botTokenKey,
	)
	e.commonEnv = append(e.commonEnv, e.Cfg.Env...)
	if _, err := e.cli(ctx, "migrate"); err != nil {
		return err
	}

	// The broker, advertising the proxy's address so that clients reconnect through the proxy.
	e.Broker = e.add(newProc("kfake", "", e.logPath("kfake"), kfake,
		[]string{"-addr", "127.0.0.1:0", "-advertise", e.Proxy.Addr(), "-prefix", e.prefix, "-partitions", strconv.Itoa(e.Cfg.Partitions)},
		baseEnv()))
	if err := e.Broker.Start(); err != nil {
		return err
	}
	brokerAddr, err := e.Broker.WaitLog(ctx, regexp.MustCompile(`(?m)^ready (\S+)$`))
	if err != nil {
		return err
	}
	e.Proxy.SetUpstream(brokerAddr)

	// The messenger simulator, enforcing the same limits as the workers: per chat with no burst, so that
	// two sends closer than the interval (less the 5 % tolerance) count as a violation.
	// A tenant's own bot is registered at an https URL (HERALD_PUBLIC_URL must be): the simulator posts
	// to it over plain http, as a load balancer ending TLS in front of the webhook would.
	e.Sim = e.add(newProc("sim", simAddr, e.logPath("sim"), e.herald, []string{"sim"}, append(e.env("HERALD_HTTP_ADDR="+simAddr),
		"HERALD_SIM_PER_CHAT_RATE="+strconv.FormatFloat(1/e.Cfg.PerChatInterval.Seconds(), 'f', -1, 64),
		"HERALD_SIM_WEBHOOK_PLAIN_HTTP=true")))
	simHold.Close()
	if err := e.Sim.Start(); err != nil {
		return err
	}
	if err := e.Sim.WaitHTTP(ctx, "/sim"); err != nil {
		return err
	}
	if err := doJSON(ctx, http.MethodPost, e.SimURL("/sim/limits"), "", map[string]any{"per_chat_burst": 1, "tolerance": 0.05}, 200, nil); err != nil {
		return err
	}

	if _, err := e.cli(ctx, "tenant", "create", "--id", tenantID, "--developer-name", tenantLabel); err != nil {
		return err
	}
	key, err := e.cli(ctx, "apikey", "create", "--tenant", tenantID, "--label", tenantLabel)
	if err != nil {
		return err
	}
	if e.Key = strings.TrimSpace(key); e.Key == "" {
		return errors.New("herald apikey create printed no key")
	}

	webhookAddr := e.freeAddr()
	e.Webhook = e.add(newProc("webhook", webhookAddr, e.logPath("webhook"), e.herald, []string{"webhook"},
		e.env("HERALD_HTTP_ADDR="+webhookAddr, "HERALD_WEBHOOK_SECRET="+webhookSecret, "HERALD_PHONE_HASH_KEY="+phoneHashKey)))
	if err := e.Webhook.Start(); err != nil {
		return err
	}
	for range e.Cfg.Ingresses {
		if _, err := e.StartIngress(ctx); err != nil {
			return err
		}
	}
	for range e.Cfg.Workers {
		if _, err := e.StartWorker(ctx); err != nil {
			return err
		}
	}
	if err := e.Webhook.WaitHTTP(ctx, "/readyz"); err != nil {
		return err
	}
	if _, err := e.cli(ctx, "webhook", "set-url", "--webhook-secret", webhookSecret, "http://"+webhookAddr+updates.Path); err != nil {
		return err
	}
	if err := e.WaitShares(ctx); err != nil {
		return err
	}
	if err := e.linkUsers(ctx); err != nil {
		return err
	}
	// The replies of linking and verification are system messages to the same chats: let them all be
	// delivered before the load starts, so that they cannot interleave with it.
	return e.WaitSettled(ctx)
}

// WaitSettled waits until every notification is terminal: the replies of linking and verification
// delivered, so that they cannot interleave with a scenario's messages.
func (e *Env) WaitSettled(ctx context.Context) error {
	return Eventually(ctx, 2*time.Minute, 200*time.Millisecond, "setup messages delivered", func(ctx context.Context) error {
		st, err := e.Statuses(ctx)
		if err != nil {
			return err
		}
		if n := st.Pending(); n > 0 {
			return fmt.Errorf("%d notifications not yet terminal: %v", n, st)
		}
		return nil
	})
}

// IngressShutdownDelay is each ingress's HERALD_SHUTDOWN_DELAY: a few of the load's readiness polls
// (ReadinessPoll).
const IngressShutdownDelay = 2 * time.Second

// StartIngress starts one more ingress and waits until it is ready.
func (e *Env) StartIngress(ctx context.Context) (*Proc, error) {
	addr := e.freeAddr()
	p := e.add(newProc(fmt.Sprintf("ingress-%d", len(e.Ingresses)+1), addr, e.logPath(fmt.Sprintf("ingress-%d", len(e.Ingresses)+1)),
		e.herald, []string{"ingress"}, e.env("HERALD_HTTP_ADDR="+addr, "HERALD_DEEP_LINK_BASE=https://t.me",
			// The load is one tenant's, far above a tenant's default limits: the scenarios are about faults.
			"HERALD_TENANT_SENDS_PER_SECOND=100000", "HERALD_TENANT_REQUESTS_PER_SECOND=100000",
			// As the chart sets it: on SIGTERM, /readyz answers 503 and the replica keeps serving for this
			// long, so the load balancer (the load's readiness poll) stops routing to it first.
			"HERALD_SHUTDOWN_DELAY="+IngressShutdownDelay.String())))
	e.mu.Lock()
	e.Ingresses = append(e.Ingresses, p)
	e.mu.Unlock()
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, p.WaitHTTP(ctx, "/readyz")
}

// StartWorker starts one more worker in the group (a replacement, or a scale-up) and waits until it is
// ready; it does not wait for the rebalance (WaitShares does).
func (e *Env) StartWorker(ctx context.Context) (*Proc, error) {
	addr := e.freeAddr()
	e.mu.Lock()
	e.workerSeq++
	name := fmt.Sprintf("worker-%d", e.workerSeq)
	e.mu.Unlock()
	// pprof on a port of its own: when messages end up stuck, the harness saves the worker's goroutines.
	pprof := e.freeAddr()
	env := e.env(append(append([]string{"HERALD_HTTP_ADDR=" + addr, "HERALD_PPROF_ADDR=" + pprof}, workerDefaults...), e.Cfg.WorkerEnv...)...)
	p := e.add(newProc(name, addr, e.logPath(name), e.herald, []string{"worker"}, env))
	p.PprofAddr = pprof
	e.mu.Lock()
	e.Workers = append(e.Workers, p)
	e.mu.Unlock()
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, p.WaitHTTP(ctx, "/readyz")
}

func (e *Env) ingresses() []*Proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*Proc(nil), e.Ingresses...)
}

// LiveWorkers are the workers whose process is running.
func (e *Env) LiveWorkers() []*Proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*Proc
	for _, w := range e.Workers {
		if w.Running() {
			out = append(out, w)
		}
	}
	return out
}

// WaitShares waits until the live workers' rate shares (herald_worker_rate_limit) add up to the global
// limit, each holds some, and the partitions they hold (herald_worker_partitions) are every partition of
// both topics: the group has settled after a start or a rebalance.
func (e *Env) WaitShares(ctx context.Context) error {
	return Eventually(ctx, 90*time.Second, 200*time.Millisecond, "worker group settled", func(ctx context.Context) error {
		sum, held := 0.0, 0.0
		var shares []string
		for _, w := range e.LiveWorkers() {
			m, err := scrape(ctx, w.Addr)
			if err != nil {
				return err
			}
			v := m.sum("herald_worker_rate_limit")
			if v <= 0 {
				return fmt.Errorf("%s has no share yet", w.Name)
			}
			p := m.sum("herald_worker_partitions")
			if p <= 0 {
				return fmt.Errorf("%s holds no partition yet", w.Name)
			}
			held += p
			sum += v
			shares = append(shares, fmt.Sprintf("%s=%.1f", w.Name, v))
		}
		if math.Abs(sum-e.Cfg.RateLimit) > 0.01*e.Cfg.RateLimit {
			return fmt.Errorf("shares %v add up to %.1f, want %v", shares, sum, e.Cfg.RateLimit)
		}
		// Every partition of both topics has exactly one live holder: the group has rebalanced.
		if want := float64(2 * e.Cfg.Partitions); held != want {
			return fmt.Errorf("the live workers hold %v partitions, want %v", held, want)
		}
		return nil
	})
}

// InFlight is herald_worker_in_flight of a worker: messages it fetched and has not finished. Read just
// before a crash, it bounds the duplicates the crash may cause.
func (e *Env) InFlight(ctx context.Context, w *Proc) (int, error) {
	m, err := scrape(ctx, w.Addr)
	if err != nil {
		return 0, err
	}
	return int(m.sum("herald_worker_in_flight")), nil
}

// ReadyStatus is the status of GET /readyz on p (0 when it does not answer).
func (e *Env) ReadyStatus(ctx context.Context, p *Proc) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	status, _, err := get(ctx, "http://"+p.Addr+"/readyz")
	if err != nil {
		return 0
	}
	return status
}

// SimURL is the simulator's address plus path.
func (e *Env) SimURL(path string) string { return "http://" + e.Sim.Addr + path }

// SetSimFaults replaces the simulator's injected faults (sim.Faults as JSON; nil clears them).
func (e *Env) SetSimFaults(ctx context.Context, faults map[string]any) error {
	if faults == nil {
		return doJSON(ctx, http.MethodDelete, e.SimURL("/sim/faults"), "", nil, 200, nil)
	}
	return doJSON(ctx, http.MethodPost, e.SimURL("/sim/faults"), "", faults, 200, nil)
}

// SimStats reads the simulator's counters.
func (e *Env) SimStats(ctx context.Context) (sim.Stats, error) {
	var st sim.Stats
	err := doJSON(ctx, http.MethodGet, e.SimURL("/sim/stats"), "", nil, 200, &st)
	return st, err
}

// Messages returns what each user's chat received, oldest first, with the simulator's receive times.
func (e *Env) Messages(ctx context.Context) (map[int64][]sim.SentMessage, error) {
	out := make(map[int64][]sim.SentMessage, len(e.Users))
	for _, u := range e.Users {
		var res struct {
			Messages []sim.SentMessage `json:"messages"`
		}
		if err := doJSON(ctx, http.MethodGet, e.SimURL(fmt.Sprintf("/sim/chats/%d/messages", u.ChatID)), "", nil, 200, &res); err != nil {
			return nil, err
		}
		out[u.ChatID] = res.Messages
	}
	return out, nil
}

// Statuses counts notifications by status, straight from PostgreSQL.
type Statuses map[string]int

// Pending counts notifications not in a terminal status: queued, delivering or retrying.
func (s Statuses) Pending() int { return s["queued"] + s["delivering"] + s["retrying"] }

// Statuses runs SELECT status, count(*) FROM notifications GROUP BY 1.
func (e *Env) Statuses(ctx context.Context) (Statuses, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT status, count(*) FROM notifications GROUP BY 1`)
	if err != nil {
		return nil, err
	}
	out := Statuses{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// RestartPostgres restarts the shared cluster with `pg_ctl restart -m fast`.
func (e *Env) RestartPostgres(ctx context.Context) error { return e.PG.Restart(ctx) }

// linkUsers links and verifies every user through the real flow: a link token from the tenant API, the
// simulated user opening the deep link (the webhook links the chat), phone verification started by the
// tenant and completed by the user sharing their own contact.
func (e *Env) linkUsers(ctx context.Context) error {
	e.Users = make([]User, e.Cfg.Users)
	for i := range e.Users {
		e.Users[i] = User{ID: fmt.Sprintf("u%02d", i), ChatID: firstChatID + int64(i), Phone: fmt.Sprintf("+1555%07d", i+1)}
	}
	sem := make(chan struct{}, 8)
	errs := make(chan error, len(e.Users))
	var wg sync.WaitGroup
	for _, u := range e.Users {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := e.linkUser(ctx, u); err != nil {
				errs <- fmt.Errorf("user %s: %w", u.ID, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(slicesOf(errs)...)
}

func (e *Env) linkUser(ctx context.Context, u User) error { return e.linkUserVia(ctx, e.Key, "", u) }

// linkUserVia links u as a user of the tenant of key, through bot (the simulator's ?bot=; empty: the shared
// bot): the deep link the tenant API gives opens the tenant's bot.
func (e *Env) linkUserVia(ctx context.Context, key, bot string, u User) error {
	api := e.APIURL
	var tok struct {
		DeepLink string `json:"deep_link"`
	}
	if err := doJSON(ctx, http.MethodPost, api("/v1/link-token"), key, map[string]string{"user_id": u.ID}, http.StatusCreated, &tok); err != nil {
		return err
	}
	if err := doJSON(ctx, http.MethodPost, e.SimURL("/sim/users"), "", map[string]any{"id": u.ChatID, "first_name": "User " + u.ID, "phone_number": u.Phone}, 200, nil); err != nil {
		return err
	}
	if err := doJSON(ctx, http.MethodPost, e.SimURL(fmt.Sprintf("/sim/users/%d/open-link", u.ChatID)), "", map[string]string{"url": tok.DeepLink}, 200, nil); err != nil {
		return err
	}
	// The simulator hands the /start to the webhook asynchronously: until the link is committed the start
	// of verification answers 404.
	err := Eventually(ctx, time.Minute, 100*time.Millisecond, "link", func(ctx context.Context) error {
		return doJSON(ctx, http.MethodPost, api("/v1/phone-verification/start"), key, map[string]string{"user_id": u.ID}, http.StatusAccepted, nil)
	})
	if err != nil {
		return err
	}
	if err := doJSON(ctx, http.MethodPost, e.SimURL(fmt.Sprintf("/sim/users/%d/share-contact%s", u.ChatID, botQuery(bot))), "", map[string]string{"phone_number": u.Phone}, 200, nil); err != nil {
		return err
	}
	return Eventually(ctx, time.Minute, 100*time.Millisecond, "verification", func(ctx context.Context) error {
		var st struct {
			Status string `json:"status"`
		}
		if err := doJSON(ctx, http.MethodGet, api("/v1/phone-verification/status/"+u.ID), key, nil, 200, &st); err != nil {
			return err
		}
		if st.Status != "verified" {
			return fmt.Errorf("status %q", st.Status)
		}
		return nil
	})
}

// APIURL is the first running ingress's address plus path.
func (e *Env) APIURL(path string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.Ingresses {
		if p.Running() {
			return "http://" + p.Addr + path
		}
	}
	return "http://" + e.Ingresses[0].Addr + path
}

// Send posts one message for user through the first running ingress, outside the load, and returns its
// tracking id: an answer other than 202 is an error.
func (e *Env) Send(ctx context.Context, user, message string) (string, error) {
	return e.SendAs(ctx, e.Key, user, message)
}

// SendAs is Send for the tenant of key.
func (e *Env) SendAs(ctx context.Context, key, user, message string) (string, error) {
	var out struct {
		TrackingID string `json:"tracking_id"`
	}
	err := doJSON(ctx, http.MethodPost, e.APIURL("/v1/send"), key, map[string]string{"user_id": user, "message": message}, http.StatusAccepted, &out)
	if err == nil && out.TrackingID == "" {
		err = errors.New("POST /v1/send: 202 without a tracking id")
	}
	return out.TrackingID, err
}

// cli runs a one-shot herald command (migrate, tenant, apikey, webhook set-url) and returns its stdout.
func (e *Env) cli(ctx context.Context, args ...string) (string, error) {
	return e.cliWith(ctx, nil, args...)
}

// cliWith is cli with extra KEY=VALUE settings.
func (e *Env) cliWith(ctx context.Context, extra []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.herald, args...)
	cmd.Env = e.env(extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("herald %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// env is the common settings plus extra (later entries win, as with a shell's environment).
func (e *Env) env(extra ...string) []string {
	return append(append([]string(nil), e.commonEnv...), extra...)
}

func (e *Env) add(p *Proc) *Proc {
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

func (e *Env) logPath(name string) string { return filepath.Join(e.dir, name+".log") }

// freeAddr picks a free loopback port. A component keeps its address across restarts.
func (e *Env) freeAddr() string {
	l := e.reservePort()
	defer l.Close()
	return l.Addr().String()
}

// reservePort listens on a free loopback port: nothing else is given it until the listener closes.
func (e *Env) reservePort() net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.T.Fatalf("chaos: no free port: %v", err)
	}
	return l
}

// cleanup prints the tail of every process's log if the test failed, then kills everything.
func (e *Env) cleanup() {
	e.mu.Lock()
	procs := append([]*Proc(nil), e.procs...)
	e.mu.Unlock()
	if e.T.Failed() {
		for _, p := range procs {
			e.T.Logf("--- last lines of %s (%s):\n%s", p.Name, p.Log, p.Tail(40))
		}
	}
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].Running() {
			_ = procs[i].Cont() // a stopped process would otherwise linger until the kill is delivered
			_ = procs[i].Kill()
		}
	}
	if e.Proxy != nil {
		e.Proxy.Close()
	}
}

// logDir is where the scenario's process logs go: a directory per test under $HERALD_CHAOS_LOGS when set
// (kept, for reading after a run), else in t.TempDir().
func logDir(t *testing.T) string {
	root := os.Getenv("HERALD_CHAOS_LOGS")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	return dir
}

// baseEnv is the test's environment without HERALD_* variables: a component must get only the settings
// the harness gives it.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") && !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			out = append(out, kv)
		}
	}
	return out
}

// metrics is a Prometheus text exposition as series → value.
type metrics map[string]float64

func scrape(ctx context.Context, addr string) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	status, body, err := get(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("GET %s/metrics: status %d", addr, status)
	}
	m := metrics{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// sum adds up every series of the metric name (all label values).
func (m metrics) sum(name string) float64 {
	total := 0.0
	for series, v := range m {
		if series == name || strings.HasPrefix(series, name+"{") {
			total += v
		}
	}
	return total
}

func slicesOf[T any](c chan T) []T {
	var out []T
	for v := range c {
		out = append(out, v)
	}
	return out
}

// logLevel is every component's HERALD_LOG_LEVEL: HERALD_CHAOS_LOG_LEVEL, info by default.
var logLevel = cmp.Or(os.Getenv("HERALD_CHAOS_LOG_LEVEL"), "info")
