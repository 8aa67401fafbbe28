package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// A request whose rows PostgreSQL refuses fails alone: the requests that shared its batch — other
// tenants', with or without an Idempotency-Key — are stored, published and answered as if it had not been
// there. The items bypass the ingress's validation (a NUL in the body, a NUL in a metadata value): whatever
// a future validation misses, one request must never take down the others in its batch.
func TestARequestPostgreSQLRefusesFailsAlone(t *testing.T) {
	e := newEnv(t)
	e.fx.Tenant(t, "mallory", fixture.DeveloperName("Mallory"))
	e.fx.VerifiedUser(t, "mallory", "m", 9)
	// One batch loop, so that the requests sent while it is held all wait for the same next batch.
	p := e.broker.Producer(t, prefix)
	ob := outbox.New(e.st, p, outbox.Options{ProduceTimeout: 2 * time.Second, Batch: batch.Options{Loops: 1}, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(ob.Close)

	bad := []outbox.Item{
		{UserID: "m", Priority: 5, Body: "A message from Mallory\nnul\x00here"},
		{UserID: "m", Priority: 5, Body: "A message from Mallory\nhi", Metadata: map[string]string{"k": "\x00"}},
	}
	type sent struct {
		name string
		res  []outbox.Result
		err  error
	}
	const rounds, each = 3, 12
	for round := range rounds {
		// Hold the batch loop on a first request (its INSERT waits for the table lock), so the others queue up
		// behind it and share the next batch.
		ctx := context.Background()
		tx, err := e.st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE notifications IN EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		out := make(chan sent, 2*each+1)
		go func() {
			res, _, err := ob.Send(ctx, "acme", []outbox.Item{item("ok")}, nil)
			out <- sent{"the first", res, err}
		}()
		wait.Until(t, 10*time.Second, "the first batch to wait for the lock", func() bool {
			return e.count(`SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'notifications'::regclass`) > 0
		})
		var started sync.WaitGroup
		for i := range each {
			key := func(who string) *outbox.Idempotency {
				if i%2 == 0 {
					return nil
				}
				return &outbox.Idempotency{Key: fmt.Sprintf("%s-%d-%d", who, round, i), RequestHash: [32]byte{byte(i)}}
			}
			started.Add(2)
			go func() {
				started.Done()
				res, _, err := ob.Send(ctx, "acme", []outbox.Item{item("ok"), item("no")}, key("acme"))
				out <- sent{fmt.Sprintf("acme's send %d", i), res, err}
			}()
			go func() {
				started.Done()
				res, _, err := ob.Send(ctx, "mallory", bad[i%2:i%2+1], key("mallory"))
				out <- sent{fmt.Sprintf("mallory's send %d", i), res, err}
			}()
		}
		started.Wait()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		for range 2*each + 1 {
			s := <-out
			switch {
			case s.name[:7] == "mallory":
				if s.err == nil || store.IsUnavailable(s.err) || errors.Is(s.err, outbox.ErrOverloaded) {
					t.Errorf("round %d: %s: %+v, %v; want it to fail on its own data", round, s.name, s.res, s.err)
				}
			case s.err != nil || !s.res[0].Accepted() || (len(s.res) > 1 && s.res[1].Code != apierror.PhoneUnverified.Code):
				t.Errorf("round %d: %s failed beside a request PostgreSQL refuses: %+v, %v", round, s.name, s.res, s.err)
			}
		}
	}
	want := rounds * (each + 1)
	if n := e.count(`SELECT count(*) FROM notifications WHERE tenant_id = 'acme'`); n != want {
		t.Errorf("%d of acme's %d notifications stored", n, want)
	}
	if n := len(e.envelopes()); n != want {
		t.Errorf("%d envelopes published, want acme's %d", n, want)
	}
	if n := e.count(`SELECT count(*) FROM notifications WHERE tenant_id = 'mallory'`); n != 0 {
		t.Errorf("%d of mallory's notifications stored", n)
	}
	// The keys of acme's requests are kept and answered; mallory's failed requests keep none.
	if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE tenant_id = 'acme' AND published`); n != rounds*each/2 {
		t.Errorf("%d of acme's %d keys kept and answered", n, rounds*each/2)
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE tenant_id = 'mallory'`); n != 0 {
		t.Errorf("%d keys kept for mallory's failed requests", n)
	}
}
