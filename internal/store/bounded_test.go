package store_test

// Issue 35: one tenant's volume must not make a user's opt-out, relink or erasure unbounded work.

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
)

// backlogSize is a tenant's backlog for one user big enough that ending it all in the opt-out's
// transaction takes seconds (issue 35: 300,000 took past the webhook's 5 s), small enough for CI.
const backlogSize = 30_000

// An opt-out commits its decision in bounded time whatever the tenant has queued for the user: the
// covered notifications end after it, in chunks, and none of them is claimable meanwhile.
func TestAnOptOutCommitsInBoundedTimeWhateverTheTenantQueued(t *testing.T) {
	s := fixture(t)
	endpoint(t, s, "acme")
	seed.New(s).Backlog(t, "acme", "ok", "", backlogSize)

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := s.OptOut(ctx, "acme", "ok", "", consent.ByUser)
	if err != nil || !res.Made {
		t.Fatalf("opt-out of a user with %d waiting notifications, within 500 ms: %+v %v (after %s), want it made",
			backlogSize, res, err, time.Since(start).Round(time.Millisecond))
	}
	if n := count(t, s, `SELECT count(*) FROM opt_outs WHERE tenant_id = 'acme' AND user_id = 'ok'`); n != 1 {
		t.Fatalf("%d opt-outs committed, want 1", n)
	}
	if !res.Pending || res.Ended != store.EndingChunk*store.OptOutInlineChunks {
		t.Errorf("the opt-out's result %+v, want %d ended inline and the rest pending", res, store.EndingChunk*store.OptOutInlineChunks)
	}

	// Meanwhile the claim refuses what the opt-out covers.
	waiting := oneWaiting(t, s)
	if d, err := s.ClaimDelivery(context.Background(), waiting, time.Minute); err != nil || !d.OptedOut {
		t.Errorf("the claim of a covered notification not ended yet: %+v %v, want it opted out", d, err)
	}

	// The sweep finds the pass unfinished and ends the rest, each with its event.
	due, err := s.DueEndings(context.Background(), 0, 10)
	if err != nil || len(due) != 1 || due[0] != (store.UserRef{TenantID: "acme", UserID: "ok"}) {
		t.Fatalf("endings due: %v %v, want acme's ok", due, err)
	}
	ended, done, err := s.FinishEndings(context.Background(), due[0], 0)
	if err != nil || !done || ended+res.Ended != backlogSize-1 {
		t.Fatalf("the pass: %d ended, done %v, %v; want the %d others ended", ended, done, err, backlogSize-1-res.Ended)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok' AND status = 'blocked' AND last_error_code = $1`,
		notification.CodeOptedOut); n != backlogSize-1 {
		t.Errorf("%d notifications ended opted out, want %d", n, backlogSize-1)
	}
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE type = 'notification.blocked'`) +
		count(t, s, `SELECT count(*) FROM callback_events WHERE type = 'notification.blocked'`); n != backlogSize-1 {
		t.Errorf("%d notification.blocked events, want one per ended notification", n)
	}
	if due, err := s.DueEndings(context.Background(), 0, 10); err != nil || len(due) != 0 {
		t.Errorf("endings due after the pass: %v %v, want none", due, err)
	}
}

// A relink commits in bounded time whatever waits for the user's previous chat; the claim refuses those
// meanwhile, and the pass ends them unlinked.
func TestARelinkCommitsInBoundedTimeWhateverTheTenantQueued(t *testing.T) {
	s := fixture(t)
	seed.New(s).Backlog(t, "acme", "ok", "", backlogSize)
	digest := sha256.Sum256([]byte("relink"))
	if _, err := s.CreateLinkToken(context.Background(), "acme", "ok", digest, "Acme"); err != nil {
		t.Fatal(err)
	}
	effect, res := store.RedeemLinkToken(1, store.Redemption{Digest: digest, MessengerUserID: 99, ChatID: 99},
		func(store.LinkResult) store.NewNotification {
			return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 99, Priority: 9, Body: "linked"}
		})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.ApplyUpdates(ctx, []*store.Effect{effect}); err != nil || res.Outcome != store.LinkLinked {
		t.Fatalf("a relink of a user with %d waiting notifications, within 500 ms: %v %+v (after %s), want it linked",
			backlogSize, err, res, time.Since(start).Round(time.Millisecond))
	}
	if d, err := s.ClaimDelivery(context.Background(), oneWaiting(t, s), time.Minute); err != nil || !d.Relinked {
		t.Errorf("the claim of a notification for the previous chat: %+v %v, want it refused (relinked)", d, err)
	}
	if n := finishEndings(t, s, effect); n != backlogSize-1 {
		t.Errorf("the pass ended %d, want %d", n, backlogSize-1)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE user_id = 'ok' AND status = 'unlinked' AND last_error_code = $1`,
		notification.CodeRelinked); n != backlogSize-1 {
		t.Errorf("%d notifications ended relinked, want %d", n, backlogSize-1)
	}
}

