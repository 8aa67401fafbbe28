package sim

// Bots. On the platform every token <id>:<secret> is a bot: its own username, webhook and secret, updates
// and update ids, chats with users, and flood limits. So here: a token comes into being as a bot at its
// first POST (named bot<id>_bot), unless the control API created it first with a username, a rate and
// whether it may use paid broadcasts. The bot of Options.Token is the default bot.

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
)

// PaidBroadcastRate is how far the platform's paid broadcasts go: a send carrying allow_paid_broadcast, from
// a bot allowed them, ignores the bot's rate, up to this many a second, and is billed.
const PaidBroadcastRate = 1000

// firstAllocatedBotID is where the ids of bots the control API creates without one start: ten digits, as
// the platform's.
const firstAllocatedBotID = 7_000_000_001

type bot struct {
	id        int64
	token     string
	username  string
	firstName string
	rate      float64 // its own global rate; 0: the simulator's (Limits.GlobalRate)
	burst     int     // with its own rate; 0: defaultBurst(rate)
	paid      bool    // allowed paid broadcasts
	isDefault bool

	// Updates (updates.go).
	nextUpdateID int64
	pending      []queued
	allowed      []string // allowed_updates, as last set by setWebhook or getUpdates
	webhook      webhookConfig
	outcomes     outcomes // what became of the updates delivered to the webhook, the latest ones
	pollSeq      int64    // identifies the newest getUpdates call; older ones end with 409
	// wake tells the bot's webhook loop that its updates or its webhook changed: every bot has a loop, and
	// waking all of them at every change of the world would cost more than the sends themselves.
	wake chan struct{}

	chats   map[int64]*chat // private chats by user id, groups by their id
	queries queries         // the taps on its inline keyboards (inline.go)
	faults  *Faults         // its own faults; nil: the simulator's

	free, total bucket // its rate; every send it makes, against PaidBroadcastRate
	freeWin     window // the sends of the last second held to its rate (without paid broadcast)
	totalWin    window // every send of the last second, for a bot allowed paid broadcasts
	stats       Stats
	second      int64 // the Unix second its PeakSendsPerSecond is counting
	inSec       int64
}

// reset forgets the bot's world and counters, as Server.Reset does; its configuration and webhook stay.
func (b *bot) reset() {
	b.chats = map[int64]*chat{}
	b.queries = queries{byID: map[string]*CallbackQuery{}}
	b.pending = nil
	b.faults = nil
	b.free, b.total = bucket{}, bucket{}
	b.freeWin, b.totalWin = window{}, window{}
	b.stats = Stats{}
	b.second, b.inSec = 0, 0
}

