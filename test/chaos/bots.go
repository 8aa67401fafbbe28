package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/heraldhq/herald/internal/dev/sim"
)

// BotTenant is a tenant that sends through a bot of its own (spec v1-extensions §11), with its users linked
// through that bot.
type BotTenant struct {
	ID    string // the tenant's id
	Key   string // its API key
	Bot   string // its bot's username in the simulator
	Users []User
}

// AddBotTenant creates tenant id with a bot of its own, as a platform team without the operator would:
// the simulator is given the bot (its id botID, its rate the installation's), `herald tenant update
// --bot-token-file` registers it (getMe, then setWebhook at HERALD_PUBLIC_URL/messenger/webhook/{bot_id},
// which the simulator posts to over plain http), and users users are linked and verified through it, with
// chat ids from botID's range.
func (e *Env) AddBotTenant(ctx context.Context, id string, botID int64, users int) (*BotTenant, error) {
	bt := &BotTenant{ID: id, Bot: fmt.Sprintf("chaos_%s_bot", strings.ReplaceAll(id, "-", "_"))}
	token := strconv.FormatInt(botID, 10) + ":chaos-" + e.Run + "-" + id
	rate := e.Cfg.RateLimit
	if err := doJSON(ctx, http.MethodPost, e.SimURL("/sim/bots"), "", sim.BotConfig{Token: token, Username: bt.Bot, FirstName: id, RateLimit: &rate}, 200, nil); err != nil {
		return nil, err
	}
	if _, err := e.cli(ctx, "tenant", "create", "--id", id, "--developer-name", id); err != nil {
		return nil, err
	}
	key, err := e.cli(ctx, "apikey", "create", "--tenant", id, "--label", id)
	if err != nil {
		return nil, err
	}
	if bt.Key = strings.TrimSpace(key); bt.Key == "" {
		return nil, errors.New("herald apikey create printed no key")
	}
	tokenFile := filepath.Join(e.dir, id+".token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return nil, err
	}
	cmd := []string{"tenant", "update", "--id", id, "--bot-token-file", tokenFile, "--bot-rate-limit", strconv.Itoa(int(rate))}
	if _, err := e.cliWith(ctx, []string{"HERALD_PUBLIC_URL=https://" + e.Webhook.Addr}, cmd...); err != nil {
		return nil, err
	}

	bt.Users = make([]User, users)
	for i := range bt.Users {
		bt.Users[i] = User{ID: fmt.Sprintf("%s-u%02d", id, i), ChatID: botID + 1 + int64(i), Phone: fmt.Sprintf("+1666%03d%04d", botID%1000, i+1)}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(bt.Users))
	for i, u := range bt.Users {
		wg.Go(func() {
			if err := e.linkUserVia(ctx, bt.Key, bt.Bot, u); err != nil {
				errs[i] = fmt.Errorf("user %s of %s: %w", u.ID, id, err)
			}
		})
	}
	wg.Wait()
	return bt, errors.Join(errs...)
}

// ChatMessages is what a user's private chat with bot received (empty bot: the shared bot), oldest first.
func (e *Env) ChatMessages(ctx context.Context, bot string, chatID int64) ([]sim.SentMessage, error) {
	var res struct {
		Messages []sim.SentMessage `json:"messages"`
	}
	err := doJSON(ctx, http.MethodGet, e.SimURL(fmt.Sprintf("/sim/chats/%d/messages%s", chatID, botQuery(bot))), "", nil, 200, &res)
	return res.Messages, err
}

// SetBotFaults replaces the faults the sends of one bot meet (sim.Faults as JSON; nil: the bot meets the
// simulator's again).
func (e *Env) SetBotFaults(ctx context.Context, bot string, faults map[string]any) error {
	if faults == nil {
		return doJSON(ctx, http.MethodDelete, e.SimURL("/sim/faults"+botQuery(bot)), "", nil, 200, nil)
	}
	return doJSON(ctx, http.MethodPost, e.SimURL("/sim/faults"+botQuery(bot)), "", faults, 200, nil)
}

// BotStats reads one bot's counters in the simulator.
func (e *Env) BotStats(ctx context.Context, bot string) (sim.Stats, error) {
	var st sim.Stats
	err := doJSON(ctx, http.MethodGet, e.SimURL("/sim/stats"+botQuery(bot)), "", nil, 200, &st)
	return st, err
}

// botQuery is the simulator's ?bot= naming bot; empty for the shared (the simulator's default) bot.
func botQuery(bot string) string {
	if bot == "" {
		return ""
	}
	return "?bot=" + bot
}
