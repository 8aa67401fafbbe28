package chaos_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/heraldhq/herald/test/chaos"
)

// Every scenario reads the same way: start an installation on real processes, run a steady send load,
// let some of it be accepted, inject the fault, let the load run on, then Finish: stop the load, wait
// for everything accepted to be delivered, count from the platform's side, and check. Finish always
// asserts the invariants listed on chaos.Expect (nothing accepted is lost, no error answer is
// delivered, no rate-limit violation, nothing left pending, no hang); each scenario adds what its fault
// promises.

func TestMain(m *testing.M) { chaos.Main(m) }

// must stops the scenario when an action fails (a process that does not start or die): nothing after it
// would mean anything.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// check records a failed wait (the load not accepted again, delivery not caught up, the group not
// settled) and lets the scenario go on to Finish, so that its counts still say what happened.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// Warm-up and tail phases wait on 202s; two minutes is far more than they need even on a busy machine.
const phase = 2 * time.Minute

// Product timings the recovery bounds are derived from (docs/delivery.md, internal/delivery).
const (
	sessionTimeout    = 10 * time.Second // the worker group's session: how long a dead member keeps its partitions
	visibilityWait    = 2 * time.Second  // how long a worker waits for the row of an envelope
	schedulerInterval = time.Second      // how often due retries are re-published
	backoffMax        = 2 * time.Second  // HERALD_WORKER_BACKOFF_MAX given to the workers
)

// slack absorbs, in a recovery bound, what a busy two-core machine adds (process scheduling, a group
// rebalance's join round trips, the harness's own polling), by which the same scenario's recovery varies
// between runs (docs/reliability.md, "Measured", says by how much).
const slack = 8 * time.Second

// drain is how long a backlog of n messages per user takes to go out while the load keeps adding PerUser
// per second: at one message per chat interval (1 s), or at the global limit when that binds first. The
// workers share the limit in whole messages per second each (docs/delivery.md, Rate limits), so the chats
// of one worker may get up to one message per second less between them than an even split would give:
// the limit a backlog drains at is the global one less one per worker.
func drain(mode chaos.Mode, n float64) time.Duration {
	perChat := n / (1 - mode.PerUser)
	users := float64(mode.Users)
	global := n * users / (mode.Limit - chaos.DefaultWorkers - users*mode.PerUser)
	return time.Duration(max(perChat, global) * float64(time.Second))
}

// perUser is how many messages each user sends in d.
func perUser(mode chaos.Mode, d time.Duration) float64 { return mode.PerUser * d.Seconds() }

// underLoad is every scenario's frame: it starts an installation on cfg, runs the steady load and lets a
// warm-up's worth of it be accepted; then, mode.Repeats times, it waits until delivery has caught up with
// the load (the previous fault is over and done with), injects the fault and lets a warm-up's worth be
// accepted again; last it lets the tail in. The scenario then calls Finish with what its fault promises.
func underLoad(t *testing.T, cfg chaos.Config, fault func(ctx context.Context, e *chaos.Env, load *chaos.Load)) (*chaos.Env, *chaos.Load) {
	mode := chaos.CurrentMode()
	e := chaos.Start(t, cfg)
	ctx := context.Background()
	load := e.StartLoad(mode.PerUser)
	must(t, load.WaitAccepted(ctx, mode.Warmup, phase))
	for range mode.Repeats {
		check(t, e.WaitCaughtUp(ctx, load, phase))
		fault(ctx, e, load)
		check(t, load.WaitAccepted(ctx, mode.Warmup, phase))
	}
	check(t, load.WaitAccepted(ctx, mode.Tail, phase))
	return e, load
}

