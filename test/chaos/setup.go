package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/pglocal"
)

// Main runs the scenarios, then prints the results table (and writes it to $HERALD_CHAOS_REPORT when
// set), stops the PostgreSQL cluster and removes the binaries it built. Use it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := writeReport(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	shared.mu.Lock()
	if shared.pg != nil {
		if err := shared.pg.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		}
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// shared holds what all scenarios of one test binary share: the binaries and one PostgreSQL cluster (each
// scenario gets a database of its own in it). Everything else is started afresh per scenario.
var shared struct {
	mu     sync.Mutex
	dir    string
	herald string
	kfake  string
	built  bool
	pg     *pglocal.Cluster
	err    error
	dbSeq  atomic.Int64
}

// binaries returns bin/herald and the kfake broker, building them once. $HERALD_BINARY (set by `make
// test` and `make chaos`) names an already built herald.
func binaries() (herald, kfake string, err error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.built || shared.err != nil {
		return shared.herald, shared.kfake, shared.err
	}
	if err := ensureDir(); err != nil {
		return "", "", err
	}
	build := func(out, pkg string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
		return nil
	}
	shared.herald = os.Getenv("HERALD_BINARY")
	if shared.herald == "" {
		shared.herald = filepath.Join(shared.dir, "herald")
		if shared.err = build(shared.herald, "github.com/heraldhq/herald/cmd/herald"); shared.err != nil {
			return "", "", shared.err
		}
	} else if _, err := os.Stat(shared.herald); err != nil {
		shared.err = fmt.Errorf("HERALD_BINARY: %w", err)
		return "", "", shared.err
	}
	shared.kfake = filepath.Join(shared.dir, "kfake")
	if shared.err = build(shared.kfake, "github.com/heraldhq/herald/hack/kfake"); shared.err != nil {
		return "", "", shared.err
	}
	shared.built = true
	return shared.herald, shared.kfake, nil
}

func ensureDir() error {
	if shared.dir != "" {
		return nil
	}
	d, err := os.MkdirTemp("", "herald-chaos-")
	if err != nil {
		return err
	}
	shared.dir = d
	return nil
}

// postgres returns the shared cluster, starting it on first use. A cluster that cannot start is a test
// failure, never a skip.
func postgres() (*pglocal.Cluster, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pg != nil {
		return shared.pg, nil
	}
	if err := ensureDir(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Not Durable: fsync off is safe here, since the only restart is `pg_ctl restart -m fast`, a clean
	// shutdown that writes everything out; it keeps the suite fast on a busy machine.
	c, err := pglocal.Start(ctx, pglocal.Options{Dir: filepath.Join(shared.dir, "postgres")})
	if err != nil {
		return nil, fmt.Errorf("chaos: starting PostgreSQL: %w", err)
	}
	shared.pg = c
	return c, nil
}

// newDatabase creates an empty database for one scenario; `herald migrate` then fills it.
func newDatabase(ctx context.Context) (string, *pglocal.Cluster, error) {
	c, err := postgres()
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("chaos_%d_%d", os.Getpid(), shared.dbSeq.Add(1))
	if err := c.CreateDatabase(ctx, name, ""); err != nil {
		return "", nil, err
	}
	return c.URL(name), c, nil
}
