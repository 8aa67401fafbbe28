package bot

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

// The Registry's timing.
const (
	// RefreshInterval is how often Run reads what changed in the bots table: a bot registered or changed
	// elsewhere (the operator, the admin CLI, a worker that met a 401) is seen within it.
	RefreshInterval = 2 * time.Second
	// refreshOverlap: each refresh reads again the rows that changed in the last refreshOverlap before the
	// newest it has seen, since a row's updated_at is its statement's start and it commits a moment later
	// (store.BotsChangedSince).
	refreshOverlap = 10 * time.Second
	// MissTTL is how long a bot id that PostgreSQL does not know is answered unknown without asking again:
	// the webhook route is public, and a stream of made-up ids must not become a stream of queries.
	MissTTL = time.Second
	// maxMisses bounds the ids remembered as unknown; past it they are forgotten at once.
	maxMisses = 4096
	// MissLookupsPerSecond bounds the queries for ids the registry does not know, whatever the ids: past
	// it an unknown id is answered unknown without a query (a bot registered meanwhile is still seen at
	// the next refresh).
	MissLookupsPerSecond = 20
)

// ErrUnknownBot is the answer for an id no bot has (and for Shared, which the registry holds only as a client).
var ErrUnknownBot = errors.New("unknown bot")

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	Store *store.Store
	// Key opens the tokens (HERALD_BOT_TOKEN_KEY); nil: no own bot's token can be opened, and Client
	// answers ErrTokenUnavailable for every one (the webhook can still check secrets).
	Key *signing.Key
	// APIURL is HERALD_MESSENGER_API_URL; every bot's client calls it through HTTPClient (nil: one client
	// for all, on messenger.NewTransport), so that all bots share one pool of connections.
	APIURL     string
	HTTPClient *http.Client
	// Shared is the shared bot's client, which Client returns for Shared; nil: none.
	Shared *messenger.Client
	Logger *slog.Logger
}

// Registry is the webhook's and the workers' view of the tenants' bots: bot id → its settings and state,
// the digest of its webhook secret, and a Bot API client with its token. It reads PostgreSQL's bots table
// when it starts, every RefreshInterval (Run) and when asked for a bot it does not know. Safe for
// concurrent use.
type Registry struct {
	o   RegistryOptions
	log *slog.Logger

	mu     sync.RWMutex
	bots   map[ID]*entry
	since  time.Time        // the next refresh reads the rows changed at or after it
	misses map[ID]time.Time // ids PostgreSQL did not know, and when
	// lookups counts the queries for unknown ids in the second that started at window.
	lookups int
	window  time.Time
}

type entry struct {
	bot          Bot
	updatedAt    time.Time
	tokenDigest  [32]byte
	secretDigest []byte            // nil: no webhook secret recorded
	client       *messenger.Client // nil when the token does not open (err says why)
	err          error
}

// NewRegistry makes an empty Registry; Refresh or Run fills it.
func NewRegistry(o RegistryOptions) *Registry {
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: messenger.NewTransport()}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Registry{o: o, log: o.Logger, bots: map[ID]*entry{}, misses: map[ID]time.Time{}}
}