// A worker dies with SIGKILL mid-stream and a replacement starts shortly after. Its partitions move once
// the group notices (the session timeout, 10 s); what it had claimed is claimable again after the lease
// (5 s). A message it sent but did not record may be sent again: at most what it had in flight.
func TestWorkerSIGKILL(t *testing.T) {
	mode := chaos.CurrentMode()
	inFlight := 0
	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, _ *chaos.Load) {
		victim := e.LiveWorkers()[0]
		n, err := e.InFlight(ctx, victim)
		must(t, err)
		// What it has in flight when the signal lands is not observable from outside: the gauge is read just
		// before, and one more send may start in between (a clean-clone run met it: in flight 0, then one
		// duplicate). One per kill covers that moment, and only it.
		inFlight += n + 1
		f := e.BeginFault("SIGKILL " + victim.Name)
		must(t, victim.Kill())
		chaos.Hold(mode.RestartAfter)
		_, err = e.StartWorker(ctx)
		must(t, err)
		f.End()
		check(t, e.WaitShares(ctx))
	})
	e.Finish(load, chaos.Expect{
		MaxDuplicates: inFlight,
		// The victim's partitions stall until the session times out; then the backlog they gathered drains
		// at one message per second per chat. Measured from the replacement's start.
		Recovery: sessionTimeout - mode.RestartAfter + drain(mode, perUser(mode, sessionTimeout)) + slack,
	})
}

// The ingress dies with SIGKILL under load and is restarted. Requests in flight get no answer (allowed);
// every 202 it gave before dying must be delivered, and envelopes of batches that never committed must
// not hold up the users' later messages.
func TestIngressSIGKILL(t *testing.T) {
	mode := chaos.CurrentMode()
	const burst = 3
	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, load *chaos.Load) {
		// Every user sends back to back for a moment, so that the kill finds requests in flight.
		load.Burst(burst)
		check(t, load.WaitAccepted(ctx, len(e.Users)/2, phase))
		ingress := e.Ingresses[0]
		f := e.BeginFault("SIGKILL " + ingress.Name)
		must(t, ingress.Kill())
		chaos.Hold(mode.RestartAfter)
		must(t, ingress.Restart())
		f.End()
	})
	e.Finish(load, chaos.Expect{
		Dropped:   true, // requests in flight when it died, and refused connections until it is back
		KeepOrder: true,
		// The burst drains; a user whose request was in flight may have an orphan envelope (produced,
		// never committed) in the lane, which holds it for the visibility wait.
		Recovery: drain(mode, burst) + visibilityWait + slack,
	})
}

// The broker is cut off (every connection reset, new ones refused: its host died) for a while under load,
// then restored. While it is cut, sends answer fast with 502 queue_error or 503 and the ingress is not
// ready; afterwards nothing accepted is lost, no row is left queued by a publish that failed, and delivery
// catches up within seconds.
func TestBrokerCut(t *testing.T) {
	brokerOutage(t, "broker cut", func(p *chaos.Proxy) { p.Cut() })
}

// The network between Herald and the broker is partitioned (connections stay open, nothing goes through:
// clients learn only from their own timeouts), then heals. The same promises as a cut; here the produce
// times out rather than failing at once, and whatever the client library still holds is delivered when
// the partition heals: envelopes of sends that were answered 502, for which no row exists.
func TestBrokerPartition(t *testing.T) {
	brokerOutage(t, "broker partitioned", func(p *chaos.Proxy) { p.Partition() })
}

