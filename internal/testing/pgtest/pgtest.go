// Package pgtest gives tests a real PostgreSQL: one throwaway cluster per test binary, started from the
// local binaries, and a fresh, migrated database per test (cloned from a template, so it is fast).
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// and in a test: url := pgtest.NewDatabase(t).
package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/pglocal"
	"github.com/heraldhq/herald/internal/store"
)

const template = "herald_template"

var (
	mu       sync.Mutex
	cluster  *pglocal.Cluster
	tmpDir   string
	dbSeq    atomic.Int64
	startErr error
)

// Main runs the tests and stops the cluster afterwards, then exits.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs the tests, stops the cluster afterwards and returns the exit code, for a TestMain that has
// more to tear down (an envtest control plane) before exiting.
func Run(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	if cluster != nil {
		_ = cluster.Stop()
		_ = os.RemoveAll(tmpDir)
	}
	mu.Unlock()
	return code
}

func ensure() (*pglocal.Cluster, error) {
	mu.Lock()
	defer mu.Unlock()
	if cluster != nil || startErr != nil {
		return cluster, startErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "herald-pgtest-")
	if err != nil {
		startErr = err
		return nil, err
	}
	c, err := pglocal.Start(ctx, pglocal.Options{Dir: dir})
	if err != nil {
		startErr = fmt.Errorf("pgtest: starting PostgreSQL: %w", err)
		_ = os.RemoveAll(dir)
		return nil, startErr
	}
	if err := c.CreateDatabase(ctx, template, ""); err != nil {
		startErr = err
		return nil, err
	}
	if err := store.Migrate(ctx, c.URL(template)); err != nil {
		startErr = err
		return nil, err
	}
	cluster, tmpDir = c, dir
	return c, nil
}

// NewDatabase creates a fresh database with every migration applied and returns its URL. The test fails
// at once if PostgreSQL cannot be started: a missing database is an error, never a skip.
func NewDatabase(t testing.TB) string {
	t.Helper()
	c, err := ensure()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbSeq.Add(1))
	// Cloning from a template is refused while another session is connected to the template; the only
	// sessions on it are our own short ones, so serialise the clones.
	mu.Lock()
	err = c.CreateDatabase(context.Background(), name, template)
	mu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c.URL(name)
}

// NewStore opens a Store on a fresh database and closes it when the test ends.
func NewStore(t testing.TB) (*store.Store, string) {
	t.Helper()
	url := NewDatabase(t)
	s, err := store.Open(context.Background(), url, 20)
	if err != nil {
		t.Fatalf("pgtest: opening store: %v", err)
	}
	t.Cleanup(s.Close)
	return s, url
}
