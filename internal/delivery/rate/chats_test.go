package rate

import (
	"context"
	"testing"
	"time"
)

func TestChatLimiterSpacesAndThrottles(t *testing.T) {
	c := NewChats(100 * time.Millisecond)
	ctx := t.Context()
	start := time.Now()
	for range 3 {
		if err := c.Wait(ctx, 7); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 190*time.Millisecond {
		t.Errorf("three sends to one chat took %v, want at least 200 ms", elapsed)
	}
	if err := c.Wait(ctx, 8); err != nil || time.Since(start) > 400*time.Millisecond {
		t.Error("another chat must not wait for chat 7")
	}
	if c.Throttle(9, time.Second) {
		t.Error("one throttled chat is not a flood")
	}
	if c.Throttle(10, time.Second) || c.Throttle(9, time.Second) {
		t.Error("429s on two chats within a second are not a flood: a rebalance's overlap does that")
	}
	if !c.Throttle(11, time.Second) {
		t.Error("429s on three chats within a second are a flood")
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.Wait(short, 9); err == nil {
		t.Error("a throttled chat must wait for retry_after")
	}
}
