// Package updates receives the messaging platform's updates — on POST /messenger/webhook, or by long
// polling getUpdates — and acts on the ones Herald handles: /start <token> links an account, a shared
// contact completes phone verification, /dev_* commands answer developers, my_chat_member marks a block,
// /stop and /resume (and the taps on their keyboards) opt out and back in (stop.go). Everything else is
// acknowledged and ignored.
//
// Nothing is sent to the platform from here but the answer to a tap and the edit of its message (stop.go):
// replies are system messages stored in the same transaction
// that claims the update's id and applies its effect, then published through the outbox, so an update
// takes effect at most once and its reply is delivered by the workers like any notification. Concurrent
// updates share that transaction (apply.go).
//
// (The package is not called "webhook": to kubebuilder that word means admission webhooks.)
package updates

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/phone"
	"github.com/heraldhq/herald/internal/store"
)

// Path is the webhook route (the spec's; no version prefix).
const Path = "/messenger/webhook"

// Secret headers: the spec's name and the one the real platform sends.
const (
	SecretHeader         = "X-Messenger-Bot-Api-Secret-Token"
	PlatformSecretHeader = "X-Telegram-Bot-Api-Secret-Token"
)

// MaxBodyBytes bounds an update body; real updates are a few kilobytes.
const MaxBodyBytes = 1 << 20

// HandleTimeout bounds the work for one update: the platform waits for the answer, and retries on failure.
const HandleTimeout = 10 * time.Second

// AllowedUpdates are the update kinds Herald handles, for the shared bot's setWebhook and getUpdates: the
// same as a tenant's bot's (spec §9).
var AllowedUpdates = bot.AllowedUpdates

// Options configure a Receiver.
type Options struct {
	// Secret is HERALD_WEBHOOK_SECRET, expected in the secret header of every webhook call.
	Secret string
	// PhoneHashKey is HERALD_PHONE_HASH_KEY, the key of the stored phone digests.
	PhoneHashKey []byte
	// DevAdmins are messenger user ids allowed every /dev_* command about every tenant.
	DevAdmins []int64
	// Logger; slog.Default() when nil. Phone numbers are never logged.
	Logger *slog.Logger
	// Now is the clock for replies that show a time; time.Now when nil.
	Now func() time.Time
	// Bots are the tenants' own bots, whose updates arrive on their own routes with their own secrets; nil:
	// none (every bot's route answers 401, as for an unknown bot). Its clients, the shared bot's included
	// (bot.RegistryOptions.Shared), answer the taps on /stop and /resume keyboards; a bot without one leaves
	// its taps unanswered (they take effect all the same).
	Bots *bot.Registry
	// ApplyTimeout bounds the application of one update (its own transaction when its batch's failed);
	// store.DefaultQueryTimeout when zero. A batch of several gets a fifth of it (batchTimeout).
	ApplyTimeout time.Duration
}

// Receiver handles updates. It is safe for concurrent use.
type Receiver struct {
	store     *store.Store
	outbox    *outbox.Outbox
	updates   *batch.Batcher[*job, error]
	secret    [32]byte
	bots      *bot.Registry
	hasher    phone.Hasher
	devAdmins []int64
	log       *slog.Logger
	now       func() time.Time
	timeout   time.Duration // ApplyTimeout
	// endings feeds the background pass that ends what committed opt-outs and relinks cover (endings.go).
	endings    chan store.UserRef
	endingsEnd sync.WaitGroup
	retries    sync.WaitGroup // the updates of failed batches retried on their own (applyBatch)
}

// New returns a Receiver storing through st and publishing replies through ob. Close it after the HTTP
// server (or the poller) has stopped.
func New(st *store.Store, ob *outbox.Outbox, opts Options) *Receiver {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ApplyTimeout <= 0 {
		opts.ApplyTimeout = store.DefaultQueryTimeout
	}
	rc := &Receiver{
		store:  st,
		outbox: ob,
		// Compared as digests, so the comparison takes the same time whatever the length of the guess.
		secret:    sha256.Sum256([]byte(opts.Secret)),
		bots:      opts.Bots,
		hasher:    phone.NewHasher(opts.PhoneHashKey),
		devAdmins: slices.Clone(opts.DevAdmins),
		log:       opts.Logger,
		now:       opts.Now,
		timeout:   opts.ApplyTimeout,
	}
	rc.endings = make(chan store.UserRef, maxPendingEndings)
	rc.endingsEnd.Go(rc.runEndings)
	rc.updates = batch.New(batch.Options{Loops: applyLoops, MaxBatch: maxApplyBatch}, jobActor, rc.applyBatch)
	return rc
}

