package store_test

// Issue 35, item 1's last gap: an erasure commits its decision in bounded time whatever the tenant queued
// for the user, holds no gate bucket while the user's notifications end, and nothing of it is sent meanwhile.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
)

// erasureBacklog is twenty chunks of the endings' pass: far more than the erasure ends itself.
const erasureBacklog = 20 * store.EndingChunk

// sameBucketUser is a user id of tenant whose gate bucket is that of acme's user.
func sameBucketUser(t *testing.T, tenant, user string) string {
	t.Helper()
	want := store.UserGateBucketForTest("acme", user)
	for i := range 1 << 20 {
		if id := fmt.Sprintf("g%d", i); store.UserGateBucketForTest(tenant, id) == want {
			return id
		}
	}
	t.Fatal("no user in the same bucket")
	return ""
}

// waitForALockWait waits until some session waits for a row lock (the pass, stuck on the held row). The
// deadlines here and below only bound a failure: the held row makes the order certain, whatever the load.
func waitForALockWait(t *testing.T, s *store.Store) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if count(t, s, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`) > 0 {
			return
		}
	}
	t.Fatal("the pass never waited for the held row")
}

// The erasure of a user with 20,000 waiting notifications commits while one of them is locked by another
// transaction (before the fix it cancelled all of them in its own transaction, holding the user's gate
// bucket, and waited for that lock); the rest end after it, cancelled and emptied, each with its event;
// while the pass waits, another tenant's send whose user shares the bucket is accepted; a claim of one not
// ended yet reads the erasure.
func TestAnErasureCommitsInBoundedTimeAndHoldsNoBucketWhileItsNotificationsEnd(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	endpoint(t, s, "acme")
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	neighbour := sameBucketUser(t, "globex", "ok")
	verifiedUser(t, s, "globex", neighbour, 77)
	seed.New(s).Backlog(t, "acme", "ok", "", erasureBacklog)

	// Another transaction holds the oldest notification, which the pass reaches last.
	holder, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	var oldest string
	if err := holder.QueryRow(ctx, `SELECT tracking_id::text FROM notifications WHERE user_id = 'ok'
		ORDER BY created_at, tracking_id LIMIT 1 FOR UPDATE`).Scan(&oldest); err != nil {
		t.Fatal(err)
	}

	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e, err := s.EraseUser(ectx, "acme", "ok")
	if err != nil {
		t.Fatalf("the erasure of a user with %d waiting notifications, one of them locked: %v, want it committed", erasureBacklog, err)
	}
	if !e.Pending || e.Cancelled != store.EndingChunk*store.EraseInlineChunks || e.Erased != e.Cancelled {
		t.Errorf("the erasure's result %+v, want %d cancelled and emptied inline and the rest pending", e, store.EndingChunk*store.EraseInlineChunks)
	}
	for _, table := range []string{"users", "links", "link_tokens", "phone_verifications"} {
		if n := count(t, s, fmt.Sprintf(`SELECT count(*) FROM %s WHERE tenant_id = 'acme' AND user_id = 'ok'`, table)); n != 0 {
			t.Errorf("%d rows of %s left after the erasure committed", n, table)
		}
	}

	// A notification the pass has not reached: the claim reads the erasure, and its end is cancelled.
	waiting := oneWaiting(t, s)
	d, err := s.ClaimDelivery(ctx, waiting, time.Minute)
	if err != nil || !d.Erased {
		t.Fatalf("the claim of a notification of the erasure not ended yet: %+v %v, want it erased", d, err)
	}
	if ok, err := s.FinishDelivery(ctx, d, notification.DeliveryResult{Status: notification.Erase.To()}); !ok || err != nil {
		t.Fatalf("its end: %v %v", ok, err)
	}

	// The sweep's pass ends the rest; it waits for the held row, holding no bucket: a send of another
	// tenant's user of the same bucket goes through meanwhile.
	due, err := s.DueEndings(ctx, 0, 10)
	if err != nil || len(due) != 1 || due[0] != (store.UserRef{TenantID: "acme", UserID: "ok"}) {
		t.Fatalf("endings due: %v %v, want acme's ok", due, err)
	}
	type passResult struct {
		ended int
		done  bool
		err   error
	}
	pass := make(chan passResult, 1)
	go func() {
		ended, done, err := s.FinishEndings(ctx, due[0], 0)
		pass <- passResult{ended, done, err}
	}()
	waitForALockWait(t, s)
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	n := tenantNotification(neighbour)
	n.TenantID = "globex"
	if got, err := s.InsertTenantNotifications(sctx, []store.NewNotification{n}); err != nil || len(got) != 1 {
		t.Fatalf("globex's send to a user of the erased user's bucket while the pass runs: %v %v, want it accepted at once", got, err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-pass
	if r.err != nil || !r.done || r.ended+e.Cancelled+1 != erasureBacklog {
		t.Fatalf("the pass: %+v, want the %d others ended", r, erasureBacklog-1-e.Cancelled)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok' AND status = 'cancelled'`); n != erasureBacklog {
		t.Errorf("%d of the %d notifications cancelled", n, erasureBacklog)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok'
		AND (body <> '' OR chat_id IS NOT NULL OR messenger_message_id IS NOT NULL OR entities IS NOT NULL OR reply_markup IS NOT NULL)`); n != 0 {
		t.Errorf("%d notifications of the erased user keep content", n)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE type = 'notification.cancelled'`) +
		count(t, s, `SELECT count(*) FROM callback_events WHERE type = 'notification.cancelled'`); n != erasureBacklog {
		t.Errorf("%d notification.cancelled events, want one per notification", n)
	}
	if due, err := s.DueEndings(ctx, 0, 10); err != nil || len(due) != 0 {
		t.Errorf("endings due after the pass: %v %v, want none", due, err)
	}
	if _, err := s.EraseUser(ctx, "acme", "ok"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an erasure after the pass: %v, want ErrNotFound (nothing left)", err)
	}
}

