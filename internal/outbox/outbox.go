// Package outbox is the one seam between "a notification exists" and "a worker will receive it": it
// records notifications in PostgreSQL and publishes their envelopes to Kafka.
//
// It owns the rules of that step (the envelope and its partition key are internal/queue's, NewOutgoingVia;
// the gate's refusals are the store's statements and internal/consent's rules):
//   - the tracking id (a UUIDv7, minted here: time-ordered, so inserts stay at the right edge of the index);
//   - which envelope each row gets (outgoing, publish.go): one tenant user's, or one chat's, messages
//     share a key and so a partition, and stay in order;
//   - the order of the two writes: the rows commit first, then the envelopes are published, so a worker
//     never receives an envelope whose row is not there yet, and no transaction stays open across a produce;
//   - what a failed publish means: tenant sends are taken back (their rows deleted, so the 502 is true);
//     system messages are left to the relay (published_at cleared; the worker publishes them when the
//     broker is back);
//   - batching: concurrent tenant sends share one INSERT and one produce request (internal/batch), and a
//     request whose rows PostgreSQL refuses fails alone (sendBatch runs the others apart);
//   - scheduling: an item whose send_at is still ahead is stored as scheduled and not published; the
//     scheduler (ReleaseScheduled, in the worker) publishes it when it is due;
//   - the answer per item: queued or scheduled, refused by the gate (phone unverified, or the user opted
//     out), or not queued (queue error), the refusals as errors of the API's catalogue (internal/apierror).
//
// Handlers call Send or, for system messages inserted in their own transaction, Publish; the worker's loops
// call ReleaseScheduled and Republisher. None of them sees Kafka.
package outbox

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/segmentio/kafka-go"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/batch"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/tracing"
)

// Options configure an Outbox. Zero values take the defaults given in each comment.
type Options struct {
	// ProduceTimeout bounds the Kafka acknowledgement of a publish; 2 s. It must stay well under
	// store.PublishWindow.
	ProduceTimeout time.Duration
	// Batch tunes the batching of tenant sends: internal/batch's defaults (2 loops of up to 256, at most
	// 512 waiting), and past capacity a standing queue — one each batch leaves requests behind in — is
	// shed after 50 ms of waiting (Target) that lasted 250 ms (Interval), so accepted sends keep a bounded
	// latency and the others get a fast 503. Slow batches at a low rate (a replica just started) are not
	// shed: each takes all that waits.
	Batch  batch.Options
	Logger *slog.Logger
}

// Outbox records and publishes notifications. Build it with New; Close it after the HTTP server stopped.
type Outbox struct {
	st       *store.Store
	producer *queue.Producer
	timeout  time.Duration
	log      *slog.Logger
	sends    *batch.Batcher[*request, answer]
}

