package chaos

import (
	"os"
	"time"
)

// Mode sizes the scenarios. The short mode runs inside `make test` (plain `go test ./...`): every scenario
// once, a few minutes in all. HERALD_CHAOS=long (`make chaos`) runs them with more users, longer outages
// and repeated kills.
type Mode struct {
	Name    string
	Users   int
	Limit   float64       // global messages per second
	PerUser float64       // sends per second per user: below 1/PerChatInterval, so a backlog drains
	Warmup  int           // 202s before the first fault
	Tail    int           // 202s after the last fault
	Outage  time.Duration // how long a dependency stays down (broker cut, platform 5xx)
	Freeze  time.Duration // how long a worker stays SIGSTOPped
	Repeats int           // kills or restarts per scenario
	// RestartAfter is how long a killed process stays dead before its replacement starts, as a
	// Deployment would restart a pod.
	RestartAfter time.Duration
	Backlog      int // extra messages per user sent back to back to build a backlog
}

// CurrentMode is the mode chosen by HERALD_CHAOS ("long", or anything else for short).
func CurrentMode() Mode {
	if os.Getenv("HERALD_CHAOS") == "long" {
		return Mode{Name: "long", Users: 60, Limit: 50, PerUser: 0.5, Warmup: 300, Tail: 300,
			Outage: 15 * time.Second, Freeze: 3 * time.Second, Repeats: 3, RestartAfter: 3 * time.Second, Backlog: 10}
	}
	return Mode{Name: "short", Users: 40, Limit: 40, PerUser: 0.5, Warmup: 40, Tail: 60,
		Outage: 4 * time.Second, Freeze: 2 * time.Second, Repeats: 1, RestartAfter: 2 * time.Second, Backlog: 5}
}

// Config is the installation of the mode: its users and limit, a per-chat interval of 1 s (the product's
// default, and wide enough that a few milliseconds of scheduling jitter on a busy machine cannot look like
// a violation).
func (m Mode) Config() Config {
	return Config{Users: m.Users, RateLimit: m.Limit, PerChatInterval: time.Second}
}

// Hold keeps a fault in place for d. It is the fault's duration, chosen by the scenario — never a way to
// wait for something to happen (that is Eventually, WaitAccepted, WaitShares).
func Hold(d time.Duration) { time.Sleep(d) }