func brokerOutage(t *testing.T, name string, fail func(*chaos.Proxy)) {
	mode := chaos.CurrentMode()
	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, _ *chaos.Load) {
		ingress := e.Ingresses[0]
		f := e.BeginFault(name)
		failedAt := time.Now()
		fail(e.Proxy)
		// Readiness follows the broker: a load balancer must stop sending here while it is down.
		if err := chaos.Eventually(ctx, 10*time.Second, 100*time.Millisecond, "ingress /readyz 503 while the broker is unreachable", func(ctx context.Context) error {
			if s := e.ReadyStatus(ctx, ingress); s != http.StatusServiceUnavailable {
				return fmt.Errorf("/readyz answered %d", s)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		chaos.Hold(mode.Outage - time.Since(failedAt))
		must(t, e.Proxy.Restore())
		f.End()
		if err := chaos.Eventually(ctx, 15*time.Second, 100*time.Millisecond, "ingress /readyz 200 after the broker is back", func(ctx context.Context) error {
			if s := e.ReadyStatus(ctx, ingress); s != http.StatusOK {
				return fmt.Errorf("/readyz answered %d", s)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
	// Producers reconnect at once; each worker's readers must find the group coordinator again and rejoin
	// the group, which kafka-go does with a 1 s backoff and a rebalance (allow a session timeout for it).
	// An outage longer than the session timeout has expired the members: another rebalance. Nothing is
	// accepted during the outage, so there is little backlog.
	recovery := sessionTimeout + slack
	if mode.Outage > sessionTimeout {
		recovery += sessionTimeout
	}
	e.Finish(load, chaos.Expect{
		Answers:   []int{http.StatusBadGateway, http.StatusServiceUnavailable},
		KeepOrder: true,
		Recovery:  recovery,
	})
}

// PostgreSQL is restarted (pg_ctl restart -m fast) under load. Every component recovers by itself; every
// answer during the restart is 202, 502 or 503 (never 500); a status write that could not be made is
// redriven after its lease, which may send that message twice: at most what was in flight.
func TestPostgresRestart(t *testing.T) {
	mode := chaos.CurrentMode()
	inFlight := 0
	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, _ *chaos.Load) {
		for _, w := range e.LiveWorkers() {
			n, err := e.InFlight(ctx, w)
			must(t, err)
			inFlight += n
		}
		f := e.BeginFault("pg_ctl restart -m fast")
		must(t, e.RestartPostgres(ctx))
		f.End()
	})
	e.Finish(load, chaos.Expect{
		Answers:       []int{http.StatusBadGateway, http.StatusServiceUnavailable},
		MaxDuplicates: inFlight,
		// An abandoned status write is redriven by the next redrive pass (every 30 s) once its lease
		// (5 s) has run out.
		Recovery: chaos.WorkerLease + 30*time.Second + 10*time.Second,
	})
}

// The messaging platform answers 500 to every send for a while. Every message is delivered afterwards,
// on the retry schedule; none twice. Retried messages are overtaken by later ones (docs/delivery.md,
// Ordering), so order is not required here.
//
// The workers run with HERALD_WORKER_BACKOFF_BASE=200ms and HERALD_WORKER_BACKOFF_MAX=2s (see
// chaos.workerDefaults) instead of the production schedule (15 s, 30 s, …), so that recovery is a
// matter of seconds. HERALD_WORKER_MAX_ATTEMPTS is raised so that the compressed schedule still outlasts
// the outage, as the production one (32 minutes) does.
func TestPlatform5xx(t *testing.T) {
	mode := chaos.CurrentMode()
	cfg := mode.Config()
	cfg.WorkerEnv = []string{"HERALD_WORKER_MAX_ATTEMPTS=50"}
	e, load := underLoad(t, cfg, func(ctx context.Context, e *chaos.Env, _ *chaos.Load) {
		f := e.BeginFault("platform answers 5xx")
		must(t, e.SetSimFaults(ctx, map[string]any{"error_rate_5xx": 1.0}))
		chaos.Hold(mode.Outage)
		must(t, e.SetSimFaults(ctx, nil))
		f.End()
	})
	e.Finish(load, chaos.Expect{
		// The last failure's wait (at most the backoff cap + 20 % jitter), the scheduler's pass, then
		// what failed during the outage drains at one message per second per chat.
		Recovery: backoffMax*6/5 + schedulerInterval + drain(mode, perUser(mode, mode.Outage)) + slack,
	})
}

// A worker is stopped with SIGTERM under load, and a replacement joins afterwards: two handovers. It
// drains before it leaves the group, so no message is sent twice, and the per-chat pacing and each user's
// order hold across both handovers.
func TestWorkerSIGTERM(t *testing.T) {
	mode := chaos.CurrentMode()
	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, load *chaos.Load) {
		// A backlog, so that each handover finds users with messages queued behind the one in delivery.
		load.Burst(mode.Backlog)
		check(t, load.WaitAccepted(ctx, len(e.Users)*mode.Backlog/2, phase))
		victim := e.LiveWorkers()[0]
		f := e.BeginFault("SIGTERM " + victim.Name)
		// The grace period is 20 s; the worker should take about a per-chat interval to drain.
		took, err := victim.Term(30 * time.Second)
		if err != nil {
			t.Error(err)
		}
		t.Logf("%s exited %v after SIGTERM", victim.Name, took.Round(time.Millisecond))
		check(t, e.WaitShares(ctx))
		load.Burst(mode.Backlog)
		check(t, load.WaitAccepted(ctx, len(e.Users)*mode.Backlog/2, phase))
		_, err = e.StartWorker(ctx)
		must(t, err)
		check(t, e.WaitShares(ctx))
		f.End()
	})
	e.Finish(load, chaos.Expect{
		KeepOrder: true,
		// Two bursts per round, the second while the first may still be draining (a user's queue holds up
		// to both): the drain of two backlogs, plus the slack.
		Recovery: drain(mode, 2*float64(mode.Backlog)) + slack,
	})
}

// A worker is frozen (SIGSTOP) while there is a backlog, then resumed. It keeps its partitions (the freeze
// is shorter than the session timeout); when it wakes, it must not make up for lost time with a burst.
func TestWorkerSIGSTOP(t *testing.T) {
	mode := chaos.CurrentMode()
	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, load *chaos.Load) {
		// A backlog: every user sends Backlog messages back to back, several seconds of work at the
		// per-chat limit; freeze once about half of it is in.
		load.Burst(mode.Backlog)
		check(t, load.WaitAccepted(ctx, len(e.Users)*mode.Backlog/2, phase))
		victim := e.LiveWorkers()[0]
		f := e.BeginFault("SIGSTOP " + victim.Name)
		must(t, victim.Stop())
		chaos.Hold(mode.Freeze)
		must(t, victim.Cont())
		f.End()
	})
	e.Finish(load, chaos.Expect{
		KeepOrder: true,
		// The backlog drains; the freeze holds half of it up for its duration.
		Recovery: drain(mode, float64(mode.Backlog)) + mode.Freeze + slack,
	})
}

