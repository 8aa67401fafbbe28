package sim_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
)

// A /start payload is a link token: whoever reads it in a log can link their own account to the tenant's
// user for 15 minutes. The simulator logs that a user started the bot, never the payload; nor the text of
// messages, which is the user's.
func TestTheSimulatorLogsNoStartTokenAndNoText(t *testing.T) {
	var log syncbuf.Buffer
	s := sim.New(sim.Options{Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer s.Close()
	const token = "tok_Zq8Xv3mK0pL7rT2wY5uN9bC4dF6hJ1sA"
	if _, err := s.StartUser(1001, token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenLink(1002, "https://t.me/"+s.BotUsername()+"?start="+token+"x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SendText(1003, "my private words"); err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if !strings.Contains(out, "user sent a message") {
		t.Fatalf("the simulator logs nothing about messages; the test proves nothing:\n%s", out)
	}
	for _, secret := range []string{token, "private words"} {
		if strings.Contains(out, secret) {
			t.Errorf("the simulator's log holds %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "command=/start") {
		t.Errorf("the log should still name the command:\n%s", out)
	}
}
