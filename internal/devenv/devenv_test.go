package devenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/devenv"
	"github.com/heraldhq/herald/internal/egress"
)

// syncBuffer collects the walkthrough while Run writes it from another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestDevRunsTheWholeWalkthrough starts `herald dev` on embedded defaults (a private PostgreSQL from the
// local binaries, the embedded broker, the simulator) and follows the printed walkthrough to a delivered,
// branded message; then a second run on the same data directory keeps the demo key and the link.
func TestDevRunsTheWholeWalkthrough(t *testing.T) {
	dir := t.TempDir()
	key, base, stop := startDev(t, dir, "")
	do := func(method, path, body string, withKey bool) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if withKey {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return m
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Step 6 of the walkthrough first, so every event of the tour reaches the simulator's receiver.
	endpoint := do("POST", "/v1/callbacks", `{"url":"`+base+`/sim/callbacks"}`, true)["id"].(string)

	link := do("POST", "/v1/link-token", `{"user_id":"alice"}`, true)["deep_link"].(string)
	do("POST", "/sim/users/1001/open-link", `{"url":"`+link+`"}`, false)
	// The start is handled when the simulator's webhook call returns; the verification needs the link.
	eventually("the link", func() bool {
		req, _ := http.NewRequest("POST", base+"/v1/phone-verification/start", strings.NewReader(`{"user_id":"alice"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusAccepted
	})
	do("POST", "/sim/users/1001/share-contact", `{"phone_number":"15551234567"}`, false)
	eventually("verification", func() bool {
		return do("GET", "/v1/phone-verification/status/alice", "", true)["status"] == "verified"
	})
	id := do("POST", "/v1/send", `{"user_id":"alice","message":"Your order has shipped"}`, true)["tracking_id"].(string)
	eventually("delivery", func() bool { return do("GET", "/v1/status/"+id, "", true)["status"] == "delivered" })
	msgs := do("GET", "/sim/chats/1001/messages", "", false)["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)["text"]
	if last != "A message from Demo App\nYour order has shipped" {
		t.Errorf("the chat's last message is %q", last)
	}
	// Every event of the tour arrived once, signed with the endpoint's secret.
	callbacks := func() map[string]int {
		verified := map[string]int{}
		for _, c := range do("GET", "/sim/callbacks", "", false)["callbacks"].([]any) {
			m := c.(map[string]any)
			if m["verified"] != true {
				t.Errorf("a callback did not verify: %v", m)
			}
			verified[m["type"].(string)]++
		}
		return verified
	}
	eventually("the callbacks", func() bool { return len(callbacks()) == 3 })
	if got := callbacks(); got["user.linked"] != 1 || got["user.verified"] != 1 || got["notification.delivered"] != 1 {
		t.Errorf("callbacks received: %v", got)
	}
	stop()

	// Restart on the same data directory (and address: the endpoint's URL names it): same key, the user is
	// still verified.
	key2, base2, stop2 := startDev(t, dir, strings.TrimPrefix(base, "http://"))
	defer stop2()
	if key2 != key {
		t.Errorf("the demo key changed across restarts")
	}
	key, base = key2, base2
	if got := do("GET", "/v1/phone-verification/status/alice", "", true)["status"]; got != "verified" {
		t.Errorf("after a restart alice reads %v", got)
	}
	// The callback key was kept: the endpoint's secret still opens, and a ping is signed with it.
	req, _ := http.NewRequest("POST", base+"/v1/callbacks/"+endpoint+"/test", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("test ping: %v %v", res, err)
	}
	eventually("the ping", func() bool { return callbacks()["ping"] == 1 })
}

var keyLine = regexp.MustCompile(`KEY=(hk_[A-Za-z0-9_-]+)`)

// startDev runs herald dev on addr (a free port when empty) until stop is called.
func startDev(t *testing.T, dir, addr string) (key, base string, stop func()) {
	t.Helper()
	if addr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = l.Addr().String()
		l.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- devenv.Run(ctx, devenv.Options{HTTPAddr: addr, DataDir: dir, TopicPrefix: "herald", DeepLinkBase: "https://t.me",
			RateLimit: 30, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: out,
			CallbackPolicy: egress.Policy{AllowInsecure: true, AllowPrivate: true}})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !keyLine.MatchString(out.String()) {
		select {
		case err := <-done:
			t.Fatalf("herald dev stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("herald dev printed no walkthrough within 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return keyLine.FindStringSubmatch(out.String())[1], "http://" + addr, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("herald dev did not stop cleanly: %v", err)
			}
		case <-time.After(40 * time.Second):
			t.Error("herald dev did not stop within 40 s")
		}
	}
}
