package chaos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A shell loop that logs a line every 50 ms and exits 0 on SIGTERM: enough to see stop, continue, kill,
// term and restart act on a real process.
const ticker = `trap 'echo bye; exit 0' TERM; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done`

func TestProcSignalsAndRestart(t *testing.T) {
	sh := "/bin/sh"
	if _, err := os.Stat(sh); err != nil {
		t.Fatalf("no %s: %v", sh, err)
	}
	p := newProc("ticker", "", filepath.Join(t.TempDir(), "ticker.log"), sh, []string{"-c", ticker}, os.Environ())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ticks := func() int { return p.CountLog("tick ") }
	if _, err := p.WaitLog(ctx, regexp.MustCompile(`tick 3\n`)); err != nil {
		t.Fatal(err)
	}

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	// A stopped process logs nothing more: wait for the count to hold still over several periods.
	frozen := ticks()
	err := Eventually(ctx, 10*time.Second, 300*time.Millisecond, "no ticks while stopped", func(context.Context) error {
		if n := ticks(); n != frozen {
			frozen = n
			return errTicking
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	if err := Eventually(ctx, 10*time.Second, 50*time.Millisecond, "ticking again", func(context.Context) error {
		if ticks() <= frozen {
			return errTicking
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if _, err := p.Term(10 * time.Second); err != nil {
		t.Fatalf("Term: %v", err)
	}
	if !strings.Contains(p.Tail(3), "bye") {
		t.Errorf("no goodbye after SIGTERM:\n%s", p.Tail(3))
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("not running after Restart")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.ExitErr() == nil {
		t.Errorf("after SIGKILL: running %v, exit %v", p.Running(), p.ExitErr())
	}
	if n := p.CountLog("=== start #"); n != 2 {
		t.Errorf("%d start markers in the log, want 2", n)
	}
}

var errTicking = errors.New("still ticking")
