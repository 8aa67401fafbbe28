// Package devtest runs `herald dev` inside a test: the tests of herald dev itself, of its dev console and of
// the metrics a running Herald exports all start it the same way.
package devtest

import (
	"cmp"
	"context"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/devenv"
	"github.com/heraldhq/herald/internal/testing/background"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
)

// Dev is a running herald dev.
type Dev struct {
	Base string          // its URL, http://host:port
	Key  string          // the demo tenant's API key
	Out  *syncbuf.Buffer // what it printed: the walkthrough
	stop func()
}

// Stop stops it (once; the test's cleanup does it too) and fails the test if it does not stop cleanly within
// the time Start was given.
func (d *Dev) Stop() { d.stop() }

// keyLine is the walkthrough's line that names the address and the key.
var keyLine = regexp.MustCompile(`export HERALD=(http://\S+) KEY=(hk_[A-Za-z0-9_-]+)`)

// Start runs herald dev with o until the test ends or Stop is called: on 127.0.0.1 with a free port unless
// o.HTTPAddr names one, logging nowhere unless o.Logger is set. It returns once the walkthrough is printed;
// stopWithin bounds the stop (what a test asserts about shutdown).
func Start(t testing.TB, o devenv.Options, stopWithin time.Duration) *Dev {
	t.Helper()
	o.HTTPAddr = cmp.Or(o.HTTPAddr, "127.0.0.1:0")
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	out := &syncbuf.Buffer{}
	o.Stdout = out
	run := background.Start(t, "herald dev", stopWithin, func(ctx context.Context) error { return devenv.Run(ctx, o) })
	for deadline := time.Now().Add(60 * time.Second); !keyLine.MatchString(out.String()); time.Sleep(20 * time.Millisecond) {
		if exited, err := run.Exited(); exited {
			t.Fatalf("herald dev stopped: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("herald dev printed no walkthrough within 60 s")
		}
	}
	m := keyLine.FindStringSubmatch(out.String())
	return &Dev{Base: m[1], Key: m[2], Out: out, stop: func() { run.Stop(t) }}
}