// New starts the send batcher.
func New(st *store.Store, producer *queue.Producer, opts Options) *Outbox {
	if opts.ProduceTimeout <= 0 {
		opts.ProduceTimeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Batch.Target == 0 {
		opts.Batch.Target, opts.Batch.Interval = 50*time.Millisecond, 250*time.Millisecond
	}
	o := &Outbox{st: st, producer: producer, timeout: opts.ProduceTimeout, log: opts.Logger}
	o.sends = batch.New(opts.Batch, nil, o.sendBatch)
	return o
}

// Close answers the sends already handed over, then stops.
func (o *Outbox) Close() { o.sends.Close() }

// ErrOverloaded means more sends wait than the outbox queues; shed the request (503, Retry-After).
var ErrOverloaded = batch.ErrOverloaded

// ErrClosed means the outbox is shutting down.
var ErrClosed = batch.ErrClosed

// Item is one tenant notification to send.
type Item struct {
	UserID   string
	Priority int
	Body     string // branded
	// The send options (validated by the caller): Metadata is stored as given; an item whose SendAt is
	// still ahead is scheduled, one whose SendAt has come is queued at once; ExpiresAt bounds delivery.
	Metadata  map[string]string
	SendAt    *time.Time
	ExpiresAt *time.Time
	Category  string // "": none
	// The rich options (§10), validated by the caller: Body's format, entities and send flags, and the link
	// buttons as the inline keyboard sendMessage takes (nil: none). The worker sends them as stored.
	notification.Rich
	ReplyMarkup json.RawMessage
	// Template: the template Body was rendered from (§12); nil: none.
	Template *notification.TemplateRef
	// ReplaceKey: the send's replace_key (§13, validated by the caller); "": none.
	ReplaceKey string
	// QuietIgnore: the send ignores its tenant's quiet hours (§14). A send held by them at acceptance
	// comes with SendAt at the window's end (the caller's decision), and is scheduled like any other.
	QuietIgnore bool
	// Digest: the send's digest option (§14); nil: none. Its item is stored scheduled and joins its key's
	// digest in the same transaction (store.Tx.JoinDigests), which makes it due when the digest closes; an
	// item whose digest holds another format is refused (invalid_request) and nothing of it is stored.
	Digest *notification.Digest
	// Refused, when set, is the item's answer already (the caller refused it, e.g. as invalid): it is not
	// stored, and stands in the answer (and the idempotent replay) at its position.
	Refused *Result
}

// Result is the answer for one item: TrackingID and Status when it was accepted, Code and Message when not
// (an error of the API's catalogue: apierror.UserOptedOut when an opt-out of the tenant or of the item's
// category covers it, apierror.PhoneUnverified when the user has no link or no verified phone,
// apierror.QueueError when the broker did not acknowledge in time; nothing was stored of any).
type Result struct {
	TrackingID string `json:"tracking_id,omitempty"`
	Status     string `json:"status,omitempty"`
	Code       string `json:"error,omitempty"`
	Message    string `json:"message,omitempty"`
}

// Accepted reports whether the item was stored (and published, or scheduled).
func (r Result) Accepted() bool { return r.TrackingID != "" }

// Idempotency identifies a request by its Idempotency-Key: RequestHash says what the request means (a
// repeat with another meaning is ErrIdempotencyConflict).
type Idempotency struct {
	Key         string
	RequestHash [32]byte
}

// ErrIdempotencyConflict means the Idempotency-Key was used with a different request.
var ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")

// request is one Send in a batch.
type request struct {
	tenantID string
	items    []Item
	idem     *Idempotency
	// ns are the notifications of the items not refused beforehand, with their positions.
	ns  []store.NewNotification
	pos []int
	// headers carry the request's trace context into its envelopes (internal/tracing).
	headers []kafka.Header
	// digestRefused: the items a digest refused (another format), by tracking id, with the reason.
	digestRefused map[string]string
}

// answer is the batch's answer to one request.
type answer struct {
	results []Result
	replay  bool  // the key belongs to an earlier request: nothing was done
	err     error // the batch failed as a whole (PostgreSQL): nothing was stored
}

// Send stores and publishes one request's tenant notifications (a POST /v1/send has one; a batch up to a
// hundred) and answers each item, in order. It shares one INSERT and one produce with the concurrent
// requests of other callers. With idem, the whole request is done once per key: a repeat gets the first
// answer again (replayed), once the first request's publish has ended.
//
// Errors: ErrIdempotencyConflict; ErrOverloaded, ErrClosed; a store error (PostgreSQL unavailable). A
// failed publish is not an error but the answer apierror.QueueError for every accepted item of the request:
// its scheduled items too, which are taken back with the others, so that a request is either stored
// whole (as far as the gate let it) or not at all, and its retry — with the same Idempotency-Key too —
// starts afresh.
func (o *Outbox) Send(ctx context.Context, tenantID string, items []Item, idem *Idempotency) (results []Result, replayed bool, err error) {
	for {
		r := &request{tenantID: tenantID, items: items, idem: idem, headers: tracing.Headers(ctx)}
		for i, it := range items {
			if it.Refused != nil {
				continue
			}
			status := notification.Queued
			if (it.SendAt != nil && it.SendAt.After(time.Now())) || it.Digest != nil {
				status = notification.Scheduled
			}
			r.ns = append(r.ns, store.NewNotification{TrackingID: newTrackingID(), Kind: notification.KindTenant, TenantID: tenantID,
				UserID: it.UserID, Priority: it.Priority, Body: it.Body, Status: status, Metadata: it.Metadata,
				SendAt: it.SendAt, ExpiresAt: it.ExpiresAt, Category: it.Category, Rich: it.Rich, ReplyMarkup: it.ReplyMarkup,
				Template: it.Template, ReplaceKey: it.ReplaceKey, QuietIgnore: it.QuietIgnore, Digest: it.Digest})
			r.pos = append(r.pos, i)
		}
		a, err := o.sends.Do(ctx, r)
		if err == nil {
			err = a.err
		}
		if err != nil {
			return nil, false, err
		}
		if !a.replay {
			return a.results, false, nil
		}
		// The key names an earlier request: its answer, once that request's publish has ended.
		results, found, err := o.replay(ctx, tenantID, idem)
		if err != nil || found {
			return results, found, err
		}
		// The earlier request took its notifications (and the key) back: this one goes ahead as the first.
	}
}

func newTrackingID() string { return uuid.Must(uuid.NewV7()).String() }

// sendBatch stores the batch's notifications in one statement (a transaction when keys are claimed),
// publishes the accepted ones in one produce, and answers each request.
//
// The requests may be different tenants': when PostgreSQL refuses the statement for what one request holds
// (store.IsDataError: a value it cannot store, a constraint), nothing was stored, and the batch is halved
// and each half run again, down to the offending request alone. It fails (its text in the caller's log);
// the others are stored and answered as if it had not been there. An unavailable database fails the whole
// batch at once: running it apart would only wait longer for the same answer.
func (o *Outbox) sendBatch(reqs []*request) []answer {
	out, err := o.sendTogether(reqs)
	if err == nil || len(reqs) == 1 || !store.IsDataError(err) {
		return out
	}
	half := len(reqs) / 2
	return append(o.sendBatch(reqs[:half]), o.sendBatch(reqs[half:])...)
}

// sendTogether is one attempt of sendBatch: one statement (or transaction) for every request. When it
// fails, nothing was stored, and every request is answered err.
func (o *Outbox) sendTogether(reqs []*request) ([]answer, error) {
	out := make([]answer, len(reqs))
	ctx, cancel := context.WithTimeout(context.Background(), store.DefaultQueryTimeout+o.timeout)
	defer cancel()

	// One claim per key: two requests with the same key in one batch (a client's concurrent repeats) would
	// make the claim's INSERT … ON CONFLICT DO UPDATE touch one row twice, which PostgreSQL refuses. The
	// first request claims; the others replay its answer.
	var claims []store.KeyClaim
	first := map[store.IdempotencyKey]int{} // key → the request that claims it
	for i, r := range reqs {
		if r.idem == nil {
			continue
		}
		if _, dup := first[keyOf(r)]; !dup {
			first[keyOf(r)] = i
			claims = append(claims, store.KeyClaim{IdempotencyKey: keyOf(r), RequestHash: r.idem.RequestHash})
		}
	}
	var ns []store.NewNotification
	var accepted map[string]store.Destination // tracking id → chat
	var optedOut map[string]string            // of the refused ones, those an opt-out covers → its category
	var keys []store.IdempotencyKey           // the keys this batch claimed and keeps
	var err error
	if len(claims) == 0 && !anyDigest(reqs) {
		for _, r := range reqs {
			ns = append(ns, r.ns...)
		}
		accepted, optedOut, err = o.st.AcceptTenantNotifications(ctx, ns)
	} else {
		err = o.st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			claimed := map[store.IdempotencyKey]bool{}
			if len(claims) > 0 { // a batch with digests and no key runs here too
				var err error
				if claimed, err = tx.ClaimIdempotencyKeys(ctx, claims); err != nil {
					return err
				}
			}
			ns, keys = ns[:0], keys[:0]
			for i, r := range reqs {
				out[i].replay = r.idem != nil && (!claimed[keyOf(r)] || first[keyOf(r)] != i)
				if !out[i].replay {
					ns = append(ns, r.ns...)
				}
			}
			if accepted, optedOut, err = tx.AcceptTenantNotifications(ctx, ns); err != nil {
				return err
			}
			refused, err := tx.JoinDigests(ctx, ns, accepted)
			if err != nil {
				return err
			}
			for _, r := range reqs {
				r.digestRefused = nil
				for _, n := range r.ns {
					if why, ok := refused[n.TrackingID]; ok {
						if r.digestRefused == nil {
							r.digestRefused = map[string]string{}
						}
						r.digestRefused[n.TrackingID] = why
					}
				}
			}
			// Keep the answer of each claimed key, for its repeats. A request that stored nothing keeps no key:
			// a retry is evaluated afresh, as if it were the first.
			saves, kept, drop := keyAnswers(reqs, out, nil, accepted, optedOut, nil)
			keys = append(keys, kept...)
			if err := tx.SaveIdempotencyResults(ctx, saves); err != nil {
				return err
			}
			return tx.DeleteIdempotencyKeys(ctx, drop)
		})
	}
	if err != nil {
		for i := range out {
			out[i] = answer{err: err}
		}
		return out, err
	}

	// Publish what was stored as queued, in one produce request per partition; scheduled notifications wait
	// for the scheduler (ReleaseScheduled).
	var envs []queue.Outgoing
	var ids []string // a failed publish takes these back: every stored item of the requests that publish
	for i, r := range reqs {
		if out[i].replay || !publishes(r, accepted) {
			continue
		}
		for _, n := range r.ns {
			to, ok := accepted[n.TrackingID]
			if !ok {
				continue
			}
			ids = append(ids, n.TrackingID)
			if n.Status != notification.Scheduled {
				n.ChatID, n.Bot = to.Chat, to.Bot
				envs = append(envs, outgoing(n, r.headers))
			}
		}
	}
	// lost: the stored notifications whose publish failed and that were taken back (deleted): they are
	// answered queue_error, and nothing of them remains. A request that publishes loses its scheduled items
	// with the others, so that it is stored whole (as far as the gate let it) or not at all.
	var lost map[string]bool
	if len(envs) > 0 {
		if err := o.publish(ctx, envs); err != nil {
			taken, derr := o.st.DiscardNotifications(context.WithoutCancel(ctx), ids)
			switch {
			case derr != nil:
				// The rows stay (with published_at set): the redrive publishes them after its threshold, so a
				// tenant answered 502 may still receive them.
				o.log.Error("could not take unpublished notifications back; the redrive will deliver them", "count", len(ids), "err", derr)
				lost = map[string]bool{}
				for _, id := range ids {
					lost[id] = true
				}
			default:
				// A row not taken back was claimed by a worker: the publish that timed out reached the broker
				// after all, and the notification is being delivered. Its item is answered as accepted.
				lost = taken
				o.log.Warn("publish failed: the notifications are taken back and answered queue_error",
					"count", len(taken), "in_delivery_after_all", len(ids)-len(taken), "err", err)
			}
		}
	}
	o.settleKeys(ctx, reqs, out, accepted, optedOut, lost, keys)
	for i, r := range reqs {
		if !out[i].replay {
			out[i].results = results(r, accepted, optedOut, lost)
		}
	}
	return out, nil
}

