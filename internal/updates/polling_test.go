package updates_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/updates"
)

// newSim serves the messenger simulator and returns it with a Bot API client pointed at it.
func newSim(t *testing.T) (*sim.Server, *messenger.Client) {
	t.Helper()
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler), GlobalRate: -1, PerChatRate: -1, WebhookBackoff: 10 * time.Millisecond})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.Close()
	})
	return s, messenger.New(srv.URL, s.Token(), nil).WithTimeout(5 * time.Second)
}

func TestSetWebhookURLRegistersSecretAndAllowedUpdates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	s, client := newSim(t)
	ctx := context.Background()

	if err := updates.SetWebhookURL(ctx, client, "ftp://example.com/hook", secret); err == nil {
		t.Fatal("a non-http URL was accepted")
	}
	if err := updates.SetWebhookURL(ctx, client, e.srv.URL+updates.Path, secret); err != nil {
		t.Fatal(err)
	}
	info := s.WebhookInfo()
	// Blocks and taps too (spec §9): the same kinds a tenant's bot is registered for.
	if want := []string{"message", "my_chat_member", "callback_query"}; info.URL != e.srv.URL+updates.Path || !slices.Equal(info.AllowedUpdates, want) {
		t.Fatalf("webhook info = %+v, want our URL and allowed_updates %v", info, want)
	}
	// The simulator now delivers like the platform: with X-Telegram-Bot-Api-Secret-Token.
	tok := e.token("acme", "u1", "Acme", "")
	if _, err := s.StartUser(501, tok); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the webhook to link the account", func() bool { return len(e.links("acme", "u1")) == 1 })
	if st := s.Stats(); st.WebhookFailures != 0 {
		t.Fatalf("the simulator saw %d refused webhook calls", st.WebhookFailures)
	}
	wait.Until(t, 10*time.Second, "the reply to be queued", func() bool { return len(e.replies()) == 1 })
	expectReply(t, e.onlyReply(), 501, "acme", brand.Render("Acme", textLinked), nil)
}

func TestPollingFeedsTheSameHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.tenant("acme", "Acme Dev")
	s, client := newSim(t)
	// A webhook left over from another mode: polling must remove it, or getUpdates is refused.
	if err := updates.SetWebhookURL(context.Background(), client, "http://127.0.0.1:1/unused", secret); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- updates.Poll(ctx, client, e.rc, discardLogger()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Poll returned %v", err)
		}
	})
	wait.Until(t, 10*time.Second, "polling to remove the webhook", func() bool { return s.WebhookInfo().URL == "" })

	tok := e.token("acme", "u1", "Acme", "")
	if _, err := s.StartUser(601, tok); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling to link the account", func() bool { return len(e.links("acme", "u1")) == 1 })
	e.session("acme", "u1", "pending", nil)
	if _, err := s.ShareContact(601, "+15551230001", nil); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling to verify the phone", func() bool { return e.verification("acme", "u1").Status == "verified" })
	if _, err := s.InjectUpdate([]byte(`{"callback_query":{"id":"1","from":{"id":601}}}`)); err != nil {
		t.Fatal(err)
	}
	// Each fetched update is confirmed by the next call's offset, so nothing stays pending.
	wait.Until(t, 10*time.Second, "the offset to confirm every update", func() bool { return len(s.PendingUpdates()) == 0 })

	rs := e.wantReplies(2) // the link's and the verification's
	expectReply(t, rs[0], 601, "acme", brand.Render("Acme", textLinked), nil)
	expectReply(t, rs[1], 601, "acme", brand.Render("Acme Dev", textVerified), removeKeyboard)
	if n := e.count(`SELECT count(*) FROM processed_updates`); n != 2 {
		t.Fatalf("%d processed updates, want 2", n)
	}
}
