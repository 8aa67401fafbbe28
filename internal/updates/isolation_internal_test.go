package updates

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/testing/kafkatest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// Concurrent updates of different users share one transaction (apply.go). One whose effect PostgreSQL
// refuses fails alone: the others of its batch take effect and are answered. The effect is made here, past
// what an update can carry (a reply is Herald's own text), so that the guard holds whatever a future
// effect stores.
func TestAnUpdatePostgreSQLRefusesFailsAlone(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	b := kafkatest.New(t, "whi")
	p := b.Producer(t, "whi")
	logger := slog.New(slog.DiscardHandler)
	ob := outbox.New(st, p, outbox.Options{Logger: logger})
	t.Cleanup(ob.Close)
	rc := New(st, ob, Options{Secret: "s", PhoneHashKey: []byte("0123456789abcdef"), Logger: logger})
	t.Cleanup(rc.Close)
	ctx := context.Background()
	count := func(q string) int {
		var n int
		if err := st.Pool().QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	message := func(from int64) *messenger.Message {
		return &messenger.Message{From: &messenger.User{ID: from}, Chat: messenger.Chat{ID: from, Type: messenger.ChatPrivate}}
	}

	// Hold the batch loops on the claim of the first updates, so that the others queue up and share batches.
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE processed_updates IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	var started sync.WaitGroup
	errs := make([]error, 2*each)
	for i := range each {
		started.Add(2)
		wg.Go(func() {
			started.Done()
			errs[2*i] = rc.reply(ctx, incoming{id: int64(100 + i), m: message(int64(5000 + i))}, unbranded("refused\x00here"))
		})
		wg.Go(func() {
			started.Done()
			errs[2*i+1] = rc.reply(ctx, incoming{id: int64(200 + i), m: message(int64(6000 + i))}, unbranded(fmt.Sprintf("reply %d", i)))
		})
	}
	started.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for count(`SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'processed_updates'::regclass`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no batch waited for the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range each {
		if err := errs[2*i]; err == nil || IsTransient(err) {
			t.Errorf("update %d, whose reply PostgreSQL refuses: %v, want it to fail on its own data", 100+i, err)
		}
		if err := errs[2*i+1]; err != nil {
			t.Errorf("update %d failed beside an update PostgreSQL refuses: %v", 200+i, err)
		}
	}
	if n := count(`SELECT count(*) FROM processed_updates WHERE update_id >= 200`); n != each {
		t.Errorf("%d of the %d valid updates took effect", n, each)
	}
	if n := count(`SELECT count(*) FROM processed_updates WHERE update_id < 200`); n != 0 {
		t.Errorf("%d refused updates recorded as processed: the platform's retry would be dropped", n)
	}
	if n := count(`SELECT count(*) FROM notifications WHERE kind = 'system'`); n != each {
		t.Errorf("%d replies stored, want the %d valid updates' replies", n, each)
	}
}
