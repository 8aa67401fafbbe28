// Package store is Herald's PostgreSQL storage: the embedded migrations and every SQL statement the
// services run. Storage errors are translated here into the domain errors below, so callers never see pgx.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Domain errors. Callers match them with errors.Is.
var (
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
	ErrUnverified = errors.New("phone not verified")
)

// DefaultQueryTimeout bounds every statement that is not given a tighter deadline by its caller.
const DefaultQueryTimeout = 5 * time.Second

// Store wraps the pgx pool. All methods are safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// querier is what a statement runs on: the pool (a statement of its own) or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Tx is a transaction for a caller that composes several statements of this package (the outbox's
// idempotent sends). Its methods are in the files of the tables they touch.
type Tx struct {
	tx pgx.Tx
}

// InTx runs fn in a transaction under the default statement deadline, committing when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(ctx, &Tx{tx: tx}) })
	return translate(err, "running a transaction")
}

// Option configures the pool Open makes.
type Option func(*pgxpool.Config)

// StablePlans makes the pool's plans independent of the arguments and of the statistics of the moment.
// It is the delivery worker's setting (herald worker), whose hot statements — the batched claim and status
// write (claims.go) — join a dozen relations and name their rows by key:
//
//   - each prepared statement is planned once, for every set of arguments (plan_cache_mode =
//     force_generic_plan): under the default mode PostgreSQL planned the claim and the status write again
//     at each execution, a third of the server's CPU per delivery;
//   - no sequential scan where an index can find the rows (enable_seqscan = off): a plan made while
//     notifications was small — a generic one, or a custom one from statistics behind a growing backlog —
//     read the whole table at each status write instead of the rows named (make bench-bots, part soak: 15–35
//     ms a write, the bot's backlog growing). A statement with no index to use still scans;
//   - no JIT compilation (jit = off): a scan left sequential carries enable_seqscan's penalty of 10^10 in
//     its cost, which passes every jit_*_above_cost, so PostgreSQL compiled, inlined and optimised each
//     execution of the worker's small periodic reads (the tenants' weights, the endings due): 200–800 ms
//     of CPU each, a third of the server's CPU in make bench-bots' paid part. None of the worker's
//     statements reads enough rows for JIT to pay back its compilation.
//
// Both are sound for the worker because none of its statements depends on its arguments' values to find
// its rows: no statement of this package passes a state or a kind as an argument (they are literals
// rendered from the lifecycle, which the partial indexes' predicates match); the worker's statements name
// rows by key or read a partial index in order with a LIMIT. docs/benchmarks.md, issue 43.
func StablePlans(cfg *pgxpool.Config) {
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
	cfg.ConnConfig.RuntimeParams["jit"] = "off"
}

// Open connects to PostgreSQL and checks the connection.
func Open(ctx context.Context, url string, maxConns int32, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("while parsing the database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("while opening the database pool: %w", err)
	}
	s := &Store{pool: pool}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close releases every connection.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for the few callers (tests, benchmarks) that need raw access.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that PostgreSQL answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("while pinging PostgreSQL: %w", err)
	}
	return nil
}

// Migrate applies every embedded migration not yet applied to the database at url.
func Migrate(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("while parsing the database URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, mustSub(migrations, "migrations"))
	if err != nil {
		return fmt.Errorf("while loading migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("while applying migrations: %w", err)
	}
	return nil
}

// withTimeout gives ctx the default statement deadline unless it already has an earlier one.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < DefaultQueryTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultQueryTimeout)
}

// translate maps storage errors to domain errors at the edge of the package.
func translate(err error, doing string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("while %s: %w", doing, ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "23503") {
		return fmt.Errorf("while %s: %w (%s)", doing, ErrConflict, pgErr.ConstraintName)
	}
	return fmt.Errorf("while %s: %w", doing, err)
}

// queryMap runs a statement of two columns and returns its rows as a map of the first to the second (those
// read before an error included); doing names the read in errors, as for translate.
func queryMap[K comparable, V any](ctx context.Context, q querier, doing, sql string, args ...any) (map[K]V, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, translate(err, doing)
	}
	out := map[K]V{}
	var k K
	var v V
	_, err = pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil })
	return out, translate(err, doing)
}

// IsDataError reports whether PostgreSQL refused a statement for what its rows hold — a value it cannot
// store (class 22, data exception: a NUL in text or jsonb, a number out of range), a constraint (class 23,
// which translate reports as ErrConflict) or a row too large to index (class 54) — as opposed to being
// unavailable, out of time or wrong in itself. The same statement without the offending rows may succeed:
// a caller that batched several requests into it can run them apart, so that only the offending one fails.
func IsDataError(err error) bool {
	if errors.Is(err, ErrConflict) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23") || strings.HasPrefix(pgErr.Code, "54"))
}

// IsUnavailable reports whether err means PostgreSQL could not be reached or did not answer in time, so
// the caller may retry later (503), as opposed to a bug or a bad request.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	// The server is going away or refusing work: a fast or immediate shutdown (57P01, 57P02), a server
	// still starting (57P03), a connection failure reported by the server (class 08) or too many
	// connections (53300). A restart answers these to the sessions it ends; they are retryable.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03",
			pgErr.Code == "53300":
			return true
		}
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF)
}