// Run refreshes the registry every interval (RefreshInterval when 0) until ctx ends. A failed refresh is
// logged and tried again at the next tick; the bots already known stay.
func (r *Registry) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = RefreshInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("could not refresh the bots", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads the bots that changed since the last refresh (every bot, the first time).
func (r *Registry) Refresh(ctx context.Context) error {
	r.mu.RLock()
	since := r.since
	r.mu.RUnlock()
	rows, err := r.o.Store.BotsChangedSince(ctx, since)
	if err != nil {
		return fmt.Errorf("while refreshing the bots: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range rows {
		r.putLocked(b)
		if next := b.UpdatedAt.Add(-refreshOverlap); next.After(r.since) {
			r.since = next
		}
	}
	clear(r.misses) // an id unknown before may be a bot now
	return nil
}

// putLocked records a row. The token is opened only when it is new or changed.
func (r *Registry) putLocked(b store.Bot) {
	e := &entry{
		bot: Bot{ID: b.ID, Username: b.Username, RateLimit: b.RateLimit, PaidBroadcast: b.PaidBroadcast,
			State: b.State, StateMessage: b.StateMessage},
		updatedAt:    b.UpdatedAt,
		tokenDigest:  b.TokenDigest,
		secretDigest: b.WebhookSecretDigest,
	}
	if old, ok := r.bots[b.ID]; ok && old.tokenDigest == b.TokenDigest && (old.client != nil || r.o.Key == nil) {
		e.client, e.err = old.client, old.err
	} else {
		e.client, e.err = r.open(b)
	}
	r.bots[b.ID] = e
	delete(r.misses, b.ID)
}

// open makes the Bot API client of a bot's row.
func (r *Registry) open(b store.Bot) (*messenger.Client, error) {
	if r.o.Key == nil {
		return nil, fmt.Errorf("%w: HERALD_BOT_TOKEN_KEY is not set", ErrTokenUnavailable)
	}
	token, err := OpenToken(r.o.Key, b.ID, b.TokenSealed)
	if err != nil {
		r.log.Error("a bot's token does not open: nothing can be sent through it", "bot", int64(b.ID), "err", err)
		return nil, err
	}
	if TokenDigest(token) != b.TokenDigest {
		r.log.Error("a bot's token does not match its digest: nothing can be sent through it", "bot", int64(b.ID))
		return nil, fmt.Errorf("%w: bot %d's sealed token does not match its digest", ErrTokenUnavailable, b.ID)
	}
	return messenger.New(r.o.APIURL, token, r.o.HTTPClient), nil
}

// lookup returns the entry of id, reading PostgreSQL when it is not known (and was not found there within
// MissTTL).
func (r *Registry) lookup(ctx context.Context, id ID) (*entry, error) {
	if id <= 0 {
		return nil, ErrUnknownBot
	}
	r.mu.RLock()
	e, ok := r.bots[id]
	missed, recent := r.misses[id]
	r.mu.RUnlock()
	if ok {
		return e, nil
	}
	if recent && time.Since(missed) < MissTTL || !r.mayLookUp() {
		return nil, ErrUnknownBot
	}
	b, err := r.o.Store.GetBot(ctx, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrNotFound):
		if len(r.misses) >= maxMisses {
			clear(r.misses)
		}
		r.misses[id] = time.Now()
		return nil, ErrUnknownBot
	case err != nil:
		return nil, fmt.Errorf("while looking bot %d up: %w", id, err)
	}
	if e, ok := r.bots[id]; ok && !e.updatedAt.Before(b.UpdatedAt) {
		return e, nil // a refresh put it (or a newer row) meanwhile
	}
	r.putLocked(b)
	return r.bots[id], nil
}

// mayLookUp reports whether a query for an unknown id fits in this second's MissLookupsPerSecond, and
// counts it.
func (r *Registry) mayLookUp() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.window) >= time.Second {
		r.window, r.lookups = now, 0
	}
	if r.lookups >= MissLookupsPerSecond {
		return false
	}
	r.lookups++
	return true
}

// Get returns bot id: ErrUnknownBot when there is no such bot.
func (r *Registry) Get(ctx context.Context, id ID) (Bot, error) {
	e, err := r.lookup(ctx, id)
	if err != nil {
		return Bot{}, err
	}
	return e.bot, nil
}

// Client returns the Bot API client to send through bot id with: the shared bot's for Shared (when the
// registry was given one), else the bot's own, with its token. ErrUnknownBot when there is no such bot,
// an error wrapping ErrTokenUnavailable when its token does not open.
func (r *Registry) Client(ctx context.Context, id ID) (*messenger.Client, error) {
	if id == Shared {
		if r.o.Shared == nil {
			return nil, ErrUnknownBot
		}
		return r.o.Shared, nil
	}
	e, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if e.client == nil {
		return nil, e.err
	}
	return e.client, nil
}

// CheckSecret reports whether secret is bot id's webhook secret (the X-Messenger-Bot-Api-Secret-Token of
// an update POSTed to WebhookPath(id)), comparing digests in constant time. False for an unknown bot and
// for one without a recorded secret. The shared bot's secret is the webhook component's configuration, not
// the registry's.
func (r *Registry) CheckSecret(ctx context.Context, id ID, secret string) (bool, error) {
	e, err := r.lookup(ctx, id)
	if errors.Is(err, ErrUnknownBot) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(e.secretDigest) != sha256.Size {
		return false, nil
	}
	got := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(got[:], e.secretDigest) == 1, nil
}

// Bots lists the bots the registry knows, in no particular order (polling mode runs a getUpdates loop for
// each; metrics name them).
func (r *Registry) Bots() []Bot {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Bot, 0, len(r.bots))
	for _, e := range r.bots {
		out = append(out, e.bot)
	}
	return out
}
