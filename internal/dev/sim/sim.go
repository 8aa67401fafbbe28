// Package sim is the messenger simulator behind `herald sim` and `herald dev`: an HTTP server that speaks the
// Bot API methods Herald uses, plays the platform's users through a control API under /sim/, enforces the
// platform's rate limits and counts every violation, and injects faults (latency, 429s, 5xx, timeouts).
// It also plays a tenant's endpoint for status callbacks (callbacks.go), verifying their signatures.
//
// Bot API:   POST {base}/bot{token}/{method}: getMe, sendMessage, editMessageText, answerCallbackQuery,
// setWebhook, deleteWebhook, getWebhookInfo, getUpdates
// Control:   see routes.go; every action is also a method of *Server (the default bot) or of a BotHandle
// (any bot) for in-process tests.
//
// Every token <id>:<secret> is a bot of its own (bots.go), as on the platform: its username, webhook and
// secret, updates and update ids, chats (a user has one private chat per bot, chat id = user id), limits
// and counters. The bot of Options.Token is the default bot, which every route and method without a bot
// acts on.
//
// State lives in memory. Update ids keep increasing across Reset, and by default start from the clock, so
// a receiver that deduplicates update ids never mistakes a new update for one it saw before a restart.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/signing"
)

// Defaults of Options.
const (
	DefaultToken        = "123456:sim-token"
	DefaultBotUsername  = "herald_sim_bot"
	DefaultBotFirstName = "Herald"
	DefaultGlobalRate   = 30  // messages per second per bot, the platform's free limit
	DefaultPerChatRate  = 1.0 // messages per second per chat
	DefaultPerChatBurst = 3
	DefaultTolerance    = 0.05
)

// Options configure a Server. Zero values take the defaults; a negative rate disables that limit.
type Options struct {
	Token        string // the default bot's token; DefaultToken
	BotUsername  string // the default bot's username; DefaultBotUsername
	BotFirstName string // DefaultBotFirstName
	BotID        int64  // the number before ':' in Token, else 123456
	// PaidBroadcast allows the default bot paid broadcasts (allow_paid_broadcast); other bots get it
	// through the control API.
	PaidBroadcast bool
	// MaxBots bounds the bots, the default one included; a new token past it is refused. Default 10000.
	MaxBots int

	// Rate limits; see Limits for the exact rule. GlobalRate and GlobalBurst are those of every bot
	// without a rate of its own (the control API gives one).
	GlobalRate   float64 // messages per second for one bot; DefaultGlobalRate
	GlobalBurst  int     // default max(3, GlobalRate/20): 50 ms of traffic absorbs arrival jitter
	PerChatRate  float64 // messages per second per chat; DefaultPerChatRate
	PerChatBurst int     // DefaultPerChatBurst
	Tolerance    float64 // fraction by which the rates are relaxed; DefaultTolerance

	// FirstUpdateID is the first update id of every bot; default: derived from the clock when the bot
	// comes into being (see package doc).
	FirstUpdateID int64
	// MaxPendingUpdates bounds the queue of undelivered updates; the oldest are dropped. Default 100000.
	MaxPendingUpdates int

	// WebhookAttempts is how often one update is POSTed to the webhook before it is dropped; default 5.
	WebhookAttempts int
	// WebhookBackoff is the wait after the first failed attempt, doubled after each; default 100 ms.
	WebhookBackoff time.Duration
	// WebhookClient POSTs updates to the webhook; default: a client with a 10 s timeout.
	WebhookClient *http.Client
	// WebhookPlainHTTP posts to an https:// webhook URL over plain http, at the same host (and port, when
	// the URL names one), as a load balancer terminating TLS in front of the webhook component would pass
	// it on. For clusters without certificates (the end-to-end test): the platform itself posts only to
	// https, which is why HERALD_PUBLIC_URL must be https.
	WebhookPlainHTTP bool
	// ActionWait bounds how long a control call that makes a user act (open-link, start, message,
	// share-contact, an injected update) waits for the webhook's answer to the update; default 10 s.
	ActionWait time.Duration

	// CallbackSecrets gives the callback receiver (POST /sim/callbacks) the secrets it verifies signatures
	// with, besides those registered through POST /sim/callbacks/secrets; herald dev reads the endpoints
	// that point at the receiver.
	CallbackSecrets func(ctx context.Context) ([]signing.Secret, error)

	Logger *slog.Logger // default slog.Default()
}

