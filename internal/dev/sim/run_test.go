package sim_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

func TestRunServesUntilCanceled(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx, addr, sim.Options{Logger: slog.New(slog.DiscardHandler)}) }()

	c := messenger.New("http://"+addr, sim.DefaultToken, nil)
	waitFor(t, "the simulator to listen", func() bool { _, err := c.GetMe(t.Context()); return err == nil })

	// A long poll in progress must not hold up the shutdown.
	pollEnded := make(chan struct{})
	go func() {
		_, _ = c.GetUpdates(context.Background(), 0, 30, nil) // whatever it answers, it must end
		close(pollEnded)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop within 5 s")
	}
	select {
	case <-pollEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll was not released")
	}
	if _, err := c.GetMe(t.Context()); !errors.Is(err, messenger.ErrNetwork) {
		t.Errorf("after Run returned, the port must be closed: %v", err)
	}
}

func TestRunReportsAListenError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := sim.Run(t.Context(), l.Addr().String(), sim.Options{Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Fatal("Run on a port in use must fail")
	}
}

func TestHandlerWorksUnderAPrefix(t *testing.T) {
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()
	mux := http.NewServeMux()
	mux.Handle("/messenger-sim/", http.StripPrefix("/messenger-sim", s.Handler()))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	c := messenger.New("http://"+l.Addr().String()+"/messenger-sim", s.Token(), nil)
	if me, err := c.GetMe(t.Context()); err != nil || me.Username != sim.DefaultBotUsername {
		t.Fatalf("getMe under a prefix: %+v %v", me, err)
	}
}

func TestStatsResetAndHelp(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Fatal(err)
	}
	e.sendText(t, 1, "y")
	noError(t, e.sim.SetFaults(sim.Faults{LatencyMS: 1}))
	var st sim.Stats
	e.mustControl(t, "GET", "/sim/stats", nil, &st)
	if st.Sends != 1 || st.Delivered != 1 || st.UpdatesGenerated != 1 || st.UpdatesPending != 1 || st.PeakSendsPerSecond != 1 {
		t.Errorf("stats = %+v", st)
	}
	e.mustControl(t, "POST", "/sim/reset", nil, nil)
	if st := e.sim.Stats(); st != (sim.Stats{}) {
		t.Errorf("stats after reset = %+v", st)
	}
	if _, ok := e.sim.GetUser(1); ok || len(e.sim.Messages(1)) != 0 || e.sim.Faults().LatencyMS != 0 {
		t.Error("reset must forget users, messages and faults")
	}
	if _, err := e.send(t, 1, "x"); messenger.Classify(err) != messenger.Unlinked {
		t.Errorf("after reset the chat is unknown: %v", err)
	}

	var help map[string]any
	e.mustControl(t, "GET", "/sim", nil, &help)
	if help["bot_username"] != sim.DefaultBotUsername || help["routes"] == nil {
		t.Errorf("GET /sim = %v", help)
	}
	var apiErr struct{ Error, Message string }
	if status := e.control(t, "GET", "/sim/nope", nil, &apiErr); status != 404 || apiErr.Error != "not_found" {
		t.Errorf("unknown control route: %d %+v", status, apiErr)
	}
}

func TestWaitMessages(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 1})
	// Its error shows as the message not arriving.
	time.AfterFunc(50*time.Millisecond, func() {
		_, _ = e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 1, Text: "a"})
	})
	msgs, err := e.sim.WaitMessages(t.Context(), 1, 1)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "a" {
		t.Fatalf("WaitMessages = %+v, %v", msgs, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.sim.WaitMessages(ctx, 1, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a message that never comes: %v", err)
	}
}
