package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// Eight messenger users redeem one token at the same time, each in its own update: exactly one is linked,
// and every other is told the token was used.
func TestLinkTokenSingleUseUnderConcurrency(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	digest := sha256.Sum256([]byte("the-token"))
	if _, err := s.CreateLinkToken(ctx, "acme", "new-user", digest, "Acme Shop"); err != nil {
		t.Fatal(err)
	}
	reply := func(store.LinkResult) store.NewNotification {
		return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 1, Priority: 9, Body: "reply"}
	}
	outcomes := make([]store.LinkOutcome, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			effect, res := store.RedeemLinkToken(int64(1000+i), store.Redemption{Digest: digest, MessengerUserID: int64(500 + i), ChatID: int64(500 + i)}, reply)
			if err := s.ApplyUpdates(ctx, []*store.Effect{effect}); err != nil {
				t.Error(err)
				return
			}
			if len(effect.Replies) != 1 {
				t.Errorf("redemption %d inserted %d replies, want 1", i, len(effect.Replies))
			}
			outcomes[i] = res.Outcome
		})
	}
	wg.Wait()
	linked := 0
	for _, o := range outcomes {
		switch o {
		case store.LinkLinked:
			linked++
		case store.LinkUsed:
		default:
			t.Errorf("outcome %q, want linked or used", o)
		}
	}
	if linked != 1 {
		t.Fatalf("%d redemptions linked, want exactly 1 (%v)", linked, outcomes)
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'acme' AND user_id = 'new-user'`); n != 1 {
		t.Errorf("%d links for the user, want 1", n)
	}
}

// An update id takes effect once: the second copy is ErrUpdateProcessed and inserts nothing.
func TestAnUpdateAppliesOnce(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	msg := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 1, Priority: 9, Body: "pong"}
	first := store.ReplyEffect(77, msg)
	again := store.ReplyEffect(77, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 1, Priority: 9, Body: "pong"})
	if err := s.ApplyUpdates(ctx, []*store.Effect{first, again}); err != nil {
		t.Fatal(err)
	}
	if first.Err != nil || len(first.Replies) != 1 {
		t.Errorf("first copy: err %v, %d replies; want applied with its reply", first.Err, len(first.Replies))
	}
	if !errors.Is(again.Err, store.ErrUpdateProcessed) || len(again.Replies) != 0 {
		t.Errorf("second copy: err %v, %d replies; want ErrUpdateProcessed and nothing", again.Err, len(again.Replies))
	}
	if n := count(t, s, `SELECT count(*) FROM notifications`); n != 1 {
		t.Errorf("%d replies stored, want 1", n)
	}
}