// settleKeys finishes the keys this batch claimed: a request whose notifications all went out is marked
// answered (its repeats replay at once); one that lost every notification to a failed publish loses its
// key (a retry starts afresh, as if first); one that lost only some keeps its key with its true answer.
func (o *Outbox) settleKeys(ctx context.Context, reqs []*request, out []answer, accepted map[string]store.Destination, optedOut map[string]string,
	lost map[string]bool, keys []store.IdempotencyKey) {
	if len(keys) == 0 {
		return
	}
	if len(lost) == 0 {
		if err := o.st.MarkIdempotencyPublished(ctx, keys); err != nil {
			// Repeats then wait for PublishWindow before they replay; nothing is lost.
			o.log.Warn("could not mark idempotent requests answered", "err", err)
		}
		return
	}
	claimed := map[store.IdempotencyKey]bool{}
	for _, k := range keys {
		claimed[k] = true
	}
	err := o.st.InTx(context.WithoutCancel(ctx), func(ctx context.Context, tx *store.Tx) error {
		saves, answered, drop := keyAnswers(reqs, out, claimed, accepted, optedOut, lost)
		if err := tx.SaveIdempotencyResults(ctx, saves); err != nil {
			return err
		}
		if err := tx.DeleteIdempotencyKeys(ctx, drop); err != nil {
			return err
		}
		return tx.MarkIdempotencyPublished(ctx, answered)
	})
	if err != nil {
		// The keys stay unanswered: their repeats replay the saved answer after PublishWindow, which may
		// call a lost notification queued; the log says which batch.
		o.log.Error("could not settle the idempotency keys of a failed publish", "keys", len(keys), "err", err)
	}
}

