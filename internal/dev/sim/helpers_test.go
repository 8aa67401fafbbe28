package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// env is a simulator served over HTTP and a real messenger client pointed at it.
type env struct {
	sim    *sim.Server
	srv    *httptest.Server
	client *messenger.Client
}

func newEnv(t *testing.T, opts sim.Options) *env {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.GlobalRate == 0 {
		opts.GlobalRate = -1 // most tests are about behaviour, not limits
	}
	if opts.PerChatRate == 0 {
		opts.PerChatRate = -1
	}
	if opts.WebhookBackoff == 0 {
		opts.WebhookBackoff = 10 * time.Millisecond
	}
	s := sim.New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.Close()
	})
	return &env{sim: s, srv: srv, client: messenger.New(srv.URL, s.Token(), nil).WithTimeout(5 * time.Second)}
}

// user makes sure the simulated user exists, or fails the test.
func (e *env) user(t *testing.T, u sim.User) {
	t.Helper()
	if _, err := e.sim.EnsureUser(u); err != nil {
		t.Fatalf("creating user %d: %v", u.ID, err)
	}
}

// noError fails the test when a step it relies on fails.
func noError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sendText has the user write text to the bot, or fails the test.
func (e *env) sendText(t *testing.T, userID int64, text string) int64 {
	t.Helper()
	id, err := e.sim.SendText(userID, text)
	if err != nil {
		t.Fatalf("user %d writing %q: %v", userID, text, err)
	}
	return id
}

// control calls the control API and decodes the answer into out (if not nil); it returns the status.
func (e *env) control(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json") // what changes state must be JSON
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// mustControl is control that expects 200.
func (e *env) mustControl(t *testing.T, method, path string, body any, out any) {
	t.Helper()
	if status := e.control(t, method, path, body, out); status != http.StatusOK {
		t.Fatalf("%s %s: status %d, want 200", method, path, status)
	}
}

func (e *env) send(t *testing.T, chatID int64, text string) (int64, error) {
	t.Helper()
	return e.client.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: chatID, Text: text})
}

// poll fetches what getUpdates has right now (no long poll).
func (e *env) poll(t *testing.T, offset int64) []messenger.Update {
	t.Helper()
	updates, err := e.client.GetUpdates(t.Context(), offset, 0, nil)
	if err != nil {
		t.Fatalf("getUpdates: %v", err)
	}
	return updates
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
