package store_test

import (
	"context"
	"errors"
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
