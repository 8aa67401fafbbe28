package sim_test

import (
	"errors"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// The Go API acts on one bot through its handle, as the control API does with ?bot=.
func TestBotHandles(t *testing.T) {
	e := newEnv(t, sim.Options{})
	info, err := e.sim.CreateBot(sim.BotConfig{Username: "go_bot"})
	noError(t, err)
	h, ok := e.sim.BotHandle("go_bot")
	if !ok || h.Info().ID != info.ID || h.Token() != info.Token {
		t.Fatalf("handle of go_bot: %v %+v", ok, h)
	}
	if _, err := h.StartUser(7, "tok"); err != nil {
		t.Fatal(err)
	}
	c := messenger.New(e.srv.URL, h.Token(), nil)
	if _, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 7, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.WaitMessages(t.Context(), 7, 1)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "hello" {
		t.Errorf("the handle's messages: %+v, %v", msgs, err)
	}
	if len(e.sim.Messages(7)) != 0 {
		t.Error("the message landed in the default bot's chat")
	}
	noError(t, h.Block(7))
	if _, err := c.SendMessage(t.Context(), messenger.SendMessageRequest{ChatID: 7, Text: "x"}); messenger.Classify(err) != messenger.Blocked {
		t.Errorf("after Block through the handle: %v", err)
	}
	if e.sim.DefaultBot().Info().ID != 123456 {
		t.Error("the default bot's handle")
	}
	if _, ok := e.sim.BotHandle("4242"); ok {
		t.Error("a handle for a bot that does not exist")
	}
	if _, err := e.sim.OpenLink(8, "https://t.me/go_bot?start=abc"); err != nil {
		t.Errorf("a deep link opens the bot it names: %v", err)
	}
	if lines := h.Transcript(8); len(lines) != 1 || lines[0].Text != "/start abc" {
		t.Errorf("go_bot's chat with 8: %+v", lines)
	}
	var apiErr *messenger.APIError
	if _, err := h.OpenLink(9, "https://t.me/"+sim.DefaultBotUsername+"?start=x"); err == nil || errors.As(err, &apiErr) {
		t.Errorf("a handle opening another bot's link: %v", err)
	}
}
