package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The same run's perfectly paced sender (../shared/benchmarking.md, "Judging a rate limiter on a busy
// machine"): the simulator timestamps a send when its handler runs, so on a node busy with a rollout it
// sees the network's and the scheduler's bunching as well as the sender's spacing. A global violation of
// the workers means something only beside what a sender that cannot be wrong shows in the same seconds.
const (
	controlBotToken    = "7000003:e2e-control-bot-token"
	controlBotUsername = "e2e_control_bot"
	// controlRate is what the workers can send at most in the load (5 chats at one send per 100 ms
	// each), split like the workers' sends into controlParts senders.
	controlRate  = 50
	controlParts = 2
)

// control sends at controlRate to a bot of its own with the shared bot's limit, each call started on
// schedule from controlParts senders (a slow answer delays no later call), until ctx ends.
type control struct {
	sim   *api
	calls atomic.Int64

	mu    sync.Mutex
	fails map[string]int // calls answered neither 400 (chat not found) nor 429, by what came instead
}

func (c *cluster) startControl(t *testing.T, ctx context.Context) (*control, func()) {
	t.Helper()
	if _, err := c.sim.call("POST", "/sim/bots", map[string]any{"token": controlBotToken, "username": controlBotUsername,
		"first_name": "E2E control", "rate_limit": 100}, nil); err != nil {
		t.Fatalf("adding the control bot: %v", err)
	}
	ctl := &control{sim: newAPI(c.sim.base, ""), fails: map[string]int{}}
	ctl.sim.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	start := time.Now().Add(100 * time.Millisecond)
	interval := time.Second * controlParts / controlRate
	for part := range controlParts {
		wg.Go(func() {
			var calls sync.WaitGroup
			defer calls.Wait()
			for i := 0; ; i++ {
				at := start.Add(time.Duration(part)*interval/controlParts + time.Duration(i)*interval)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(at)):
				}
				calls.Go(func() {
					ctl.calls.Add(1)
					// A chat the simulator does not know: the send counts against the bot's global limit
					// only, and is answered 400 chat not found.
					status, err := ctl.sim.call("POST", "/bot"+controlBotToken+"/sendMessage",
						map[string]any{"chat_id": 9_000_000 + i%50, "text": "control"}, nil)
					if status != http.StatusBadRequest && status != http.StatusTooManyRequests {
						what := fmt.Sprintf("HTTP %d", status)
						if err != nil {
							what = errorKind(err)
						}
						ctl.mu.Lock()
						ctl.fails[what]++
						ctl.mu.Unlock()
					}
				})
			}
		})
	}
	return ctl, wg.Wait
}

// botStats is one bot's counts from the simulator.
func (c *cluster) botStats(t *testing.T, bot string) simStats {
	t.Helper()
	var s simStats
	c.sim.must(t, 200, "GET", "/sim/stats?bot="+bot, nil, &s)
	return s
}

// report says the control's sends and global violations beside the workers' (the shared bot's).
func (ctl *control) report(workers, workersBefore, ctlNow, ctlBefore simStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global limit (100/s, burst 5, the simulator's clock): the workers' %d sends, %d over it; "+
		"the same run's perfectly paced control (%d/s from the host, %d calls): %d over it",
		workers.Sends-workersBefore.Sends, workers.GlobalLimitViolations-workersBefore.GlobalLimitViolations,
		controlRate, ctl.calls.Load(), ctlNow.GlobalLimitViolations-ctlBefore.GlobalLimitViolations)
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	if len(ctl.fails) > 0 {
		kinds := make([]string, 0, len(ctl.fails))
		for what, n := range ctl.fails {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, what))
		}
		slices.Sort(kinds)
		fmt.Fprintf(&b, " (control calls not answered by the simulator: %s)", strings.Join(kinds, ", "))
	}
	return b.String()
}

// errorKind names a failed call's error without its addresses: a timeout, a refused or reset connection.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case strings.Contains(err.Error(), "refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "reset"):
		return "connection reset"
	}
	return "transport error"
}