func (o Options) withDefaults() Options {
	if o.Token == "" {
		o.Token = DefaultToken
	}
	if o.BotUsername == "" {
		o.BotUsername = DefaultBotUsername
	}
	if o.BotFirstName == "" {
		o.BotFirstName = DefaultBotFirstName
	}
	if o.BotID == 0 {
		o.BotID = 123456
		if head, _, ok := strings.Cut(o.Token, ":"); ok {
			if id, err := strconv.ParseInt(head, 10, 64); err == nil && id > 0 {
				o.BotID = id
			}
		}
	}
	if o.GlobalRate == 0 {
		o.GlobalRate = DefaultGlobalRate
	}
	if o.GlobalBurst <= 0 {
		o.GlobalBurst = defaultBurst(o.GlobalRate)
	}
	if o.MaxBots <= 0 {
		o.MaxBots = 10_000
	}
	if o.PerChatRate == 0 {
		o.PerChatRate = DefaultPerChatRate
	}
	if o.PerChatBurst <= 0 {
		o.PerChatBurst = DefaultPerChatBurst
	}
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if o.MaxPendingUpdates <= 0 {
		o.MaxPendingUpdates = 100_000
	}
	if o.WebhookAttempts <= 0 {
		o.WebhookAttempts = 5
	}
	if o.WebhookBackoff <= 0 {
		o.WebhookBackoff = 100 * time.Millisecond
	}
	if o.WebhookClient == nil {
		o.WebhookClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.ActionWait <= 0 {
		o.ActionWait = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server is the simulator. It implements http.Handler; call Close when done with it.
type Server struct {
	opts    Options
	log     *slog.Logger
	handler http.Handler
	now     func() time.Time // replaced in tests of the limiter

	done      chan struct{} // closed by Close: ends the webhook loops, long polls and hung requests
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu      sync.Mutex
	closed  bool          // set with done, under mu: no new webhook loop starts once Close waits for them
	changed chan struct{} // closed and replaced whenever an update, message or webhook changes
	users   map[int64]*user
	bots    map[int64]*bot  // every bot, by id (bots.go)
	byName  map[string]*bot // the same, by lower-cased username
	def     *bot            // the bot of Options.Token
	nextID  int64           // the next id tried for a bot the control API creates without one
	faults  Faults          // for the sends of every bot without faults of its own
	limits  Limits
	stats   Stats // the totals of every bot; each bot keeps its own too
	second  int64 // the Unix second PeakSendsPerSecond is counting, over every bot
	inSec   int64

	callbacks callbackState

	// nextQueryID is the next callback query's id (inline.go), from the clock as update ids are: ids keep
	// increasing across Reset and restarts, as the platform's never repeat.
	nextQueryID int64
}

type user struct {
	User                   // Blocked is not kept here: it is per bot
	blocked map[int64]bool // the ids of the bots the user blocked
}

// view is the user as bot b sees it: Blocked says whether the user blocked b.
func (u *user) view(b *bot) User {
	v := u.User
	v.Blocked = u.blocked[b.id]
	return v
}

type chat struct {
	id         int64
	typ        string
	title      string
	nextMsgID  int64
	bucket     bucket
	lastSend   time.Time // the last send the limits let through, for the per-chat interval count
	messages   []SentMessage
	transcript []Line // both sides, in order, the latest maxTranscript
	// deleted: the bot's messages deleted (by the bot or by the user), which the platform no longer has.
	deleted map[int64]bool
}

// maxTranscript bounds a chat's transcript.
const maxTranscript = 1000

// Line is one message of a chat as its members see it, from the bot or from a user.
type Line struct {
	From      string `json:"from"` // "bot" or "user"
	UserID    int64  `json:"user_id,omitempty"`
	MessageID int64  `json:"message_id"`
	Text      string `json:"text,omitempty"`
	// HTML is a bot's formatted message (one with entities) as the platform's HTML, escaped
	// (richtext.RenderHTML): what the console shows in its place of Text; "" for plain text.
	HTML        string             `json:"html,omitempty"`
	Contact     *messenger.Contact `json:"contact,omitempty"`
	ReplyMarkup json.RawMessage    `json:"reply_markup,omitempty"`
	Time        time.Time          `json:"time"`
	EditedAt    *time.Time         `json:"edited_at,omitempty"` // when the bot last edited it (editMessageText)
}

func (c *chat) addLine(l Line) {
	if len(c.transcript) >= maxTranscript {
		c.transcript = c.transcript[1:]
	}
	c.transcript = append(c.transcript, l)
}

// User is a simulated platform user. Its private chat with each bot has chat id == ID.
type User struct {
	ID          int64  `json:"id"`
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name,omitempty"`
	Username    string `json:"username,omitempty"`
	PhoneNumber string `json:"phone_number,omitempty"`
	Blocked     bool   `json:"blocked"` // the user blocked the bot (the default bot, or the bot asked about)
	Deleted     bool   `json:"deleted"` // the account is deactivated
}

// SentMessage is a message the bot sent, as the receiving chat sees it now: editMessageText replaces its
// text, entities and inline keyboard.
type SentMessage struct {
	MessageID   int64           `json:"message_id"`
	ChatID      int64           `json:"chat_id"`
	Text        string          `json:"text"`
	Entities    json.RawMessage `json:"entities,omitempty"`
	ReplyMarkup json.RawMessage `json:"reply_markup,omitempty"` // an inline keyboard as inline.go keeps it
	Time        time.Time       `json:"time"`
	EditedAt    *time.Time      `json:"edited_at,omitempty"`
	// The flags of the send (rich.go): no sound, no forwarding or saving, no link preview.
	DisableNotification bool                          `json:"disable_notification,omitempty"`
	ProtectContent      bool                          `json:"protect_content,omitempty"`
	LinkPreviewOptions  *messenger.LinkPreviewOptions `json:"link_preview_options,omitempty"`
}

// Stats count what the simulator saw since the last Reset: for every bot together (Server.Stats) or for
// one (BotHandle.Stats, and "bots" in GET /sim/stats).
type Stats struct {
	Sends     int64 `json:"sends"`     // sendMessage calls with the right token
	Delivered int64 `json:"delivered"` // messages that reached a chat
	// Edits counts editMessageText calls that changed a message, Deletes deleteMessage calls that deleted
	// one (edits.go). Both count against the limits as sends do.
	Edits   int64 `json:"edits"`
	Deletes int64 `json:"deletes"`
	// Answered429 counts every 429, injected or for exceeding a limit.
	Answered429 int64 `json:"answered_429"`
	// LimitViolations counts sends over a platform limit. A well-behaved client sees zero.
	LimitViolations       int64 `json:"limit_violations"`
	GlobalLimitViolations int64 `json:"global_limit_violations"`
	ChatLimitViolations   int64 `json:"chat_limit_violations"`
	// PaidSends counts the sends past a bot's rate that allow_paid_broadcast let through: what the platform
	// bills.
	PaidSends int64 `json:"paid_sends"`
	// SlidingSecondViolations counts the sends (let through or not) that arrived when the bot had already
	// sent its rate in the second before (rate × (1+Tolerance), PaidBroadcastRate for a paid broadcast),
	// even when its bucket's burst let them through. ChatIntervalViolations counts the sends to a chat that
	// arrived sooner than the per-chat interval (1 / PerChatRate, less the tolerance) after the last send to
	// that chat of that bot. A sender that paces every second and every chat exactly sees zero of both.
	SlidingSecondViolations int64 `json:"sliding_second_violations"`
	ChatIntervalViolations  int64 `json:"chat_interval_violations"`
	Injected429             int64 `json:"injected_429"`
	Injected5xx             int64 `json:"injected_5xx"`
	InjectedTimeouts        int64 `json:"injected_timeouts"`
	// Rejected counts other 4xx answers to sendMessage: blocked, deactivated, chat not found, bad request.
	Rejected int64 `json:"rejected"`
	// PeakSendsPerSecond is the most sends within the limits in one calendar second.
	PeakSendsPerSecond int64 `json:"peak_sends_per_second"`
	Unauthorized       int64 `json:"unauthorized"` // Bot API calls with a wrong token (for a bot: its id, another secret)

	UpdatesGenerated  int64 `json:"updates_generated"`
	UpdatesPending    int   `json:"updates_pending"`
	WebhookDeliveries int64 `json:"webhook_deliveries"` // updates the webhook accepted
	WebhookFailures   int64 `json:"webhook_failures"`   // attempts answered with non-2xx or not answered
	WebhookDropped    int64 `json:"webhook_dropped"`    // updates given up after WebhookAttempts
}

// count applies one change to the counters of the bot and to the totals. Callers hold s.mu.
func (s *Server) count(b *bot, change func(*Stats)) {
	change(&s.stats)
	if b != nil {
		change(&b.stats)
	}
}

// New returns a simulator with its default bot (Options.Token). It starts the goroutine that delivers the
// default bot's updates to its webhook; Close stops every such goroutine.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With("component", "sim"),
		now:     time.Now,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		users:   map[int64]*user{},
		bots:    map[int64]*bot{},
		byName:  map[string]*bot{},
		limits:  opts.limits(),
		nextID:  firstAllocatedBotID,
	}
	s.nextQueryID = s.firstUpdateID()
	s.mu.Lock()
	s.def = s.addBotLocked(&bot{id: opts.BotID, token: opts.Token, username: opts.BotUsername, firstName: opts.BotFirstName,
		paid: opts.PaidBroadcast, isDefault: true})
	s.mu.Unlock()
	// Unauthenticated (the Bot API's default token is public) and served on a developer's machine: a web
	// page must not be able to drive it through the browser.
	s.handler = server.SameOriginJSON(s.routes())
	return s
}

func (o Options) limits() Limits {
	return Limits{
		GlobalRate:   o.GlobalRate,
		GlobalBurst:  o.GlobalBurst,
		PerChatRate:  o.PerChatRate,
		PerChatBurst: o.PerChatBurst,
		Tolerance:    o.Tolerance,
	}
}

// Close stops webhook delivery and releases long polls and requests hung by a timeout fault. The handler
// keeps answering afterwards, but hung requests and long polls end at once.
func (s *Server) Close() error {
	s.shutDown()
	s.wg.Wait()
	return nil
}

// shutDown ends the background work; once it has run, no new webhook loop starts.
func (s *Server) shutDown() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.done)
	})
}

