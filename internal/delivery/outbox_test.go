package delivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// An envelope whose row does not exist is one whose publish was given up (the request was answered 502
// and its row deleted) but that reached the broker after all. Every producer commits its row before it
// publishes, so the worker drops such an envelope at once: it must not hold its user's lane, and the
// user's next message goes out without waiting for it.
func TestOrphanEnvelopeDoesNotHoldTheLane(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("u1", 4101, true)
	opts := e.fastOptions()
	e.start(opts)

	// Warm up: the worker has joined the group and delivers.
	first, _ := e.send("u1", "warm-up", 5)
	e.waitStatus(first, "delivered", 30*time.Second)

	// Five orphans on u1's chat's key, then a real message behind them on the same partition.
	for range 5 {
		if err := e.producer.Publish(context.Background(), queue.NewOutgoing(uuid.Must(uuid.NewV7()).String(), "acme", "u1", 4101, 5)); err != nil {
			t.Fatalf("publish orphan: %v", err)
		}
	}
	id, accepted := e.send("u1", "after the orphans", 5)
	r := e.waitStatus(id, "delivered", 30*time.Second)
	// The worker used to wait 2 s for each missing row (10 s for five); dropping them at once leaves the
	// per-chat interval (1 s after the warm-up message) as the only wait.
	if took := r.UpdatedAt.Sub(accepted); took > 1500*time.Millisecond {
		t.Errorf("the message behind five orphan envelopes took %v from 202 to delivered; orphans held the lane", took)
	}
	if got := e.texts(4101); len(got) != 2 {
		t.Errorf("chat received %d messages, want 2: %q", len(got), got)
	}
}

// A reply whose publish failed (the broker was away) is stored with published_at cleared; the relay in
// every worker publishes it once the broker takes it, and it is delivered.
func TestRelayPublishesWhatFailedToPublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	if _, err := e.sim.EnsureUser(sim.User{ID: 4201}); err != nil {
		t.Fatal(err)
	}
	id := fixture.New(e.st).Notification(t, fixture.System("acme", 4201), fixture.Body("relayed reply"), fixture.Unpublished())
	e.start(e.fastOptions())
	e.waitStatus(id, "delivered", 30*time.Second)
	if got := e.texts(4201); len(got) != 1 || got[0] != "relayed reply" {
		t.Fatalf("chat received %q, want the relayed reply once", got)
	}
}

// During a partition handover the worker giving a partition up may still be sending a message that the
// new owner reads again. The new owner waits for that attempt to end instead of skipping ahead, so the
// user's next message is neither sent before it nor closer to it than the per-chat interval.
func TestHandoverWaitsForTheOtherAttemptAndKeepsThePace(t *testing.T) {
	t.Parallel()
	const interval = time.Second
	e := newEnv(t, sim.Options{})
	e.user("u1", 4301, true)
	opts := e.fastOptions()
	opts.PerChatInterval = interval
	e.start(opts)
	warm, _ := e.send("u1", "warm-up", 5)
	e.waitStatus(warm, "delivered", 30*time.Second)
	// Let the per-chat interval of the warm-up message pass, so only the handover can space what follows.
	time.Sleep(interval)

	// m1 is held by "another worker": delivering under a live lease, its envelope on u1's chat's key.
	fx := fixture.New(e.st)
	m1 := fx.Notification(t, fixture.For("acme", "u1"), fixture.Chat(4301), fixture.Body("m1"),
		fixture.InState(notification.Delivering), fixture.Attempts(1), fixture.Lease(time.Now().Add(time.Minute)))
	if err := e.producer.Publish(context.Background(), queue.NewOutgoing(m1, "acme", "u1", 4301, 5)); err != nil {
		t.Fatal(err)
	}
	m2, _ := e.send("u1", "m2", 5)

	// The other worker is still sending m1: m2 must wait behind it.
	time.Sleep(700 * time.Millisecond)
	if r := e.row(m2); r.Status != "queued" {
		t.Fatalf("m2 is %s while m1 is still being sent by another worker; want queued (order)", r.Status)
	}
	// The other worker's send of m1 ends now.
	settled := time.Now()
	fx.SetNotification(t, m1, fixture.InState(notification.Delivered), fixture.NoLease(), fixture.MessageID("1"), fixture.UpdatedAt(time.Now()))

	e.waitStatus(m2, "delivered", 30*time.Second)
	msgs := e.sim.Messages(4301)
	if len(msgs) != 2 || msgs[1].Text != brand("m2") {
		t.Fatalf("chat received %d messages, want the warm-up and m2 (m1 was sent by the other worker): %v", len(msgs), msgs)
	}
	if gap := msgs[1].Time.Sub(settled); gap < time.Duration(float64(interval)*0.95) {
		t.Errorf("m2 went out %v after the other worker's send of m1 ended; want at least the per-chat interval %v", gap, interval)
	}
}

