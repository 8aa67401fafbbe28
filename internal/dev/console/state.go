package console

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/notification"
)

// How much of the world the page shows.
const (
	maxNotifications = 50
	maxUsers         = 50
	maxLines         = 100 // per chat
	maxTaps          = 20  // per chat
)

// state is what the page renders, pushed whole whenever it changes. Timestamps are RFC 3339 UTC with
// milliseconds, as in the API.
type state struct {
	Notifications []notification.Resource `json:"notifications"` // the API's resource: next_attempt_at while retrying
	Users         []tenantUser            `json:"users"`
	Bots          []bot                   `json:"bots"`   // the simulator's bots, the default one first; empty without it
	Chats         []chat                  `json:"chats"`  // the simulated users' chats with the bots; empty without the simulator
	Faults        *sim.Faults             `json:"faults"` // nil without the simulator
	Stats         *simStats               `json:"stats"`
}

// tenantUser is where one of the tenant's users stands; the walkthrough's steps are read from it.
type tenantUser struct {
	UserID          string  `json:"user_id"`
	MessengerUserID *int64  `json:"messenger_user_id"`
	Verification    string  `json:"verification"`
	PhoneLast4      *string `json:"phone_last4"`
	Prompt          *prompt `json:"prompt"`
	Sent            int     `json:"sent"`
	Delivered       int     `json:"delivered"`
}

type prompt struct {
	Status           string  `json:"status"`
	LastErrorCode    int     `json:"last_error_code"`
	LastErrorMessage *string `json:"last_error_message"`
}

// bot is one of the simulator's bots.
type bot struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Default  bool   `json:"default"` // the bot of HERALD_MESSENGER_BOT_TOKEN, the shared bot
}

// chat is a simulated user's private chat with one bot, both sides: on the platform a user has one chat
// per bot.
type chat struct {
	Bot   bot        `json:"bot"`
	User  sim.User   `json:"user"`  // Blocked: the user blocked this bot
	Lines []sim.Line `json:"lines"` // a bot's message as last edited, with its inline keyboard
	// Taps are the user's taps on the bot's inline keyboards, the latest, with the bot's answers: the
	// notice the user saw.
	Taps []sim.CallbackQuery `json:"taps"`
}

// simStats are the simulator's counters a developer watches while faults are on.
type simStats struct {
	Sends       int64 `json:"sends"`
	Delivered   int64 `json:"delivered"`
	Injected429 int64 `json:"injected_429"`
	Injected5xx int64 `json:"injected_5xx"`
	Rejected    int64 `json:"rejected"`
}

func (c *Console) state(ctx context.Context) (state, error) {
	st := state{Notifications: []notification.Resource{}, Users: []tenantUser{}, Bots: []bot{}, Chats: []chat{}}
	ns, err := c.opts.Store.RecentNotifications(ctx, c.opts.TenantID, maxNotifications)
	if err != nil {
		return st, err
	}
	for _, n := range ns {
		st.Notifications = append(st.Notifications, n.Resource())
	}
	users, err := c.opts.Store.UsersProgress(ctx, c.opts.TenantID, maxUsers)
	if err != nil {
		return st, err
	}
	for _, u := range users {
		tu := tenantUser{UserID: u.UserID, MessengerUserID: u.MessengerUserID, Verification: u.Verification, PhoneLast4: u.PhoneLast4,
			Sent: u.Sent, Delivered: u.Delivered}
		if p := u.Prompt; p != nil {
			tu.Prompt = &prompt{Status: string(p.Status), LastErrorCode: p.LastErrorCode, LastErrorMessage: p.LastErrorMessage}
		}
		st.Users = append(st.Users, tu)
	}
	if s := c.opts.Sim; s != nil {
		st.Bots, st.Chats = chats(s)
		f := s.Faults()
		st.Faults = &f
		all := s.Stats()
		st.Stats = &simStats{Sends: all.Sends, Delivered: all.Delivered, Injected429: all.Injected429, Injected5xx: all.Injected5xx, Rejected: all.Rejected}
	}
	return st, nil
}

// chats lists the simulator's bots and the chats of its users with them: every chat with a line or a block,
// ordered by user, then bot. A user who has not written to any bot yet shows in the default bot's chat, so
// that a user just created appears at once.
func chats(s *sim.Server) ([]bot, []chat) {
	var bots []bot
	out := []chat{}
	listed := map[int64]bool{}
	for _, info := range s.Bots() {
		b := bot{ID: info.ID, Username: info.Username, Default: info.Default}
		bots = append(bots, b)
		h, ok := s.BotHandle(strconv.FormatInt(info.ID, 10))
		if !ok {
			continue
		}
		for _, u := range h.Users() {
			lines := h.Transcript(u.ID)
			if len(lines) == 0 && !u.Blocked {
				continue
			}
			if len(lines) > maxLines {
				lines = lines[len(lines)-maxLines:]
			}
			taps := h.CallbackQueries(u.ID)
			if len(taps) > maxTaps {
				taps = taps[len(taps)-maxTaps:]
			}
			listed[u.ID] = true
			out = append(out, chat{Bot: b, User: u, Lines: lines, Taps: append([]sim.CallbackQuery{}, taps...)})
		}
	}
	def := s.DefaultBot()
	info := def.Info()
	for _, u := range def.Users() {
		if !listed[u.ID] {
			out = append(out, chat{Bot: bot{ID: info.ID, Username: info.Username, Default: true}, User: u, Lines: []sim.Line{}, Taps: []sim.CallbackQuery{}})
		}
	}
	order := map[int64]int{}
	for i, b := range bots {
		order[b.ID] = i
	}
	slices.SortStableFunc(out, func(a, b chat) int {
		return cmp.Or(cmp.Compare(a.User.ID, b.User.ID), cmp.Compare(order[a.Bot.ID], order[b.Bot.ID]))
	})
	return bots, out
}
