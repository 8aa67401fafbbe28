package benchutil

// The components a benchmark runs in its own process: PostgreSQL clusters and databases, the store, broker
// and outbox the tenant API and the webhook stand on, the tenant API, the messenger simulator, and the
// long-running parts (a delivery worker, a callback sender).

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/heraldhq/herald/internal/dev/kafkalocal"
	"github.com/heraldhq/herald/internal/dev/pglocal"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/store"
)

// Cluster is a private PostgreSQL cluster in a temporary directory.
type Cluster struct {
	*pglocal.Cluster
	dir string
}

// StartCluster starts a cluster with o (its Dir is a new temporary directory).
func StartCluster(ctx context.Context, o pglocal.Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "herald-bench-pg-")
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	c, err := pglocal.Start(ctx, o)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Cluster{Cluster: c, dir: dir}, nil
}

// Database creates a database with every migration applied and returns its URL.
func (c *Cluster) Database(ctx context.Context, name string) (string, error) {
	if err := c.CreateDatabase(ctx, name, ""); err != nil {
		return "", err
	}
	url := c.URL(name)
	return url, store.Migrate(ctx, url)
}

// Stop stops the cluster and removes its directory.
func (c *Cluster) Stop() { _ = c.Cluster.Stop(); _ = os.RemoveAll(c.dir) }

// Postgres starts a private, durable (fsync on) cluster in a temporary directory with a migrated
// database "herald", and returns its URL and a stop function.
func Postgres(ctx context.Context) (url string, stop func(), err error) {
	c, err := StartCluster(ctx, pglocal.Options{Durable: true})
	if err != nil {
		return "", nil, err
	}
	if url, err = c.Database(ctx, "herald"); err != nil {
		c.Stop()
		return "", nil, err
	}
	return url, c.Stop, nil
}

// Backend is what the tenant API and the webhook stand on: a store, the Kafka-protocol broker with
// Herald's topics under a prefix, and an outbox producing to it.
type Backend struct {
	Store    *store.Store
	Broker   *kafkalocal.Broker
	Producer *queue.Producer
	Outbox   *outbox.Outbox
	Prefix   string
}

// StartBackend opens a store of at most maxConns connections on dbURL and starts a broker and an outbox
// (logging to logger) with topics under prefix.
func StartBackend(ctx context.Context, dbURL string, maxConns int32, prefix string, logger *slog.Logger) (*Backend, error) {
	st, err := store.Open(ctx, dbURL, maxConns)
	if err != nil {
		return nil, err
	}
	b, err := kafkalocal.Start(prefix, 0, queue.DefaultPartitions)
	if err != nil {
		st.Close()
		return nil, err
	}
	p := queue.NewProducer(b.Addrs(), prefix)
	return &Backend{Store: st, Broker: b, Producer: p, Outbox: outbox.New(st, p, outbox.Options{Logger: logger}), Prefix: prefix}, nil
}

// Close stops the outbox, the producer, the broker and the store, in that order.
func (b *Backend) Close() {
	b.Outbox.Close()
	_ = b.Producer.Close()
	b.Broker.Close()
	b.Store.Close()
}

// Served is a handler served on a free local port.
type Served struct {
	Addr string // host:port
	srv  *http.Server
}

// URL is the base URL of the server.
func (s *Served) URL() string { return "http://" + s.Addr }

// Close stops serving.
func (s *Served) Close() { _ = s.srv.Close() }

// Serve serves h on a free local port.
func Serve(h http.Handler) (*Served, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	return &Served{Addr: ln.Addr().String(), srv: srv}, nil
}

// ServeAPI serves the tenant API over st and ob with o, its deep links to https://t.me/bench_bot unless o
// says otherwise; the API and its router log to logger.
func ServeAPI(st *store.Store, ob *outbox.Outbox, logger *slog.Logger, o ingress.Options) (*Served, error) {
	if o.DeepLinkBase == "" {
		o.DeepLinkBase = "https://t.me"
	}
	if o.BotUsername == "" {
		o.BotUsername = "bench_bot"
	}
	r := server.NewRouter(logger)
	ingress.New(st, ob, logger, o).Routes(r)
	return Serve(r)
}

// ServeSimulator starts the messenger simulator with o and serves it; stop closes both.
func ServeSimulator(o sim.Options) (s *sim.Server, url string, stop func(), err error) {
	s = sim.New(o)
	served, err := Serve(s)
	if err != nil {
		_ = s.Close()
		return nil, "", nil, err
	}
	return s, served.URL(), func() { served.Close(); _ = s.Close() }, nil
}

// Runner is a component that runs until its context ends: a delivery worker, a callback sender.
type Runner interface {
	Run(ctx context.Context) error
}

// Run runs r until stop, which returns what Run returned (every call of it: a deferred stop after an
// explicit one costs nothing).
func Run(ctx context.Context, r Runner) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return sync.OnceValue(func() error { cancel(); return <-done })
}

// ScheduledBacklog stores n scheduled notifications of tenant to its users userPrefix0 …
// userPrefix(users-1), due in 30 days (spread over a day), in chunks, then has PostgreSQL VACUUM ANALYZE
// the table: a backlog that the sends must not feel.
func ScheduledBacklog(ctx context.Context, st *store.Store, tenant, userPrefix string, users, n int) error {
	const chunk = 100_000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		_, err := st.Pool().Exec(ctx, `
			INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, priority, body, status, send_at)
			SELECT gen_random_uuid(), $5, $4, $6 || (g % $2), 5, 'A message from Bench' || chr(10) || 'later ' || g,
			       $7, now() + interval '30 days' + make_interval(secs => g % 86400)
			FROM generate_series($1::bigint, $1::bigint + $3 - 1) g`, done, users, k, tenant, notification.KindTenant, userPrefix, notification.Scheduled)
		if err != nil {
			return fmt.Errorf("seeding scheduled notifications: %w", err)
		}
	}
	_, err := st.Pool().Exec(ctx, `VACUUM ANALYZE notifications`)
	return err
}

// Runs runs a benchmark n times, each on a fresh migrated database of one private cluster (fsync off, up
// to 300 connections: the components of a run each hold a pool), and hands each result to report as it
// comes. It stops at the first error, which names the run.
func Runs[R any](ctx context.Context, n int, run func(ctx context.Context, dbURL string, i int) (R, error), report func(i int, r R)) ([]R, error) {
	pg, err := StartCluster(ctx, pglocal.Options{MaxConnections: 300})
	if err != nil {
		return nil, fmt.Errorf("starting PostgreSQL: %w", err)
	}
	defer pg.Stop()
	var results []R
	for i := range n {
		r, err := func() (R, error) {
			url, err := pg.Database(ctx, "bench_"+strconv.Itoa(i))
			if err != nil {
				var zero R
				return zero, err
			}
			return run(ctx, url, i)
		}()
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		report(i, r)
		results = append(results, r)
	}
	return results, nil
}