// publishes reports whether the request stored a notification to publish now (queued, not scheduled).
func publishes(r *request, accepted map[string]store.Destination) bool {
	for _, n := range r.ns {
		if isAccepted(accepted, n.TrackingID) && n.Status != notification.Scheduled {
			return true
		}
	}
	return false
}

// anyDigest reports whether a request of the batch has an item with a digest: the batch then runs in a
// transaction, which joins the items to their digests (store.Tx.JoinDigests).
func anyDigest(reqs []*request) bool {
	for _, r := range reqs {
		for _, n := range r.ns {
			if n.Digest != nil {
				return true
			}
		}
	}
	return false
}

// keyAnswers sorts the keys of the requests that were not replays (and, when only is not nil, whose key
// only holds) by what each request stored: one that stored a notification keeps its answer for its repeats
// (saves, its key in kept); one that stored nothing keeps no key (drop), so that a retry is evaluated
// afresh, as if it were the first.
func keyAnswers(reqs []*request, out []answer, only map[store.IdempotencyKey]bool, accepted map[string]store.Destination,
	optedOut map[string]string, lost map[string]bool) (saves []store.KeyResults, kept, drop []store.IdempotencyKey) {
	for i, r := range reqs {
		if r.idem == nil || out[i].replay || (only != nil && !only[keyOf(r)]) {
			continue
		}
		res := results(r, accepted, optedOut, lost)
		if !anyAccepted(res) {
			drop = append(drop, keyOf(r))
			continue
		}
		saves = append(saves, store.KeyResults{IdempotencyKey: keyOf(r), Results: encodeResults(res)})
		kept = append(kept, keyOf(r))
	}
	return saves, kept, drop
}

