package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	seed "github.com/heraldhq/herald/internal/testing/fixture"
)

// A chat's order across kinds and priorities (notification.AheadSQL, issue 42): a tenant notification is
// held back, in its claim, while a system message to its chat accepted before it is pending, and a
// normal one while an earlier high-priority one is; a retrying or later message holds nothing back, nor
// does one to another chat or through another bot.
func TestAnInOrderClaimWaitsForTheMessagesAheadInItsChat(t *testing.T) {
	s := fixture(t) // user "ok" linked to chat 1
	ctx := context.Background()
	f := seed.New(s)
	at := func(d time.Duration) seed.NotificationOption { return seed.CreatedAt(time.Now().Add(d)) }
	behind := func(id string) bool {
		t.Helper()
		_, err := s.ClaimDeliveryInOrder(ctx, id, time.Minute)
		var nc *store.NotClaimable
		if errors.As(err, &nc) && nc.Behind {
			return true
		}
		if err != nil {
			t.Fatalf("in-order claim of %s: %v", id, err)
		}
		return false
	}

	// "Thank you, your phone number is verified", then the tenant's message sent on user.verified.
	thanks := f.Notification(t, seed.System("acme", 1), at(-2*time.Second))
	shipped := f.Notification(t, seed.For("acme", "ok"), at(-time.Second))
	if !behind(shipped) {
		t.Fatal("the tenant's notification was claimed while the system message accepted before it was queued")
	}
	// ClaimDelivery (the worker's after its bound) takes it whatever is ahead.
	if d, err := s.ClaimDelivery(ctx, shipped, time.Minute); err != nil || d.TrackingID != shipped {
		t.Fatalf("claim regardless of order: %+v %v", d, err)
	}
	// While the system message is in its attempt it still holds the chat; once delivered, nothing does.
	later := f.Notification(t, seed.For("acme", "ok"))
	d, err := s.ClaimDelivery(ctx, thanks, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !behind(later) {
		t.Error("claimed while the system message ahead was being delivered")
	}
	if ok, err := s.FinishDelivery(ctx, d, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "1"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if behind(later) {
		t.Error("held back after the system message ahead was delivered")
	}

	// Normal behind high, not high behind normal nor behind a later high one.
	high := f.Notification(t, seed.For("acme", "ok"), seed.Priority(8), at(-2*time.Second))
	normal := f.Notification(t, seed.For("acme", "ok"), at(-time.Second))
	laterHigh := f.Notification(t, seed.For("acme", "ok"), seed.Priority(7))
	if !behind(normal) {
		t.Error("a normal notification was claimed while a high one accepted before it was queued")
	}
	if behind(laterHigh) {
		t.Error("a high notification was held back by an earlier high one (within a topic the lanes keep order)")
	}
	// A retrying message ahead holds nothing back.
	f.SetNotification(t, high, seed.InState(notification.Retrying), seed.NextAttemptAt(time.Now().Add(time.Hour)))
	if behind(normal) {
		t.Error("held back by a retrying message")
	}

	// A system message accepted after it, or to another chat, or through another bot, holds nothing back.
	f.Notification(t, seed.System("acme", 2), at(-time.Minute))
	f.Notification(t, seed.System("acme", 1), seed.Via(notification.BotID(999)), at(-time.Minute))
	first := f.Notification(t, seed.For("acme", "ok"), at(-time.Second))
	f.Notification(t, seed.System("acme", 1))
	if behind(first) {
		t.Error("held back by a system message to another chat, through another bot, or accepted after it")
	}
}

// Many claims in one statement take each notification as its own claim would: the queued ones, not the
// cancelled one, not an in-order one behind a message ahead of it in its chat (while the same
// notification claimed regardless of order is taken, and an in-order one of another chat is), a
// notification named twice once.
func TestClaimDeliveriesTakesEachAsItsOwnClaimWould(t *testing.T) {
	s := fixture(t) // user "ok" linked to chat 1
	ctx := context.Background()
	f := seed.New(s)
	verifiedUser(t, s, "acme", "other", 3)
	a := queued(t, s)
	b := f.Notification(t, seed.For("acme", "other"))
	cancelled := queued(t, s)
	if _, err := s.CancelNotification(ctx, "acme", cancelled); err != nil {
		t.Fatal(err)
	}
	f.Notification(t, seed.System("acme", 1), seed.CreatedAt(time.Now().Add(-2*time.Second)))
	behindInOrder := f.Notification(t, seed.For("acme", "ok"), seed.CreatedAt(time.Now().Add(-time.Second)))
	claims := []store.Claim{{TrackingID: a}, {TrackingID: b, InOrder: true}, {TrackingID: cancelled}, {TrackingID: behindInOrder, InOrder: true},
		{TrackingID: a}}
	ds, err := s.ClaimDeliveries(ctx, claims, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, d := range ds {
		if d == nil {
			got = append(got, "-")
			continue
		}
		if d.TrackingID != claims[i].TrackingID || d.Attempts != 1 {
			t.Errorf("claim %d returned %s attempt %d", i, d.TrackingID, d.Attempts)
		}
		got = append(got, "claimed")
	}
	want := []string{"claimed", "claimed", "-", "-", "-"}
	if !slices.Equal(got, want) {
		t.Errorf("claims %v, want %v (queued, in order with nothing ahead, cancelled, behind in order, twice)", got, want)
	}
	if ds[1] != nil && ds[1].ChatID != 3 || ds[0] != nil && ds[0].ChatID != 1 {
		t.Error("a claim read another notification's chat")
	}
	// Claimed regardless of order, the one behind is taken.
	ds, err = s.ClaimDeliveries(ctx, []store.Claim{{TrackingID: behindInOrder}}, time.Minute)
	if err != nil || ds[0] == nil {
		t.Fatalf("claim regardless of order: %v %v", ds, err)
	}
}