// An erasure while an earlier one's pass is pending commits again (not 404: the notifications still wait),
// and the passes end each notification once, with one event; the user linked and verified again
// after the erasure is sent to, while what the erasure covers is not, even through the same chat.
func TestAnErasureWhileOneIsPendingIsSafeAndCoversOnlyWhatCameBefore(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	endpoint(t, s, "acme")
	const backlog = 3 * store.EndingChunk
	seed.New(s).Backlog(t, "acme", "ok", "", backlog)
	first, err := s.EraseUser(ctx, "acme", "ok")
	if err != nil || !first.Pending {
		t.Fatalf("first erasure: %+v %v, want it pending", first, err)
	}
	second, err := s.EraseUser(ctx, "acme", "ok")
	if err != nil || !second.Pending {
		t.Fatalf("a second erasure while the first is pending: %+v %v, want it committed, its pass pending", second, err)
	}

	// The user links the same chat again and is verified: a new send is theirs, not the erasure's.
	verifiedUser(t, s, "acme", "ok", 1)
	fresh := tenantNotification("ok")
	if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{fresh}); err != nil || len(got) != 1 {
		t.Fatalf("a send after the user linked again: %v %v", got, err)
	}
	if d, err := s.ClaimDelivery(ctx, oneWaitingBut(t, s, fresh.TrackingID), time.Minute); err != nil || !d.Erased {
		t.Errorf("the claim of a notification of the erasure, the user linked again to its chat: %+v %v, want it erased", d, err)
	}
	if d, err := s.ClaimDelivery(ctx, fresh.TrackingID, time.Minute); err != nil || d.Erased || d.ChatID != 1 {
		t.Errorf("the claim of a send after the user linked again: %+v %v, want it sent to chat 1", d, err)
	}

	third, err := s.EraseUser(ctx, "acme", "ok")
	if err != nil {
		t.Fatal(err)
	}
	ended, done, err := s.FinishEndings(ctx, store.UserRef{TenantID: "acme", UserID: "ok"}, 0)
	if err != nil || !done {
		t.Fatalf("the pass: %d %v %v", ended, done, err)
	}
	total := first.Cancelled + second.Cancelled + third.Cancelled + ended
	if want := backlog - 1; total != want { // the one claimed is its attempt's
		t.Errorf("the erasures and the pass cancelled %d, want %d", total, want)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok'
		AND (body <> '' OR chat_id IS NOT NULL OR messenger_message_id IS NOT NULL)`); n != 0 {
		t.Errorf("%d notifications keep content after the last erasure's pass", n)
	}
	if n := count(t, s, `SELECT count(*) FROM (SELECT tracking_id FROM (
		SELECT tracking_id FROM callback_inbox WHERE type = 'notification.cancelled'
		UNION ALL SELECT tracking_id FROM callback_events WHERE type = 'notification.cancelled') e GROUP BY tracking_id HAVING count(*) > 1) twice`); n != 0 {
		t.Errorf("%d notifications with more than one notification.cancelled event", n)
	}
}

// oneWaitingBut is the tracking id of one of user ok's queued notifications other than but.
func oneWaitingBut(t *testing.T, s *store.Store, but string) string {
	t.Helper()
	var id string
	if err := s.Pool().QueryRow(context.Background(),
		`SELECT tracking_id::text FROM notifications WHERE user_id = 'ok' AND status = 'queued' AND tracking_id <> $1 LIMIT 1`, but).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
