// Package send delivers the notification of one fetched message: it claims the notification in
// PostgreSQL (claim.go), waits for the chat's interval and the bot's rate (internal/delivery/rate), calls
// the platform (deliver.go), and records the next state the answer leads to (decide.go: Decide). Sender is
// the entry point; its Handle is the consumer's Handler.
package send

import (
	"context"
	"log/slog"
	"time"

	"github.com/heraldhq/herald/internal/delivery/consume"
	"github.com/heraldhq/herald/internal/delivery/rate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// Platform sends one message; *messenger.Client is the production one.
type Platform interface {
	SendMessage(ctx context.Context, req messenger.SendMessageRequest) (int64, error)
}

// Options configure a Sender. Every field is required.
type Options struct {
	Store    *store.Store
	Platform Platform
	// Limiter and Chats are the bot's pace: its global rate as this worker may use it, and its per-chat
	// interval.
	Limiter *rate.Limiter
	Chats   *rate.Chats
	Logger  *slog.Logger

	PerChatInterval time.Duration        // minimum spacing of two sends to one chat
	MaxAttempts     int                  // attempts before a transient failure becomes failed
	Concurrency     int                  // deliveries in flight (claim, call, status write)
	Lease           time.Duration        // how long a claim may stay in flight before it is redriven
	Backoff         notification.Backoff // transient-failure schedule
	SendTimeout     time.Duration        // one sendMessage call
	// HandoverWait bounds how long a claim waits for a notification that another attempt holds under a
	// live lease (claim).
	HandoverWait time.Duration
	// Killed reports whether the worker was killed (the tests' crash): a dead worker writes nothing more.
	Killed func() bool
}

// Sender delivers notifications, one fetched message at a time (Handle).
type Sender struct {
	opts Options
	log  *slog.Logger
	// inflight bounds the deliveries between their grant and their status write (consume.Slots).
	inflight *consume.Slots
}

// New builds a sender.
func New(opts Options) *Sender {
	return &Sender{opts: opts, log: opts.Logger, inflight: consume.NewSlots(opts.Concurrency, inFlight)}
}