// ServeHTTP serves the Bot API at /bot{token}/{method} and the control API under /sim/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Handler returns s as an http.Handler, for mounting (e.g. under http.StripPrefix).
func (s *Server) Handler() http.Handler { return s }

// Token is the default bot's token.
func (s *Server) Token() string { return s.DefaultBot().Token() }

// BotUsername is the default bot's username (for deep links).
func (s *Server) BotUsername() string { return s.DefaultBot().Info().Username }

// Bot is the default bot's own user, as getMe returns it.
func (s *Server) Bot() messenger.User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.def.user()
}

// broadcastLocked wakes everyone waiting for a change. Callers hold s.mu.
func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Reset forgets users, chats, messages, pending updates, faults, statistics and the callbacks received, and
// restores the limits of the Options. The bots, their webhooks and the callback secrets stay (they are
// configuration, not the world's state), and update ids keep increasing.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users = map[int64]*user{}
	for _, b := range s.bots {
		b.reset()
	}
	s.faults = Faults{}
	s.limits = s.opts.limits()
	s.stats = Stats{}
	s.second, s.inSec = 0, 0
	s.callbacks.received, s.callbacks.fail = nil, 0
	s.broadcastLocked()
	s.log.Info("simulator reset")
}

// Stats returns a snapshot of the counters of every bot together.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	for _, b := range s.bots {
		st.UpdatesPending += len(b.pending)
	}
	return st
}

