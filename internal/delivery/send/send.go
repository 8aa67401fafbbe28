// Package send delivers the notification of one fetched message: it claims the notification in
// PostgreSQL (claim.go), waits for the chat's interval and the rate of the bot it goes through
// (internal/delivery/rate), calls the platform with that bot's token (deliver.go), and records the next
// state the answer leads to (decide.go: Decide). Sender is the entry point; its Handle is the consumer's
// Handler.
package send

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/delivery/consume"
	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/metriclabel"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// Platform sends, edits and deletes messages through one bot; *messenger.Client is the production one.
type Platform interface {
	SendMessage(ctx context.Context, req messenger.SendMessageRequest) (int64, error)
	EditMessageText(ctx context.Context, req messenger.EditMessageTextRequest) error
	DeleteMessage(ctx context.Context, req messenger.DeleteMessageRequest) error
}

// Options configure a Sender. Every field is required unless it says otherwise.
type Options struct {
	Store *store.Store
	// Platform sends through the shared bot. Bots returns the platform of a tenant's own bot (its token's
	// client, internal/bot.Registry); nil: this worker cannot send through tenants' own bots, and their
	// notifications wait as retries for a worker that can (BotUnavailable).
	Platform Platform
	Bots     func(ctx context.Context, bot notification.BotID) (Platform, error)
	// Paces are the bots' paces: each bot's global rate as this worker may use it, and its per-chat
	// interval.
	Paces *rate.Paces
	// BotLabel names a bot in the per-bot metrics (metriclabel.Bots); nil: by its id.
	BotLabel func(bot notification.BotID) string
	Logger   *slog.Logger

	PerChatInterval time.Duration        // minimum spacing of two sends to one chat
	MaxAttempts     int                  // attempts before a transient failure becomes failed
	Concurrency     int                  // deliveries in flight (claim, call, status write)
	Lease           time.Duration        // how long a claim may stay in flight before it is redriven
	Backoff         notification.Backoff // transient-failure schedule
	SendTimeout     time.Duration        // one sendMessage call
	// HandoverWait bounds how long a claim waits for a notification that another attempt holds under a
	// live lease (claim).
	HandoverWait time.Duration
	// OrderWait bounds how long a notification waits for a message ahead of it in its chat
	// (notification.AheadSQL) before it is sent regardless; 0 keeps no order across topics.
	OrderWait time.Duration
	// Killed reports whether the worker was killed (the tests' crash): a dead worker writes nothing more.
	Killed func() bool
}

// Sender delivers notifications, one fetched message at a time (Handle).
type Sender struct {
	opts Options
	log  *slog.Logger
	// inflight bounds the deliveries between their grant and their status write (consume.Slots).
	inflight *consume.Slots
	// finishes writes the outcomes the lanes record at the same moment in one statement
	// (store.FinishDeliveries).
	finishes *batch.Inline[store.Finish, bool]
	// claims claims the notifications the lanes claim at the same moment in one statement
	// (store.ClaimDeliveries).
	claims *batch.Inline[store.Claim, *notification.Delivery]
}

// New builds a sender.
func New(opts Options) *Sender {
	if opts.BotLabel == nil {
		opts.BotLabel = func(bot notification.BotID) string {
			if bot == notification.SharedBot {
				return metriclabel.SharedBot
			}
			return metriclabel.Bots.Of(strconv.FormatInt(int64(bot), 10))
		}
	}
	s := &Sender{opts: opts, log: opts.Logger, inflight: consume.NewSlots(opts.Concurrency, inFlight)}
	s.finishes = batch.NewSpacedInline(batchWriters, batchSize, batchGap, s.finishBatch)
	s.claims = batch.NewSpacedInline(batchWriters, batchSize, batchGap, s.claimBatch)
	return s
}

// batchSize and batchWriters bound the batched claims and status writes: notifications per statement,
// and statements of each in flight (each holds one of the store's connections). Two, so that one batch
// runs while the next gathers and a statement that waits on a row lock does not stall every lane: each
// statement in flight splits the lanes of the same moment into smaller batches, and PostgreSQL's work
// per statement (starting the plan, opening fourteen indexes) is paid again — with four, the server
// spent 0.60 ms of CPU per delivery against 0.48 ms with two and 0.42 ms with one (make bench-bots,
// part paid; docs/benchmarks.md, issue 43's fifth pass).
//
// batchGap spaces the statements of each kind a worker starts: under load a batch waits out the rest of
// the gap and takes every lane that finished or claims meanwhile, instead of the two or three of one round
// trip. PostgreSQL's statements per delivery fall by half (0.63 → 0.30 at 2,300/s) and its CPU per
// delivery by a fifth; a lane pays at most the gap on its claim (inside claimLead, before its chat's slot) and on its
// status write, and a lone write (an idle or lightly loaded worker) goes at once.
const (
	batchSize    = 256
	batchWriters = 2
	batchGap     = 10 * time.Millisecond
)

// claimLead is how long before its chat's next slot a lane asks for its turn at the bot's rate and
// claims: the turn and the claim (a batch waits up to batchGap, then its statement) are done when the
// slot comes, and the request leaves at the slot (Chats.Wait, then Limiter.Admit) instead of a claim's
// round trip after it. A chat sends every interval, not every interval plus a claim: with a bot's
// chats as many as its rate, that round trip was a few per cent of its rate.
const claimLead = 30 * time.Millisecond

// errKilled: the worker was killed (the tests' crash) before the batch was written; it writes nothing more.
var errKilled = errors.New("the worker was killed")

// finishBatch writes outcomes in one statement.
func (s *Sender) finishBatch(fs []store.Finish) ([]bool, error) {
	if s.opts.Killed() {
		return nil, errKilled
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, err := s.opts.Store.FinishDeliveries(ctx, fs)
	batchSizes.WithLabelValues("finish").Observe(float64(len(fs)))
	return ok, err
}

// claimBatch claims notifications in one statement; nil for one not claimed (the claim's own loop then
// asks why: Sender.claim).
func (s *Sender) claimBatch(cs []store.Claim) ([]*notification.Delivery, error) {
	if s.opts.Killed() {
		return nil, errKilled
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := s.opts.Store.ClaimDeliveries(ctx, cs, s.opts.Lease)
	batchSizes.WithLabelValues("claim").Observe(float64(len(cs)))
	return ds, err
}

// platform is the platform to send through bot with.
func (s *Sender) platform(ctx context.Context, bot notification.BotID) (Platform, error) {
	if bot == notification.SharedBot {
		return s.opts.Platform, nil
	}
	if s.opts.Bots == nil {
		return nil, errNoBots
	}
	return s.opts.Bots(ctx, bot)
}

var errNoBots = errors.New("this worker was given no registry of tenants' bots")