// Close answers the updates already handed over, then finishes the endings they started, then stops.
func (rc *Receiver) Close() {
	rc.updates.Close()
	rc.retries.Wait()
	close(rc.endings)
	rc.endingsEnd.Wait()
}

// Routes mounts POST /messenger/webhook (the shared bot's updates) and POST /messenger/webhook/{bot_id} (a
// tenant's own bot's, spec §11).
func (rc *Receiver) Routes(r chi.Router) {
	r.Post(Path, rc.serveShared)
	r.Post(bot.WebhookPathPrefix+"{bot_id}", rc.serveBot)
}

// serveShared takes the shared bot's updates, with HERALD_WEBHOOK_SECRET.
func (rc *Receiver) serveShared(w http.ResponseWriter, r *http.Request) {
	rc.serve(w, r, bot.Shared, func(secret string) (bool, error) {
		// Compared as digests, so the comparison takes the same time whatever the length of the guess.
		got := sha256.Sum256([]byte(secret))
		return subtle.ConstantTimeCompare(got[:], rc.secret[:]) == 1, nil
	})
}

// serveBot takes a tenant's bot's updates, with that bot's own secret. An id that is no bot's (malformed,
// unknown, or no registry) is refused exactly as a wrong secret is: the route is public, and its answer
// must not tell which ids are bots.
func (rc *Receiver) serveBot(w http.ResponseWriter, r *http.Request) {
	id, valid := bot.ParseID(chi.URLParam(r, "bot_id"))
	rc.serve(w, r, id, func(secret string) (bool, error) {
		if !valid || rc.bots == nil {
			return false, nil
		}
		return rc.bots.CheckSecret(r.Context(), id, secret)
	})
}

// serve authenticates before anything is read, bounds and parses the body, handles the update as bot
// through's and answers {"ok": true}. A failure to store or queue answers 5xx, so that the platform retries
// the update.
func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request, through bot.ID, check func(secret string) (bool, error)) {
	ok, err := authorized(r.Header, check)
	if err != nil {
		observe(kindNone, outcomeError)
		rc.log.LogAttrs(r.Context(), slog.LevelError, "checking a bot's webhook secret failed", slog.Int64("bot_id", int64(through)),
			slog.Any("err", err))
		writeFailure(w, err)
		return
	}
	if !ok {
		observe(kindNone, outcomeUnauthorized)
		apierror.Write(w, apierror.Unauthorized.With("missing or invalid webhook secret"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		observe(kindNone, outcomeInvalid)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apierror.Write(w, apierror.PayloadTooLarge.With("the update is larger than %d bytes", MaxBodyBytes))
			return
		}
		apierror.Write(w, apierror.InvalidRequest.With("the update body could not be read"))
		return
	}
	u, err := ParseUpdate(body)
	if err != nil {
		observe(kindNone, outcomeInvalid)
		apierror.Write(w, apierror.InvalidRequest.With("malformed update: it must be a JSON object with an integer update_id"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), HandleTimeout)
	defer cancel()
	if _, err := rc.handleFrom(ctx, through, u); err != nil {
		writeFailure(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
}

// writeFailure answers 503 when a retry may succeed, 500 for a bug.
func writeFailure(w http.ResponseWriter, err error) {
	if IsTransient(err) {
		apierror.Write(w, apierror.Unavailable)
		return
	}
	apierror.Write(w, apierror.Internal)
}

var secretHeaders = []string{SecretHeader, PlatformSecretHeader}

// authorized: at least one secret header is present, and check accepts every value of every secret header
// (a request carrying a wrong value next to a right one is refused).
func authorized(h http.Header, check func(secret string) (bool, error)) (bool, error) {
	seen := false
	for _, name := range secretHeaders {
		for _, v := range h.Values(name) {
			if ok, err := check(v); !ok || err != nil {
				return false, err
			}
			seen = true
		}
	}
	return seen, nil
}

// ParseUpdate decodes a webhook body: a JSON object with an integer update_id. Errors wrap
// messenger.ErrInvalidUpdate. The decoder's own message is dropped: encoding/json quotes offending number
// literals, which could be a phone number, and errors get logged.
func ParseUpdate(body []byte) (messenger.Update, error) {
	u, err := messenger.ParseUpdate(body)
	if err != nil {
		return messenger.Update{}, fmt.Errorf("while parsing an update: %w", messenger.ErrInvalidUpdate)
	}
	return u, nil
}

// IsTransient reports whether handling failed for a reason that a retry of the same update may overcome
// (PostgreSQL unavailable, or too many updates at once), as opposed to a bug.
func IsTransient(err error) bool {
	return store.IsUnavailable(err) || errors.Is(err, batch.ErrOverloaded) || errors.Is(err, batch.ErrClosed)
}
