package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// An ingress killed between the commit and the publish leaves a row queued that no envelope points to.
// While the group is caught up, the redrive takes it after 2 × LostPublishAfter, not QueuedRedriveAfter.
func TestARowWhoseProducerDiedBeforePublishingIsDeliveredSoon(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("u1", 4501, true)
	opts := e.fastOptions()
	opts.QueuedRedriveAfter = 10 * time.Minute // the slow path would not deliver it within the test
	opts.LostPublishAfter = time.Second
	e.start(opts)
	warm, _ := e.send("u1", "warm-up", 5) // the group has joined and consumes
	e.waitStatus(warm, "delivered", 30*time.Second)

	stored := time.Now()
	lost := fixture.New(e.st).Notification(t, fixture.For("acme", "u1"), fixture.Chat(4501), fixture.Body("never published"))
	e.waitStatus(lost, "delivered", 20*time.Second)
	if took := time.Since(stored); took < 2*opts.LostPublishAfter {
		t.Errorf("redriven %v after it was stored, before 2 × LostPublishAfter: a publish in progress could still have arrived", took)
	}
}

// The group is caught up to a moment only when it has committed past every message produced before it.
func TestCaughtUpMeansEveryEarlierMessageWasConsumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("u1", 4601, true)
	opts := e.fastOptions()
	w, err := delivery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Published, and no worker has run: not caught up to now.
	id, _ := e.send("u1", "waiting", 5)
	published := time.Now().Add(10 * time.Millisecond) // Kafka timestamps are whole milliseconds
	if ok, err := w.CaughtUpTo(ctx, published); err != nil || ok {
		t.Fatalf("caught up to now with an unconsumed message: %v, %v", ok, err)
	}
	// Before the message was produced there was nothing to consume.
	if ok, err := w.CaughtUpTo(ctx, published.Add(-time.Minute)); err != nil || !ok {
		t.Fatalf("not caught up to a minute before the only message: %v, %v", ok, err)
	}
	e.start(opts)
	e.waitStatus(id, "delivered", 30*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := w.CaughtUpTo(ctx, published)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message was delivered and committed, and the group is still not caught up")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
