package console

import (
	"context"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/sim"
)

// How much of the world the page shows.
const (
	maxNotifications = 50
	maxUsers         = 50
	maxLines         = 100 // per chat
)

// state is what the page renders, pushed whole whenever it changes. Timestamps are RFC 3339 UTC with
// milliseconds, as in the API.
type state struct {
	Notifications []notificationRow `json:"notifications"`
	Users         []tenantUser      `json:"users"`
	Chats         []chat            `json:"chats"`  // the simulated messenger users; empty without the simulator
	Faults        *sim.Faults       `json:"faults"` // nil without the simulator
	Stats         *simStats         `json:"stats"`
}

// notificationRow is the Notification resource of the API, plus when the next attempt is due.
type notificationRow struct {
	TrackingID         string  `json:"tracking_id"`
	UserID             string  `json:"user_id"`
	Priority           int     `json:"priority"`
	Status             string  `json:"status"`
	Attempts           int     `json:"attempts"`
	CreatedAt          string  `json:"created_at"`
	UpdatedAt          string  `json:"updated_at"`
	NextAttemptAt      *string `json:"next_attempt_at"`
	MessengerMessageID *string `json:"messenger_message_id"`
	LastErrorCode      int     `json:"last_error_code"`
	LastErrorMessage   *string `json:"last_error_message"`
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

// chat is a simulated user and their private chat with the bot, both sides.
type chat struct {
	User  sim.User   `json:"user"`
	Lines []sim.Line `json:"lines"`
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
	st := state{Notifications: []notificationRow{}, Users: []tenantUser{}, Chats: []chat{}}
	ns, err := c.opts.Store.RecentNotifications(ctx, c.opts.TenantID, maxNotifications)
	if err != nil {
		return st, err
	}
	for _, n := range ns {
		st.Notifications = append(st.Notifications, notificationRow{
			TrackingID: n.TrackingID, UserID: n.UserID, Priority: n.Priority, Status: string(n.Status), Attempts: n.Attempts,
			CreatedAt: timestamp(n.CreatedAt), UpdatedAt: timestamp(n.UpdatedAt), NextAttemptAt: optionalTimestamp(n.NextAttemptAt),
			MessengerMessageID: n.MessengerMessageID, LastErrorCode: n.LastErrorCode, LastErrorMessage: n.LastErrorMessage,
		})
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
		for _, u := range s.Users() {
			lines := s.Transcript(u.ID)
			if len(lines) > maxLines {
				lines = lines[len(lines)-maxLines:]
			}
			if lines == nil {
				lines = []sim.Line{}
			}
			st.Chats = append(st.Chats, chat{User: u, Lines: lines})
		}
		f := s.Faults()
		st.Faults = &f
		all := s.Stats()
		st.Stats = &simStats{Sends: all.Sends, Delivered: all.Delivered, Injected429: all.Injected429, Injected5xx: all.Injected5xx, Rejected: all.Rejected}
	}
	return st, nil
}

// timestamp and optionalTimestamp render times as every answer of the API does.
var (
	timestamp         = notification.Timestamp
	optionalTimestamp = notification.OptionalTimestamp
)