func keyOf(r *request) store.IdempotencyKey {
	return store.IdempotencyKey{TenantID: r.tenantID, Key: r.idem.Key}
}

// results is a request's answer, given what the batch stored, which of the refused ones an opt-out covers
// (with the category of that opt-out) and which of the stored ones a failed publish lost.
func results(r *request, accepted map[string]store.Destination, optedOut map[string]string, lost map[string]bool) []Result {
	res := make([]Result, len(r.items))
	for i, it := range r.items {
		if it.Refused != nil {
			res[i] = *it.Refused
		}
	}
	for j, n := range r.ns {
		i := r.pos[j]
		why, digestRefused := r.digestRefused[n.TrackingID]
		switch {
		case digestRefused:
			res[i] = refused(apierror.InvalidRequest.With("%s", why))
		case !isAccepted(accepted, n.TrackingID):
			res[i] = refused(gateRefusal(n, optedOut))
		case lost[n.TrackingID]:
			res[i] = refused(apierror.QueueError)
		default:
			res[i] = Result{TrackingID: n.TrackingID, Status: string(n.Status)}
		}
	}
	return res
}

// gateRefusal says why the gate refused n: an opt-out covers it, or else its user has no link or no verified
// phone.
func gateRefusal(n store.NewNotification, optedOut map[string]string) *apierror.Error {
	category, ok := optedOut[n.TrackingID]
	switch {
	case ok && category == "":
		return apierror.UserOptedOut.With("user %q opted out of your notifications", n.UserID)
	case ok:
		return apierror.UserOptedOut.With("user %q opted out of your notifications of category %q", n.UserID, category)
	}
	return apierror.PhoneUnverified.With("user %q has no verified phone: link the user and complete phone verification first", n.UserID)
}

func isAccepted(accepted map[string]store.Destination, trackingID string) bool {
	_, ok := accepted[trackingID]
	return ok
}

func anyAccepted(res []Result) bool {
	for _, r := range res {
		if r.Accepted() {
			return true
		}
	}
	return false
}

func encodeResults(res []Result) []byte {
	b, _ := json.Marshal(res) // strings only: cannot fail
	return b
}

// replay answers a repeat of an idempotent request with the first request's answer, once the first
// request's publish has ended (a failed publish deletes the key, and then found is false: the repeat goes
// ahead as the first).
func (o *Outbox) replay(ctx context.Context, tenantID string, idem *Idempotency) (res []Result, found bool, err error) {
	k := store.IdempotencyKey{TenantID: tenantID, Key: idem.Key}
	for {
		rec, err := o.st.ReadIdempotencyKey(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if subtle.ConstantTimeCompare(rec.RequestHash[:], idem.RequestHash[:]) != 1 {
			return nil, false, ErrIdempotencyConflict
		}
		if rec.Settled {
			if err := json.Unmarshal(rec.Results, &res); err != nil {
				return nil, false, fmt.Errorf("while reading the answer kept for Idempotency-Key %q: %w", idem.Key, err)
			}
			return res, true, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// refused is the answer for an item that e refused.
func refused(e *apierror.Error) Result { return Result{Code: e.Code, Message: e.Message} }
