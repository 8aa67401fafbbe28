package delivery_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/dev/sim"
)

// A worker that joins takes half the partitions of one that has a backlog fetched. The first worker drops
// what it fetched and had not started the moment its generation ends, so no chat is served by both: every
// chat receives its messages in order, never two within the per-chat interval, and the simulator (one
// message per chat per interval, no burst) counts no violation.
func TestAJoiningWorkerTakesPartitionsWithoutTwoWorkersServingAChat(t *testing.T) {
	// Not parallel: per-chat gaps are asserted at millisecond scale.
	const (
		chats   = 24
		perChat = 6
		first   = 46000
	)
	e := newEnv(t, sim.Options{GlobalRate: 40, PerChatBurst: 1})
	for i := range chats {
		e.user("g"+strconv.Itoa(i), int64(first+i), true)
	}
	opts := e.fastOptions()
	// The bot's rate below the simulator's: this test is about one chat's pace and order across the
	// handover; a global 429 (scheduling jitter under -race bunching two workers' sends) would reorder by a
	// retry and hide what it checks. TestKilledWorkerIsTakenOver and the chaos suite hold the global rate.
	opts.RateLimit = 30
	opts.PerChatInterval = time.Second
	ended := delivery.GenerationsEnded()
	e.start(opts)

	// Each user's messages are sent one after the other, so their order is the order of acceptance.
	ids := make([]string, chats*perChat)
	parallel(chats, chats, func(i int) {
		for seq := range perChat {
			ids[i*perChat+seq], _ = e.send("g"+strconv.Itoa(i), fmt.Sprintf("g%d-%d", i, seq), 5)
		}
	})
	// The first worker has fetched the whole backlog and is one message into most chats.
	deadline := time.Now().Add(30 * time.Second)
	for e.countStatus(ids, "delivered") < chats {
		if time.Now().After(deadline) {
			t.Fatal("the first worker does not deliver")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.start(opts)
	for id, s := range e.waitAllTerminal(ids, 90*time.Second) {
		if s != "delivered" {
			t.Errorf("%s ended %s, want delivered", id, s)
		}
	}
	if delivery.GenerationsEnded() == ended {
		t.Fatal("no consumer group generation ended: the second worker did not cause a rebalance (or kafka-go no longer logs the end of a generation, see consumer.go)")
	}

	for i := range chats {
		msgs := e.sim.Messages(int64(first + i))
		var got []string
		for k, m := range msgs {
			got = append(got, strings.TrimPrefix(m.Text, "A message from Acme Shop\n"))
			if k > 0 {
				if gap := m.Time.Sub(msgs[k-1].Time); gap < opts.PerChatInterval*95/100 {
					t.Errorf("chat %d: two messages %v apart, want at least %v", first+i, gap, opts.PerChatInterval)
				}
			}
		}
		var want []string
		for seq := range perChat {
			want = append(want, fmt.Sprintf("g%d-%d", i, seq))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("chat %d received %v, want %v in that order, once each", first+i, got, want)
		}
	}
	e.assertNoViolations()
}
