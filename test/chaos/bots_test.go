package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/test/chaos"
)

// botsFault is how long bot a's platform answers every send with a 429.
const botsFault = 15 * time.Second

// botsPromptly bounds the time from a 202 to the platform for a message to a chat with nothing queued
// before it, on a bot whose platform answers: the outbox's publish, the broker, a worker's claim and send,
// plus what a busy two-core machine adds. It is far below botsFault: a message that waited for bot a's
// 429s to end would break it.
const botsPromptly = 3 * time.Second

// Three bots share the workers — the shared bot and two tenants' own, a and b — and a's platform answers
// every send with a 429 (retry_after 1 s) for botsFault while a holds a backlog of 20 messages per chat.
// Each bot has its own rate and its own throttling: a's 429s hold a's chats alone, so the messages that b's
// and the shared bot's users send meanwhile reach their chats promptly, every one; once the 429s stop,
// a's backlog drains and nothing is lost; no bot is sent to over its rate nor any chat under its interval.
func TestOneBotThrottledDoesNotSlowTheOthers(t *testing.T) {
	mode := chaos.CurrentMode()
	cfg := mode.Config()
	cfg.Users = 10
	// Each 429 counts as an attempt: enough of them to outlast the fault, as the production schedule does.
	cfg.WorkerEnv = []string{"HERALD_WORKER_MAX_ATTEMPTS=50"}
	e := chaos.Start(t, cfg)
	ctx := context.Background()
	a, err := e.AddBotTenant(ctx, "bots-a", 6_100_000, 10)
	must(t, err)
	b, err := e.AddBotTenant(ctx, "bots-b", 6_200_000, 10)
	must(t, err)
	must(t, e.WaitSettled(ctx))

	type message struct {
		bot      string // the simulator's ?bot=, empty: the shared bot
		chat     int64
		text     string
		accepted time.Time
	}
	var mu sync.Mutex
	var sent []message
	send := func(key, bot string, u chaos.User, seq int) {
		text := fmt.Sprintf("bots-%s-%s-%d", e.Run, u.ID, seq)
		if _, err := e.SendAs(ctx, key, u.ID, text); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		sent = append(sent, message{bot: bot, chat: u.ChatID, text: text, accepted: time.Now()})
		mu.Unlock()
	}

	must(t, e.SetBotFaults(ctx, a.Bot, map[string]any{"rate_429": 1.0, "retry_after": 1}))
	f := e.BeginFault("bot a's platform answers 429")
	for _, u := range a.Users {
		for seq := range 20 {
			send(a.Key, a.Bot, u, seq)
		}
	}
	// Meanwhile every user of b and of the shared bot sends one message every two seconds: each finds its
	// chat free (the per-chat interval is 1 s), so each should go out at once.
	began := time.Now()
	var wg sync.WaitGroup
	for _, who := range []struct {
		key, bot string
		users    []chaos.User
	}{{b.Key, b.Bot, b.Users}, {e.Key, "", e.Users}} {
		for _, u := range who.users {
			wg.Go(func() {
				for seq := 0; time.Since(began) < botsFault-2*time.Second; seq++ {
					send(who.key, who.bot, u, seq)
					time.Sleep(2 * time.Second)
				}
			})
		}
	}
	wg.Wait()
	statsA, err := e.BotStats(ctx, a.Bot)
	must(t, err)
	chaos.Hold(botsFault - time.Since(began))
	must(t, e.SetBotFaults(ctx, a.Bot, nil))
	f.End()

	// Every message reaches its chat, a's backlog included.
	arrived := map[string]time.Time{}
	check(t, chaos.Eventually(ctx, 2*time.Minute, time.Second, "every message in its chat", func(ctx context.Context) error {
		missing := 0
		chats := map[[2]string]bool{}
		for _, m := range sent {
			chats[[2]string{m.bot, fmt.Sprint(m.chat)}] = true
		}
		for _, m := range sent {
			if _, ok := arrived[m.text]; ok {
				continue
			}
			got, err := e.ChatMessages(ctx, m.bot, m.chat)
			if err != nil {
				return err
			}
			for _, g := range got {
				arrived[g.Text[strings.LastIndex(g.Text, "\n")+1:]] = g.Time
			}
			if _, ok := arrived[m.text]; !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d messages not in their chats", missing, len(sent))
		}
		return nil
	}))

	// b's and the shared bot's messages went out promptly during a's 429s.
	var delays []time.Duration
	for _, m := range sent {
		at, ok := arrived[m.text]
		if m.bot == a.Bot || !ok {
			continue
		}
		d := at.Sub(m.accepted)
		delays = append(delays, d)
		if d > botsPromptly {
			t.Errorf("%s reached chat %d (bot %q) %v after its 202, want within %v while bot a was throttled", m.text, m.chat, m.bot, d.Round(time.Millisecond), botsPromptly)
		}
	}
	slices.Sort(delays)
	if len(delays) == 0 {
		t.Fatal("no message of b or the shared bot arrived")
	}
	t.Logf("b and the shared bot during a's 429s: %d messages, 202 → platform median %v, max %v; bot a answered %d 429s",
		len(delays), delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond), statsA.Answered429)
	if statsA.Answered429 == 0 {
		t.Error("bot a's platform answered no 429: the fault was not met")
	}
	// No bot over its rate, no chat under its interval (the simulator counts per bot).
	for _, bot := range []string{a.Bot, b.Bot, ""} {
		st, err := e.BotStats(ctx, bot)
		must(t, err)
		if st.LimitViolations != 0 {
			t.Errorf("bot %q: %d limit violations (%d per chat, %d global)", bot, st.LimitViolations, st.ChatLimitViolations, st.GlobalLimitViolations)
		}
	}
}
