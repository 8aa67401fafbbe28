package server_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// TestDependencyWatchReportsEachDependencyInMetrics: herald_dependency_up follows each dependency's check,
// down and back up, on /metrics, without anyone calling /readyz.
func TestDependencyWatchReportsEachDependencyInMetrics(t *testing.T) {
	var dbDown atomic.Bool
	checks := []server.ReadyCheck{
		{Name: "test_db", Check: func(context.Context) error {
			if dbDown.Load() {
				return errors.New("connection refused")
			}
			return nil
		}},
		{Name: "test_broker", Check: func(context.Context) error { return nil }},
	}
	srv := httptest.NewServer(server.NewRouter(discard()))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		server.WatchDependencies(ctx, discard(), 10*time.Millisecond, checks...)
		close(done)
	}()

	waitFor := func(want ...string) {
		t.Helper()
		wait.For(t, 5*time.Second, "/metrics to show "+strings.Join(want, " and "), func() error {
			_, body := get(t, srv.URL+"/metrics")
			for _, w := range want {
				if !strings.Contains(body, w+"\n") {
					return errors.New("no " + w)
				}
			}
			return nil
		})
	}
	waitFor(`herald_dependency_up{dependency="test_db"} 1`, `herald_dependency_up{dependency="test_broker"} 1`)
	dbDown.Store(true)
	waitFor(`herald_dependency_up{dependency="test_db"} 0`, `herald_dependency_up{dependency="test_broker"} 1`)
	dbDown.Store(false)
	waitFor(`herald_dependency_up{dependency="test_db"} 1`)

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchDependencies did not return after its context ended")
	}
}