// A claim held by an attempt that never ends (its worker froze or died) is given up after HandoverWait:
// the lane moves on, and the lease's expiry lets the redrive send it again later.
func TestHandoverWaitIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("u1", 4401, true)
	opts := e.fastOptions()
	opts.PerChatInterval = 10 * time.Millisecond
	opts.HandoverWait = 500 * time.Millisecond
	opts.Lease = time.Minute // the stuck claim stays leased for the whole test
	e.start(opts)
	stuck := fixture.New(e.st).Notification(t, fixture.For("acme", "u1"), fixture.Chat(4401), fixture.Body("stuck"),
		fixture.InState(notification.Delivering), fixture.Attempts(1), fixture.Lease(time.Now().Add(time.Minute)))
	if err := e.producer.Publish(context.Background(), queue.NewOutgoing(stuck, "acme", "u1", 4401, 5)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		id, _ := e.send("u1", fmt.Sprintf("after %d", i), 5)
		ids = append(ids, id)
	}
	e.waitAllTerminal(ids, 30*time.Second)
	if r := e.row(stuck); r.Status != "delivering" || r.Attempts != 1 {
		t.Errorf("the stuck notification is %s after %d attempts; the lane must leave it to its lease", r.Status, r.Attempts)
	}
}

// The redrive counts what it finds by status, the fact behind the "lost notifications" alert: a queued row
// whose envelope never reached Kafka (a producer that died between its commit and its publish, or a broker
// that lost the message) as queued, a row left delivering by a dead worker as delivering. Both are then
// delivered. Not parallel: the counter is process-wide, and parallel tests wait until the sequential ones
// are done, so nothing else redrives meanwhile.
func TestRedriveCountsWhatItFindsByStatus(t *testing.T) {
	e := newEnv(t, sim.Options{})
	e.user("lost", 4301, true)
	e.user("dead", 4302, true)
	opts := e.fastOptions()
	queuedBefore, deliveringBefore := delivery.RedriveFound("queued"), delivery.RedriveFound("delivering")

	// Queued longer than QueuedRedriveAfter, with no envelope anywhere.
	fx := fixture.New(e.st)
	hourAgo := time.Now().Add(-time.Hour)
	lost := fx.Notification(t, fixture.For("acme", "lost"), fixture.Chat(4301), fixture.Body("lost envelope"),
		fixture.PublishedAt(hourAgo), fixture.CreatedAt(hourAgo), fixture.UpdatedAt(hourAgo))
	e.start(opts)
	e.waitStatus(lost, "delivered", 30*time.Second)
	if got := delivery.RedriveFound("queued") - queuedBefore; got < 1 {
		t.Errorf("herald_worker_redrive_found_total{status=\"queued\"} moved by %v after a lost envelope, want at least 1", got)
	}
	if got := delivery.RedriveFound("delivering") - deliveringBefore; got != 0 {
		t.Errorf("herald_worker_redrive_found_total{status=\"delivering\"} moved by %v with no expired lease, want 0", got)
	}

	// Left delivering by a worker that died: its lease has expired.
	dead := fx.Notification(t, fixture.For("acme", "dead"), fixture.Chat(4302), fixture.Body("dead worker"),
		fixture.InState(notification.Delivering), fixture.Attempts(1), fixture.Lease(time.Now().Add(-time.Minute)), fixture.PublishedAt(hourAgo))
	e.waitStatus(dead, "delivered", 30*time.Second)
	if got := delivery.RedriveFound("delivering") - deliveringBefore; got < 1 {
		t.Errorf("herald_worker_redrive_found_total{status=\"delivering\"} moved by %v after an expired lease, want at least 1", got)
	}
}

// A backlog older than QueuedRedriveAfter is waiting in Kafka, not lost: the redrive copies none of it
// (each copy would put the backlog in Kafka again at every pass, and the worker's hold would fill with
// copies, keeping other tenants' fresh messages from being fetched), and the backlog is delivered once
// each. Not parallel: the counter is process-wide.
func TestTheRedriveDoesNotCopyABacklogWaitingInKafka(t *testing.T) {
	e := newEnv(t, sim.Options{GlobalRate: 10})
	const users, perUser = 20, 5
	for u := range users {
		e.user(fmt.Sprintf("b%d", u), int64(4400+u), true)
	}
	opts := e.fastOptions()
	opts.RateLimit = 10 // 100 notifications: ten seconds of the bot's rate
	opts.QueuedRedriveAfter, opts.LostPublishAfter = time.Second, time.Second
	queuedBefore := delivery.RedriveFound("queued")
	var ids []string
	for i := range users * perUser {
		id, _ := e.send(fmt.Sprintf("b%d", i%users), fmt.Sprintf("backlog %d", i), 5)
		ids = append(ids, id)
	}
	e.start(opts)
	for id, status := range e.waitAllTerminal(ids, 60*time.Second) {
		if status != "delivered" {
			t.Errorf("notification %s is %s, want delivered", id, status)
		}
	}
	if got := delivery.RedriveFound("queued") - queuedBefore; got != 0 {
		t.Errorf("the redrive found %v queued notifications of a backlog waiting in Kafka; want none", got)
	}
	for u := range users {
		if n := len(e.sim.Messages(int64(4400 + u))); n != perUser {
			t.Errorf("chat %d received %d messages, want %d (once each)", 4400+u, n, perUser)
		}
	}
}
