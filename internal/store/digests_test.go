package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// sendDigest stores one item of digest key for user ok, as the outbox does: insert and join in one
// transaction. It returns the tracking id and the reason a digest refused it ("" when accepted).
func sendDigest(t *testing.T, s *store.Store, key string, maxItems int, format string) (string, string) {
	t.Helper()
	n := tenantNotification("ok")
	n.Status = notification.Scheduled
	n.Format = format
	n.Digest = &notification.Digest{Key: key, Window: time.Minute, MaxItems: maxItems}
	var refused map[string]string
	err := s.InTx(context.Background(), func(ctx context.Context, tx *store.Tx) error {
		accepted, err := tx.InsertTenantNotifications(ctx, []store.NewNotification{n})
		if err != nil {
			return err
		}
		refused, err = tx.JoinDigests(ctx, []store.NewNotification{n}, accepted)
		return err
	})
	if err != nil {
		t.Errorf("send: %v", err)
	}
	return n.TrackingID, refused[n.TrackingID]
}

// Many concurrent sends with one key open exactly one digest, and every item has its own place in it; past
// max_items the next ones open the next digest, so that no digest holds more, none fewer than it could,
// and no item is in two.
func TestConcurrentSendsWithOneKeyOpenOneDigest(t *testing.T) {
	s := fixture(t)
	const senders = 40
	for _, maxItems := range []int{50, 7} {
		key := "k" + string(rune('a'+maxItems%26))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, why := sendDigest(t, s, key, maxItems, ""); why != "" {
					t.Errorf("refused: %s", why)
				}
			}()
		}
		close(start)
		wg.Wait()
		wantDigests := (senders + maxItems - 1) / maxItems
		if n := count(t, s, `SELECT count(*) FROM digests WHERE key = $1`, key); n != wantDigests {
			t.Errorf("max_items %d: %d concurrent sends opened %d digests, want %d", maxItems, senders, n, wantDigests)
		}
		if n := count(t, s, `SELECT count(*) FROM digests WHERE key = $1 AND open`, key); n > 1 {
			t.Errorf("max_items %d: %d digests open at once", maxItems, n)
		}
		if n := count(t, s, `SELECT count(*) FROM digest_items i JOIN digests d ON d.id = i.digest_id WHERE d.key = $1`, key); n != senders {
			t.Errorf("max_items %d: %d items placed, want %d", maxItems, n, senders)
		}
		// Places 1..items in each digest, items never above max_items, and each digest's count true.
		if n := count(t, s, `SELECT count(*) FROM digests d WHERE d.key = $1 AND (d.items > d.max_items OR d.items <>
			(SELECT count(*) FROM digest_items i WHERE i.digest_id = d.id) OR d.items <> (SELECT max(position) FROM digest_items i WHERE i.digest_id = d.id))`, key); n != 0 {
			t.Errorf("max_items %d: %d digests whose places do not count 1..items", maxItems, n)
		}
		// A full digest is closed, and its items are due now.
		if maxItems == 7 {
			if n := count(t, s, `SELECT count(*) FROM notifications n JOIN digest_items i USING (tracking_id) JOIN digests d ON d.id = i.digest_id
				WHERE d.key = $1 AND NOT d.open AND n.send_at > now()`, key); n != 0 {
				t.Errorf("%d items of full digests are not due", n)
			}
		}
	}
}

// Items of one digest agree on format: another format is refused and taken back, and the digest goes on.
// A send after the window ended opens the next digest.
func TestADigestKeepsOneFormatAndItsWindow(t *testing.T) {
	s := fixture(t)
	first, why := sendDigest(t, s, "comments", 50, "")
	if why != "" {
		t.Fatal(why)
	}
	html, why := sendDigest(t, s, "comments", 50, notification.FormatHTML)
	if why == "" {
		t.Fatal("an html item joined a text digest")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1`, html); n != 0 {
		t.Error("the refused item was stored")
	}
	second, _ := sendDigest(t, s, "comments", 50, "")
	if n := count(t, s, `SELECT count(DISTINCT digest_id) FROM digest_items WHERE tracking_id IN ($1, $2)`, first, second); n != 1 {
		t.Errorf("two text items in %d digests, want 1", n)
	}
	v, err := s.GetNotification(context.Background(), "acme", first)
	if err != nil || v.Status != notification.Scheduled || v.SendAt == nil || v.DigestKey == nil || *v.DigestKey != "comments" || v.DigestSize != nil {
		t.Fatalf("an item waiting for its digest: %+v %v", v, err)
	}
	// The window ends: the next send opens another digest.
	exec(t, s, `UPDATE digests SET closes_at = now() - interval '1 second'`)
	third, _ := sendDigest(t, s, "comments", 50, "")
	if n := count(t, s, `SELECT count(DISTINCT digest_id) FROM digest_items WHERE tracking_id IN ($1, $2)`, first, third); n != 2 {
		t.Errorf("a send after the window joined the old digest")
	}
}

// The claim of one item gathers the others that wait, leaves out a cancelled one, records the message's
// size on each, and closes the digest: a later send opens the next.
func TestGatherTakesTheWaitingItemsAndClosesTheDigest(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	a, _ := sendDigest(t, s, "d", 50, "")
	b, _ := sendDigest(t, s, "d", 50, "")
	c, _ := sendDigest(t, s, "d", 50, "")
	if _, err := s.CancelNotification(ctx, "acme", b); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `UPDATE notifications SET status = 'queued', published_at = now() WHERE tracking_id = $1`, c)
	d, err := s.ClaimDelivery(ctx, c, time.Minute)
	if err != nil || d.DigestKey != "d" {
		t.Fatalf("claim: %+v %v", d.DigestKey, err)
	}
	items, err := s.GatherDigest(ctx, d, time.Minute)
	if err != nil || len(items) != 2 || items[0].TrackingID != a || items[1].TrackingID != c || items[0].Attempts != 1 {
		t.Fatalf("gathered %+v (%v), want a then c", items, err)
	}
	for _, id := range []string{a, c} {
		if v, _ := s.GetNotification(ctx, "acme", id); v.Status != notification.Delivering || v.DigestSize == nil || *v.DigestSize != 2 {
			t.Errorf("%s after the gather: %s size %v", id, v.Status, v.DigestSize)
		}
	}
	next, _ := sendDigest(t, s, "d", 50, "")
	if n := count(t, s, `SELECT count(DISTINCT digest_id) FROM digest_items WHERE tracking_id IN ($1, $2)`, a, next); n != 2 {
		t.Error("a send after the gather joined the digest that went")
	}
}
