// Package chaos is the fault-injection suite: Herald on real processes, as a Helm install runs them,
// under a steady send load, with one fault injected at a time, counted from the messaging platform's side.
// The harness is in this package's non-test files; the scenarios are in scenarios_test.go. tracing_test.go
// uses the same installation, with no fault, to follow one send's trace across the processes.
//
// # What runs
//
// Per scenario (Start): a database of its own in one PostgreSQL cluster per test binary (internal/dev/pglocal,
// restartable with pg_ctl restart -m fast), migrated by `herald migrate`; the broker (hack/kfake) as its own
// process behind a TCP Proxy that can Cut or Partition it, and which the broker advertises so that no client
// bypasses it; `herald sim`; `herald webhook` (registered with the simulator by `herald webhook set-url`);
// `herald ingress` (one or more); `herald worker` ×2 in one group. Each is a Proc: configured by HERALD_*
// variables only, its output in a log file (printed, minus successful access-log lines, when the test
// fails), with Kill (SIGKILL), Term (SIGTERM and wait), Stop/Cont (SIGSTOP/SIGCONT) and Restart. Then a
// tenant and an API key from the admin CLI, and Users linked and phone-verified through the real flow
// (link token, deep link opened in the simulator, verification started, own contact shared).
//
// # What is measured
//
// A Load sends POST /v1/send at a fixed rate per user, one request in flight per user, each message a
// unique token; it records every answer (status, error code, latency, transport errors that prove the
// request was never served). Finish stops the load, waits until every accepted token has reached the
// simulator and every notification is terminal (or Settle passes), then counts (count.go): accepted,
// delivered, lost, duplicates, phantoms (delivered after an error answer), out-of-order per user, per-chat
// pacing violations and sliding 1-second-window global violations by the simulator's receive times, the
// simulator's own violation count, recovery times after each fault, notifications left pending in
// PostgreSQL, and orphan envelopes (no row) from the workers' logs. Every scenario asserts the invariants
// documented on Expect; the scenario adds what its fault promises (allowed answers, duplicates bound,
// order, recovery bound). Each scenario adds a row to the table Main prints and writes to
// $HERALD_CHAOS_REPORT.
//
// # Running
//
//	go test ./test/chaos/                        # the short mode, as in make test (a few minutes)
//	make chaos                                           # HERALD_CHAOS=long: more users, longer outages, repeats
//	HERALD_CHAOS_LOGS=/tmp/chaos go test -v -run TestBrokerCut ./test/chaos/   # keep the process logs
//
// $HERALD_BINARY names a built herald (make sets it); otherwise the suite builds one. PostgreSQL's server
// binaries must be installed (make postgres): a missing PostgreSQL fails the suite, it never skips.
//
// # When a scenario fails
//
// The failure names each broken expectation. The test log also has, for a failed test: the tail of every
// process's log; for each send the simulator refused for a rate limit, what the chat received around it;
// and, when messages are lost or pending, the pending rows by user, every partition the worker group has
// not consumed to its end (with its owner), each affected user's last receipts, and the live workers'
// goroutines (saved next to the logs). sends.tsv and receipts.tsv, next to the logs, hold every request
// and every receipt of the run.
//
// # Adding a scenario
//
// Copy the shape of an existing one: underLoad (scenarios_test.go) starts the installation, lets the load
// run (waiting on 202s, not on a clock) and calls the fault once per repeat, each after delivery has
// caught up with the load:
//
//	mode := chaos.CurrentMode()
//	e, load := underLoad(t, mode.Config(), func(ctx context.Context, e *chaos.Env, load *chaos.Load) {
//		f := e.BeginFault("what you do")
//		…inject: e.Workers[i].Kill(), e.Proxy.Partition(), e.SetSimFaults(…), e.RestartPostgres(…)…
//		chaos.Hold(d)                                // only for a fault's own duration
//		…undo it…
//		f.End()
//	})
//	e.Finish(load, chaos.Expect{…what this fault allows and how fast it must recover…})
//
// Wait on conditions (Eventually, WaitAccepted, WaitShares, Proc.WaitHTTP), never on a sleep; derive a
// recovery bound from the product's documented timings plus a slack for a busy machine, and say how in a
// comment.
package chaos
