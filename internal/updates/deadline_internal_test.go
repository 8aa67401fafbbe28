package updates

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// Issue 35: a batch of updates that runs past its deadline because of one slow update is retried update by
// update, each with a deadline of its own (not the batch's, already expired): the others take effect and
// are answered, and soon. The slow update is a /stop whose opt-out waits on a row another transaction holds.
func TestASlowUpdateFailsNoOtherOfItsBatch(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	seed := fixture.New(st)
	seed.Tenant(t, "acme")
	seed.VerifiedUser(t, "acme", "slow", 7000)
	b := kafkatest.New(t, "whd")
	p := b.Producer(t, "whd")
	logger := slog.New(slog.DiscardHandler)
	ob := outbox.New(st, p, outbox.Options{Logger: logger})
	t.Cleanup(ob.Close)
	rc := New(st, ob, Options{Secret: "s", PhoneHashKey: []byte("0123456789abcdef"), Logger: logger, ApplyTimeout: 2 * time.Second})
	t.Cleanup(rc.Close)
	ctx := context.Background()
	waiting := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var got int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d statements wait for a lock, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	message := func(from int64) *messenger.Message {
		return &messenger.Message{From: &messenger.User{ID: from}, Chat: messenger.Chat{ID: from, Type: messenger.ChatPrivate}}
	}

	// The slow update's opt-out waits for this transaction's (uncommitted) one.
	holder, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `INSERT INTO opt_outs (tenant_id, user_id, category, by) VALUES ('acme', 'slow', '', 'tenant')`); err != nil {
		t.Fatal(err)
	}
	// Both batch loops wait on the claim of an update each, so that the slow update and the ten others
	// queue up and share a batch.
	claims, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = claims.Rollback(ctx) }()
	if _, err := claims.Exec(ctx, `LOCK TABLE processed_updates IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range applyLoops {
		wg.Go(func() {
			_ = rc.reply(ctx, incoming{id: int64(10 + i), m: message(int64(8000 + i))}, unbranded("filler"))
		})
	}
	waiting(applyLoops)
	wg.Go(func() {
		stop, _ := store.ChatOptOutEffect(1, store.ChatUser{ChatID: 7000, MessengerUserID: 7000}, consent.Stop,
			[]consent.Choice{{TenantID: "acme"}}, nil)
		_ = rc.apply(ctx, incoming{id: 1, m: message(7000)}, stop)
	})
	const others = 10
	errs := make([]error, others)
	answered := make([]time.Time, others)
	for i := range others {
		wg.Go(func() {
			errs[i] = rc.reply(ctx, incoming{id: int64(100 + i), m: message(int64(9000 + i))}, unbranded(fmt.Sprintf("reply %d", i)))
			answered[i] = time.Now()
		})
	}
	time.Sleep(200 * time.Millisecond) // let them queue behind the loops
	released := time.Now()
	if err := claims.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Release the slow update only once the others had time to fail or succeed without it (its own
	// deadline, 2 s, has run out by then: it fails, and the platform would send it again).
	time.Sleep(3 * time.Second)
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range others {
		// The fillers' batches, the batch's share of the deadline (400 ms), then its own retry: not the
		// slow update's 2 s.
		if took := answered[i].Sub(released); errs[i] != nil || took >= 2*time.Second {
			t.Errorf("update %d, beside a slow /stop: %v after %s, want it applied before the slow one's deadline (2 s)",
				100+i, errs[i], took.Round(time.Millisecond))
		}
	}
}