// An ingress is stopped with SIGTERM under load while a second one keeps serving. It finishes the requests
// it has: none fails with a transport error or a 5xx. Requests that never reached it (a refused
// connection, or a keep-alive connection it closed as idle) go to the other ingress, as a load balancer
// would send them.
func TestIngressSIGTERM(t *testing.T) {
	mode := chaos.CurrentMode()
	cfg := mode.Config()
	cfg.Ingresses = 2
	const burst = 3
	e, load := underLoad(t, cfg, func(ctx context.Context, e *chaos.Env, load *chaos.Load) {
		// Every user sends back to back for a moment, so that SIGTERM finds requests in flight.
		load.Burst(burst)
		check(t, load.WaitAccepted(ctx, len(e.Users)/2, phase))
		victim := e.Ingresses[0]
		f := e.BeginFault("SIGTERM " + victim.Name)
		took, err := victim.Term(30 * time.Second)
		if err != nil {
			t.Error(err)
		}
		t.Logf("%s exited %v after SIGTERM", victim.Name, took.Round(time.Millisecond))
		check(t, load.WaitAccepted(ctx, mode.Warmup, phase))
		must(t, victim.Restart())
		must(t, victim.WaitHTTP(ctx, "/readyz"))
		f.End()
	})
	e.Finish(load, chaos.Expect{
		// Graceful: readiness turns 503 first, the load stops routing to it, and
		// nothing in flight or on a kept-alive connection is cut.
		KeepOrder: true,
		Recovery:  drain(mode, burst) + slack,
	})
}