// Messages returns the messages the chat received from the default bot, oldest first.
func (s *Server) Messages(chatID int64) []SentMessage { return s.DefaultBot().Messages(chatID) }

// Transcript returns what the chat with the default bot shows, both sides, oldest first (at most the
// latest 1000 lines).
func (s *Server) Transcript(chatID int64) []Line { return s.DefaultBot().Transcript(chatID) }

// Changed returns a channel that is closed at the next change of the simulated world: a user's action or
// account, a message, an update's delivery, the faults.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitMessages waits until the chat has received at least n messages from the default bot and returns
// them all.
func (s *Server) WaitMessages(ctx context.Context, chatID int64, n int) ([]SentMessage, error) {
	return s.DefaultBot().WaitMessages(ctx, chatID, n)
}

// Run serves the simulator on addr until ctx is done, then shuts down gracefully.
func Run(ctx context.Context, addr string, opts Options) error {
	s := New(opts)
	defer s.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("while listening on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves the simulator on ln until ctx is done, then shuts down gracefully. It does not Close s.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// Herald's limits, except that an answer may take as long as the longest long poll (50 s) and then some.
	limits := server.DefaultClientBounds
	limits.WriteTimeout = 65 * time.Second
	srv := server.NewHTTPServer(s, s.log, limits)
	s.log.Info("messenger simulator listening",
		"api_url", "http://"+ln.Addr().String(), "bot_username", s.BotUsername(),
		"global_rate", s.opts.GlobalRate, "per_chat_rate", s.opts.PerChatRate)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("while serving the simulator: %w", err)
	case <-ctx.Done():
	}
	// Release hung requests and long polls first, or Shutdown would wait for them.
	s.shutDown()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("while shutting the simulator down: %w", err)
	}
	s.log.Info("messenger simulator stopped")
	return nil
}