// wakeLocked wakes the bot's webhook loop. Callers hold s.mu.
func (b *bot) wakeLocked() {
	select {
	case b.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// user is the bot's own user, as getMe returns it.
func (b *bot) user() messenger.User {
	return messenger.User{ID: b.id, IsBot: true, FirstName: b.firstName, Username: b.username}
}

// globalLimit is the bot's rate and burst under the simulator's limits l.
func (b *bot) globalLimit(l Limits) (float64, int) {
	if b.rate <= 0 {
		return l.GlobalRate, l.GlobalBurst
	}
	if b.burst > 0 {
		return b.rate, b.burst
	}
	return b.rate, defaultBurst(b.rate)
}

// BotInfo describes a bot.
type BotInfo struct {
	ID        int64  `json:"id"`
	Username  string `json:"username"`
	FirstName string `json:"first_name"`
	// Token is shown only when the bot is created through the control API and when its token is revoked.
	Token string `json:"token,omitempty"`
	// RateLimit and Burst are its own global limit; 0: the simulator's (GET /sim/limits), which
	// GlobalRate and GlobalBurst say are in force.
	RateLimit     float64 `json:"rate_limit"`
	Burst         int     `json:"burst"`
	GlobalRate    float64 `json:"global_rate"`
	GlobalBurst   int     `json:"global_burst"`
	PaidBroadcast bool    `json:"paid_broadcast"`
	Default       bool    `json:"default"` // the bot of Options.Token, which routes without ?bot= act on
	WebhookURL    string  `json:"webhook_url"`
}

func (s *Server) infoLocked(b *bot) BotInfo {
	rate, burst := b.globalLimit(s.limits)
	return BotInfo{ID: b.id, Username: b.username, FirstName: b.firstName, RateLimit: b.rate, Burst: b.burst,
		GlobalRate: rate, GlobalBurst: burst, PaidBroadcast: b.paid, Default: b.isDefault, WebhookURL: b.webhook.url}
}

// BotConfig creates or changes a bot (CreateBot, POST /sim/bots). Empty fields keep what the bot has, or
// take the defaults for a new bot.
type BotConfig struct {
	// ID names the bot; for a new one it may be left out (taken from Token, or allocated).
	ID int64 `json:"id"`
	// Token is a new bot's token, <id>:<secret>; default: one with a random secret.
	Token     string `json:"token"`
	Username  string `json:"username"` // 5 to 32 of A-Za-z0-9_, ending in "bot"; default bot<id>_bot
	FirstName string `json:"first_name"`
	// RateLimit is the bot's own global rate, messages per second; 0: the simulator's. Burst goes with it
	// (default max(3, RateLimit/20)).
	RateLimit *float64 `json:"rate_limit"`
	Burst     *int     `json:"burst"`
	// PaidBroadcast allows the bot paid broadcasts: its sends carrying allow_paid_broadcast may go past its
	// rate, up to PaidBroadcastRate.
	PaidBroadcast *bool `json:"paid_broadcast"`
	// FirstUpdateID is a new bot's first update id; default Options.FirstUpdateID, else from the clock.
	FirstUpdateID int64 `json:"first_update_id"`
}

// Errors of CreateBot and RevokeToken; the control API answers 400, 409 and 404 for them.
var (
	ErrBadBot      = errors.New("invalid bot")
	ErrBotConflict = errors.New("conflicting bot")
	ErrNoSuchBot   = errors.New("no such bot")
)

var (
	// The platform's bot usernames: 5 to 32 characters, a letter first, "bot" last.
	usernamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{1,28}[Bb][Oo][Tt]$`)
	// A token's secret; the platform's are 35 of these.
	tokenSecretPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
)

// parseToken returns the bot id of a token <id>:<secret>.
func parseToken(token string) (int64, bool) {
	head, secret, ok := strings.Cut(token, ":")
	if !ok || !tokenSecretPattern.MatchString(secret) {
		return 0, false
	}
	id, err := strconv.ParseInt(head, 10, 64)
	if err != nil || id <= 0 || head != strconv.FormatInt(id, 10) {
		return 0, false
	}
	return id, true
}

func newToken(id int64) string {
	secret := make([]byte, 26) // 35 characters, as the platform's
	_, _ = rand.Read(secret)
	return strconv.FormatInt(id, 10) + ":" + base64.RawURLEncoding.EncodeToString(secret)
}

func defaultUsername(id int64) string { return "bot" + strconv.FormatInt(id, 10) + "_bot" }

// firstUpdateID is a new bot's first update id: Options.FirstUpdateID, or microseconds since 2024, which grow
// faster than any bot produces updates and stay below 2^53.
func (s *Server) firstUpdateID() int64 {
	if s.opts.FirstUpdateID > 0 {
		return s.opts.FirstUpdateID
	}
	return time.Now().UnixMicro() - time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
}

// addBotLocked registers b and starts delivering its updates to its webhook. Callers hold s.mu and have
// checked that its id and username are free.
func (s *Server) addBotLocked(b *bot) *bot {
	if b.nextUpdateID == 0 {
		b.nextUpdateID = s.firstUpdateID()
	}
	b.outcomes = outcomes{byID: map[int64]WebhookOutcome{}}
	b.wake = make(chan struct{}, 1)
	b.reset()
	s.bots[b.id] = b
	s.byName[strings.ToLower(b.username)] = b
	if !s.closed {
		s.wg.Go(func() { s.deliverLoop(b) })
	}
	s.broadcastLocked()
	return b
}

// botForToken is the bot a Bot API call is for: the bot the token names, created at its first POST (a GET,
// which any site's image can send, creates nothing). nil means 401; the call was counted.
func (s *Server) botForToken(token string, create bool) *bot {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.def
	id, wellFormed := parseToken(token)
	if subtle.ConstantTimeCompare([]byte(token), []byte(b.token)) != 1 {
		b = nil
		if wellFormed {
			b = s.bots[id]
		}
	}
	switch {
	case b != nil && subtle.ConstantTimeCompare([]byte(token), []byte(b.token)) != 1:
		s.count(b, func(st *Stats) { st.Unauthorized++ })
		return nil
	case b != nil:
		return b
	case !wellFormed || !create:
	case len(s.bots) >= s.opts.MaxBots:
		s.log.Warn("a new bot refused: the simulator holds the most it may", "bot_id", id, "max_bots", s.opts.MaxBots)
	case s.byName[defaultUsername(id)] != nil:
		s.log.Warn("a new bot refused: its default username is taken", "bot_id", id)
	default:
		b = s.addBotLocked(&bot{id: id, token: token, username: defaultUsername(id), firstName: "Bot " + strconv.FormatInt(id, 10)})
		s.log.Info("a new bot at its token's first use", "bot_id", id, "username", b.username)
		return b
	}
	s.count(nil, func(st *Stats) { st.Unauthorized++ })
	return nil
}

// CreateBot creates a bot, or changes the one c.ID (or c.Token's id) names; the answer of a creation holds the
// token. Errors wrap ErrBadBot or ErrBotConflict.
func (s *Server) CreateBot(c BotConfig) (BotInfo, error) {
	id := c.ID
	if c.Token != "" {
		tid, ok := parseToken(c.Token)
		switch {
		case !ok:
			return BotInfo{}, fmt.Errorf("%w: a token is <id>:<secret>, the secret 1 to 256 of A-Za-z0-9_-", ErrBadBot)
		case id != 0 && id != tid:
			return BotInfo{}, fmt.Errorf("%w: the token is bot %d's, not bot %d's", ErrBadBot, tid, id)
		}
		id = tid
	}
	switch {
	case id < 0:
		return BotInfo{}, fmt.Errorf("%w: a bot id must be positive", ErrBadBot)
	case c.Username != "" && !usernamePattern.MatchString(c.Username):
		return BotInfo{}, fmt.Errorf("%w: a bot's username is 5 to 32 of A-Za-z0-9_, a letter first, ending in \"bot\"", ErrBadBot)
	case c.RateLimit != nil && (*c.RateLimit < 0 || *c.RateLimit > 1e6 || math.IsNaN(*c.RateLimit)):
		return BotInfo{}, fmt.Errorf("%w: rate_limit is messages per second, 0 (the simulator's) to 1000000", ErrBadBot)
	case c.Burst != nil && (*c.Burst < 0 || *c.Burst > 1e6):
		return BotInfo{}, fmt.Errorf("%w: burst is 0 (from the rate) to 1000000", ErrBadBot)
	case c.FirstUpdateID < 0:
		return BotInfo{}, fmt.Errorf("%w: first_update_id must be positive", ErrBadBot)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bots[id]
	if c.Username != "" {
		if other := s.byName[strings.ToLower(c.Username)]; other != nil && other != b {
			return BotInfo{}, fmt.Errorf("%w: bot %d is @%s", ErrBotConflict, other.id, other.username)
		}
	}
	created := b == nil
	if created {
		if len(s.bots) >= s.opts.MaxBots {
			return BotInfo{}, fmt.Errorf("%w: the simulator holds the most bots it may (%d)", ErrBotConflict, s.opts.MaxBots)
		}
		if id == 0 {
			for s.bots[s.nextID] != nil {
				s.nextID++
			}
			id = s.nextID
		}
		b = &bot{id: id, token: c.Token, username: c.Username, firstName: c.FirstName, nextUpdateID: c.FirstUpdateID}
		if b.token == "" {
			b.token = newToken(id)
		}
		if b.username == "" {
			b.username = defaultUsername(id)
			if s.byName[b.username] != nil {
				return BotInfo{}, fmt.Errorf("%w: its default username @%s is taken: give it one", ErrBotConflict, b.username)
			}
		}
		if b.firstName == "" {
			b.firstName = "Bot " + strconv.FormatInt(id, 10)
		}
	} else {
		switch {
		case c.Token != "" && c.Token != b.token:
			return BotInfo{}, fmt.Errorf("%w: bot %d has another token (POST /sim/bots/%d/revoke gives it a new one)", ErrBotConflict, id, id)
		case c.FirstUpdateID != 0:
			return BotInfo{}, fmt.Errorf("%w: first_update_id is for a new bot; bot %d has its updates", ErrBadBot, id)
		}
		if c.Username != "" && c.Username != b.username {
			delete(s.byName, strings.ToLower(b.username))
			b.username = c.Username
			s.byName[strings.ToLower(b.username)] = b
		}
		if c.FirstName != "" {
			b.firstName = c.FirstName
		}
	}
	if c.RateLimit != nil {
		b.rate = *c.RateLimit
	}
	if c.Burst != nil {
		b.burst = *c.Burst
	}
	if c.PaidBroadcast != nil {
		b.paid = *c.PaidBroadcast
	}
	info := s.infoLocked(b)
	if created {
		s.addBotLocked(b)
		info.Token = b.token
		s.log.Info("bot created", "bot_id", b.id, "username", b.username, "rate_limit", b.rate, "paid_broadcast", b.paid)
	} else {
		s.broadcastLocked()
		s.log.Info("bot changed", "bot_id", b.id, "username", b.username, "rate_limit", b.rate, "paid_broadcast", b.paid)
	}
	return info, nil
}

// RevokeToken gives the bot a new token, as the platform's BotFather does: token, or a random one when empty.
// Calls with the old token are refused from then on; the bot keeps its chats, updates and webhook.
func (s *Server) RevokeToken(ref, token string) (BotInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lookupLocked(ref)
	if b == nil {
		return BotInfo{}, fmt.Errorf("%w: %q", ErrNoSuchBot, ref)
	}
	if token == "" {
		token = newToken(b.id)
	}
	if id, ok := parseToken(token); !ok || id != b.id {
		return BotInfo{}, fmt.Errorf("%w: the new token must be %d:<secret>, the secret 1 to 256 of A-Za-z0-9_-", ErrBadBot, b.id)
	}
	b.token = token
	info := s.infoLocked(b)
	info.Token = token
	s.log.Info("bot token revoked", "bot_id", b.id)
	return info, nil
}

// lookupLocked finds a bot by id or username (with or without @). Callers hold s.mu.
func (s *Server) lookupLocked(ref string) *bot {
	ref = strings.TrimPrefix(ref, "@")
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil {
		return s.bots[id]
	}
	return s.byName[strings.ToLower(ref)]
}

// Bots lists the bots, the default one first, then by id.
func (s *Server) Bots() []BotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]BotInfo, 0, len(s.bots))
	for _, b := range s.sortedBotsLocked() {
		out = append(out, s.infoLocked(b))
	}
	return out
}

func (s *Server) sortedBotsLocked() []*bot {
	out := make([]*bot, 0, len(s.bots))
	for _, b := range s.bots {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *bot) int {
		switch {
		case a.isDefault:
			return -1
		case b.isDefault:
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	return out
}

// BotStats are one bot's counters, as GET /sim/stats lists them.
type BotStats struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Stats
}

// AllBotStats returns every bot's counters, in the order of Bots.
func (s *Server) AllBotStats() []BotStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []BotStats
	for _, b := range s.sortedBotsLocked() {
		out = append(out, BotStats{ID: b.id, Username: b.username, Stats: b.statsLocked()})
	}
	return out
}

func (b *bot) statsLocked() Stats {
	st := b.stats
	st.UpdatesPending = len(b.pending)
	return st
}

// BotHandle is the simulated world as one bot sees it: its chats, its updates, its users' blocks, its
// faults and counters. The methods of Server that name no bot act through DefaultBot.
type BotHandle struct {
	s *Server
	b *bot // bots are never removed: the pointer stays valid (fields are read under s.mu)
}

// BotHandle returns the handle of the bot with that id or username.
func (s *Server) BotHandle(ref string) (*BotHandle, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.lookupLocked(ref)
	if b == nil {
		return nil, false
	}
	return &BotHandle{s: s, b: b}, true
}

// DefaultBot returns the handle of the bot of Options.Token.
func (s *Server) DefaultBot() *BotHandle { return &BotHandle{s: s, b: s.def} }

// Info describes the bot (without its token: see Token).
func (h *BotHandle) Info() BotInfo {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.infoLocked(h.b)
}

// Token is the bot's token.
func (h *BotHandle) Token() string {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.b.token
}

// Stats returns a snapshot of the bot's counters.
func (h *BotHandle) Stats() Stats {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.b.statsLocked()
}

// GetUser returns a user, Blocked saying whether they blocked this bot, and whether the user exists.
func (h *BotHandle) GetUser(id int64) (User, bool) {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if u := h.s.users[id]; u != nil {
		return u.view(h.b), true
	}
	return User{}, false
}

// Messages returns the messages the chat received from this bot, oldest first.
func (h *BotHandle) Messages(chatID int64) []SentMessage {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if c := h.b.chats[chatID]; c != nil {
		return append([]SentMessage(nil), c.messages...)
	}
	return nil
}

// Transcript returns what the chat with this bot shows, both sides, oldest first (at most the latest 1000
// lines).
func (h *BotHandle) Transcript(chatID int64) []Line {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if c := h.b.chats[chatID]; c != nil {
		return append([]Line(nil), c.transcript...)
	}
	return nil
}

// WaitMessages waits until the chat has received at least n messages from this bot and returns them all.
func (h *BotHandle) WaitMessages(ctx context.Context, chatID int64, n int) ([]SentMessage, error) {
	s := h.s
	for {
		s.mu.Lock()
		var msgs []SentMessage
		if c := h.b.chats[chatID]; c != nil {
			msgs = append(msgs, c.messages...)
		}
		ch := s.changed
		s.mu.Unlock()
		if len(msgs) >= n {
			return msgs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return msgs, fmt.Errorf("while waiting for %d messages in chat %d of bot %d (have %d): %w", n, chatID, h.b.id, len(msgs), ctx.Err())
		case <-s.done:
			return msgs, errors.New("simulator closed")
		}
	}
}
