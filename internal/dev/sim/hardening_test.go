package sim_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/httpprobe"
)

// herald sim is a server like the others: slow clients are cut after the shared header timeout and do not
// hold other requests up; oversized headers and URLs are a 4xx.
func TestSimulatorBoundsSlowAndOversizedClients(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	addr := ln.Addr().String()

	httpprobe.CheckOversized(t, addr, "/sim")
	tr := httpprobe.StartTrickle(t, addr, 200, 100*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	res, err := http.Get("http://" + addr + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != 200 || took > time.Second {
		t.Errorf("a normal request beside 200 trickling connections: status %d after %s, want 200 within 1 s", res.StatusCode, took)
	}
	tr.WaitClosed(t, 7*time.Second)
}