// oneWaiting is the tracking id of one of user ok's queued notifications.
func oneWaiting(t *testing.T, s *store.Store) string {
	t.Helper()
	var id string
	if err := s.Pool().QueryRow(context.Background(),
		`SELECT tracking_id::text FROM notifications WHERE user_id = 'ok' AND status = 'queued' LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Issue 35, item 2: what /stop and /resume read of a chat is bounded whatever a tenant stored for its user
// (30,000 category opt-outs, written past the API's cap, e.g. before it), merged in linear time, and the
// other tenants of the chat are still offered.
func TestChatTenantsIsBoundedWhateverATenantStored(t *testing.T) {
	s := fixture(t)
	if err := s.CreateTenant(context.Background(), "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "globex", "g", 1)
	exec(t, s, `INSERT INTO opt_outs (tenant_id, user_id, category, by)
		SELECT 'acme', 'ok', 'c' || i, 'tenant' FROM generate_series(1, 30000) AS i`)
	exec(t, s, `INSERT INTO notifications (tracking_id, kind, tenant_id, user_id, chat_id, status, priority, body, category)
		SELECT gen_random_uuid(), 'tenant', 'acme', 'ok', 1, 'delivered', 5, 'x', 's' || i FROM generate_series(1, 30000) AS i`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	got, err := s.ChatTenants(ctx, store.ChatUser{ChatID: 1, MessengerUserID: 1})
	if err != nil || len(got) != 2 {
		t.Fatalf("the chat's tenants: %d, %v (after %s), want acme and globex within 1 s", len(got), err, time.Since(start).Round(time.Millisecond))
	}
	if n := len(got[0].OptOuts); n > store.MaxCategoryOptOuts+1 {
		t.Errorf("acme's user shows %d opt-outs, want at most %d", n, store.MaxCategoryOptOuts+1)
	}
	if n := len(got[0].Categories); n > store.MaxChatCategories {
		t.Errorf("acme's user shows %d categories, want at most %d", n, store.MaxChatCategories)
	}
	if got[1].TenantID != "globex" {
		t.Errorf("the second tenant is %q, want globex", got[1].TenantID)
	}
}

// Past the cap a category opt-out is refused (ErrTooManyOptOuts); one the user has, and the whole tenant's,
// are not.
func TestCategoryOptOutsAreCapped(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	exec(t, s, `INSERT INTO opt_outs (tenant_id, user_id, category, by)
		SELECT 'acme', 'ok', 'c' || i, 'tenant' FROM generate_series(1, $1::int) AS i`, store.MaxCategoryOptOuts)
	if _, err := s.OptOut(ctx, "acme", "ok", "one-more", consent.ByTenant); !errors.Is(err, store.ErrTooManyOptOuts) {
		t.Errorf("a category opt-out past the cap: %v, want ErrTooManyOptOuts", err)
	}
	if _, err := s.OptOut(ctx, "acme", "ok", "c1", consent.ByUser); err != nil {
		t.Errorf("the user taking over an opt-out at the cap: %v", err)
	}
	if res, err := s.OptOut(ctx, "acme", "ok", "", consent.ByUser); err != nil || !res.Made {
		t.Errorf("the whole tenant's opt-out at the cap: %+v %v", res, err)
	}
}
