package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file holds the SQL of the messenger update receiver (internal/updates). Every update that has an
// effect runs in one transaction that first claims its update_id in processed_updates, then applies the
// effect, then inserts the replies; after the commit the replies' envelopes are produced (a reply that
// cannot be produced now is left to the relay). So an update_id takes effect at most once, also when two
// copies arrive at the same time (the second INSERT waits for the first transaction and then finds the
// row), and a failure before the commit leaves nothing behind, so the platform's retry can succeed.

// ErrUpdateProcessed says the update_id was handled before; the caller acknowledges it and does nothing.
var ErrUpdateProcessed = errors.New("update already processed")

// PublisherFor returns the function producing a notification's envelope (dispatch.Dispatcher.Publisher).
type PublisherFor func(n NewNotification) Publisher

// ProcessedUpdateRetention is how long processed update ids are kept. The platform gives up redelivering an
// update long before (about a day), so a week is ample.
const ProcessedUpdateRetention = 7 * 24 * time.Hour

// updateEffect is what an update does in its transaction, in two pipelined round trips:
//
//  1. first queues the effect's statements; they run after the update_id was claimed.
//  2. then, with the results of the first batch in, queues dependent statements and returns the replies;
//     both are sent in a second batch. The replies' envelopes are produced before COMMIT.
//
// A reply known in advance (replies) is inserted in the first batch, saving the second round trip.
// actor is the messenger user the update comes from (0: none), see updateBatcher.
type updateEffect struct {
	actor   int64
	replies []NewNotification
	first   func(b *pgx.Batch)
	then    func(b *pgx.Batch) ([]NewNotification, error)
}

// updateBatcher groups concurrent updates into one transaction, as internal/enqueue does for sends: one
// claim statement, one pipelined batch of effects, one of dependent statements, one Kafka produce of all
// replies and one COMMIT serve the whole batch, so the webhook's capacity is not one durable commit and one
// Kafka acknowledgement per update. Within a batch the statements run in arrival order; a batch holds at
// most one update per messenger user, so one user's updates still apply one after the other. A batch that
// fails is retried update by update, so one failing update (or a deadlock with another batch) costs the
// others nothing; the update that still fails answers an error and the platform retries it.
type updateBatcher struct {
	startOnce sync.Once
	mu        sync.RWMutex // held shared while handing a job over, exclusively to close
	closed    bool
	jobs      chan *updateJob
	done      chan struct{}
	stopped   sync.WaitGroup
}

type updateJob struct {
	updateID int64
	publish  PublisherFor
	effect   updateEffect
	result   chan error
	err      error // the job's own outcome within a committed batch (ErrUpdateProcessed)
}

const (
	updateLoops    = 2
	maxUpdateBatch = 64
)

// start runs the batch loops on first use.
func (b *updateBatcher) start(s *Store) {
	b.startOnce.Do(func() {
		b.jobs = make(chan *updateJob, updateLoops*maxUpdateBatch)
		b.done = make(chan struct{})
		for range updateLoops {
			b.stopped.Add(1)
			go func() { defer b.stopped.Done(); s.updateLoop() }()
		}
	})
}

// stop serves the updates already handed over, then ends the loops; none start afterwards.
func (b *updateBatcher) stop() {
	b.startOnce.Do(func() { b.done = make(chan struct{}) })
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
	b.mu.Unlock()
	b.stopped.Wait()
}

// hand gives j to the loops; false once the store is closed.
func (b *updateBatcher) hand(j *updateJob) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	b.jobs <- j // the loops run until closed, so this returns
	return true
}

// processUpdate runs e in the transaction that claims updateID (batched with concurrent updates). The
// caller's context does not bound it: once handed over, an update is carried out under the batch's own
// deadline (DefaultQueryTimeout), so that its answer says what happened.
func (s *Store) processUpdate(_ context.Context, updateID int64, doing string, publish PublisherFor, e updateEffect) error {
	s.updates.start(s)
	j := &updateJob{updateID: updateID, publish: publish, effect: e, result: make(chan error, 1)}
	if !s.updates.hand(j) {
		return fmt.Errorf("while %s: store closed", doing)
	}
	err := <-j.result
	if errors.Is(err, ErrUpdateProcessed) {
		return ErrUpdateProcessed
	}
	return translate(err, doing)
}

func (s *Store) updateLoop() {
	var carry []*updateJob // updates of a user already in the previous batch
	for {
		var batch []*updateJob
		actors := map[int64]bool{}
		var next []*updateJob
		add := func(j *updateJob) {
			if a := j.effect.actor; a != 0 && actors[a] {
				next = append(next, j)
				return
			}
			actors[j.effect.actor] = true
			batch = append(batch, j)
		}
		for _, j := range carry {
			add(j)
		}
		if len(batch) == 0 {
			select {
			case j := <-s.updates.jobs:
				add(j)
			case <-s.updates.done:
				select {
				case j := <-s.updates.jobs:
					add(j)
				default:
					return
				}
			}
		}
	fill:
		for len(batch)+len(next) < maxUpdateBatch {
			select {
			case j := <-s.updates.jobs:
				add(j)
			default:
				break fill
			}
		}
		carry = next
		err := s.runUpdates(batch)
		if err != nil && len(batch) > 1 {
			for _, j := range batch {
				j.result <- jobError(j, s.runUpdates([]*updateJob{j}))
			}
			continue
		}
		for _, j := range batch {
			j.result <- jobError(j, err)
		}
	}
}

// publishReplies publishes the replies of a committed batch. A reply that cannot be published now is left
// to the relay: the update has taken effect, and the platform must not send it again.
func (s *Store) publishReplies(replies []reply) {
	if len(replies) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultQueryTimeout)
	defer cancel()
	ns := make([]NewNotification, len(replies))
	byID := make(map[string]PublisherFor, len(replies))
	for i, r := range replies {
		ns[i] = r.n
		byID[r.n.TrackingID] = r.publish
	}
	_ = s.publishSystem(ctx, ns, func(ctx context.Context, n NewNotification) error { return byID[n.TrackingID](n)(ctx) })
}

// reply is a system message queued by an update, with the function that publishes it.
type reply struct {
	n       NewNotification
	publish PublisherFor
}

// jobError is a job's answer once its batch committed (batchErr nil) or failed.
func jobError(j *updateJob, batchErr error) error {
	if batchErr != nil {
		return batchErr
	}
	return j.err
}

// runUpdates applies a batch in one transaction, then publishes the replies it queued. It returns an error
// only when the transaction failed; an update whose id was claimed before gets ErrUpdateProcessed in its
// own job.
func (s *Store) runUpdates(batch []*updateJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultQueryTimeout)
	defer cancel()
	for _, j := range batch {
		j.err = nil
	}
	var replies []reply
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		replies = replies[:0]
		// Claim every update_id in one statement, in a fixed order so two batches cannot deadlock here.
		ids := make([]int64, len(batch))
		for i, j := range batch {
			ids[i] = j.updateID
		}
		slices.Sort(ids)
		rows, err := tx.Query(ctx, `INSERT INTO processed_updates (update_id) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING RETURNING update_id`, ids)
		if err != nil {
			return fmt.Errorf("claiming updates: %w", err)
		}
		claimed := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			claimed[id] = true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claiming updates: %w", err)
		}
		var live []*updateJob
		for _, j := range batch {
			if claimed[j.updateID] {
				delete(claimed, j.updateID) // a second copy in the same batch is a repeat
				live = append(live, j)
			} else {
				j.err = ErrUpdateProcessed
			}
		}
		if len(live) == 0 {
			return nil
		}
		first := &pgx.Batch{}
		for _, j := range live {
			for _, n := range j.effect.replies {
				queueSystem(first, n)
			}
			if j.effect.first != nil {
				j.effect.first(first)
			}
		}
		if first.Len() > 0 {
			if err := tx.SendBatch(ctx, first).Close(); err != nil {
				return fmt.Errorf("applying updates: %w", err)
			}
		}
		second := &pgx.Batch{}
		for _, j := range live {
			for _, n := range j.effect.replies {
				replies = append(replies, reply{n, j.publish})
			}
			if j.effect.then == nil {
				continue
			}
			more, err := j.effect.then(second)
			if err != nil {
				return err
			}
			for _, n := range more {
				queueSystem(second, n)
				replies = append(replies, reply{n, j.publish})
			}
		}
		if second.Len() > 0 {
			if err := tx.SendBatch(ctx, second).Close(); err != nil {
				return fmt.Errorf("applying updates: %w", err)
			}
		}
		return nil
	})
	if err == nil {
		s.publishReplies(replies)
	}
	return err
}

// queueSystem queues the insert of a system message in state queued, for a batch.
func queueSystem(b *pgx.Batch, n NewNotification) { b.Queue(insertSystemSQL, systemArgs(n)...) }

// ReplyOnce queues a reply to an update that has no other effect (an explanation, a refusal, a developer
// command's answer), once per update_id. ErrUpdateProcessed for a repeated update.
func (s *Store) ReplyOnce(ctx context.Context, updateID int64, reply NewNotification, publish PublisherFor) error {
	return s.processUpdate(ctx, updateID, "replying to an update", publish, updateEffect{replies: []NewNotification{reply}})
}

// LinkOutcome is what a /start with a token did.
type LinkOutcome string

// Link outcomes.
const (
	LinkLinked  LinkOutcome = "linked"  // the token was valid: the user is linked to the sender
	LinkUnknown LinkOutcome = "unknown" // no such token
	LinkExpired LinkOutcome = "expired" // the token outlived LinkTokenTTL unused
	LinkUsed    LinkOutcome = "used"    // the token was redeemed before
)

// Redemption is a /start <token> from a private chat.
type Redemption struct {
	Digest          [32]byte // SHA-256 of the token
	MessengerUserID int64
	ChatID          int64
}

// LinkResult describes a redemption. TenantID and Label are set for every outcome but LinkUnknown, UserID
// only for LinkLinked.
type LinkResult struct {
	Outcome  LinkOutcome
	TenantID string
	UserID   string
	Label    string // the token's label snapshot
	// Replaced: the user was linked to another messenger account before; that link was replaced and the
	// phone verification reset to unverified.
	Replaced bool
}

// RedeemLinkToken consumes a valid, unexpired, unused token and links its user to the sender, in the
// transaction that claims updateID and queues the reply built from the result. Of two concurrent
// redemptions of one token exactly one links: the second waits on the token's row lock, then finds it used.
// ErrUpdateProcessed for a repeated update.
func (s *Store) RedeemLinkToken(ctx context.Context, updateID int64, r Redemption, reply func(LinkResult) NewNotification, publish PublisherFor) (LinkResult, error) {
	var (
		res      LinkResult
		consumed bool
		previous *int64 // the messenger account the user was linked to
	)
	err := s.processUpdate(ctx, updateID, "redeeming a link token", publish, updateEffect{
		actor: r.MessengerUserID,
		first: func(b *pgx.Batch) {
			res, consumed, previous = LinkResult{}, false, nil
			b.Queue(`
				UPDATE link_tokens SET used_at = now()
				WHERE digest = $1 AND used_at IS NULL AND expires_at > now()
				RETURNING tenant_id, user_id, label`, r.Digest[:]).QueryRow(func(row pgx.Row) error {
				err := row.Scan(&res.TenantID, &res.UserID, &res.Label)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				consumed = err == nil
				return err
			})
			// Why a token was refused, and the current link of its user, read after the consumption above.
			b.Queue(`
				SELECT t.tenant_id, t.label, t.used_at IS NOT NULL,
				       (SELECT l.messenger_user_id FROM links l WHERE l.tenant_id = t.tenant_id AND l.user_id = t.user_id)
				FROM link_tokens t WHERE t.digest = $1`, r.Digest[:]).QueryRow(func(row pgx.Row) error {
				var tenantID, label string
				var used bool
				err := row.Scan(&tenantID, &label, &used, &previous)
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					res.Outcome = LinkUnknown
					return nil
				case err != nil:
					return err
				case consumed:
					res.Outcome = LinkLinked
				case used:
					res.Outcome, res.TenantID, res.Label = LinkUsed, tenantID, label
				default:
					res.Outcome, res.TenantID, res.Label = LinkExpired, tenantID, label
				}
				return nil
			})
		},
		then: func(b *pgx.Batch) ([]NewNotification, error) {
			if res.Outcome != LinkLinked {
				return []NewNotification{reply(res)}, nil
			}
			b.Queue(`
				INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id) VALUES ($1, $2, $3, $4)
				ON CONFLICT (tenant_id, user_id) DO UPDATE
				  SET messenger_user_id = EXCLUDED.messenger_user_id, chat_id = EXCLUDED.chat_id, linked_at = now()`,
				res.TenantID, res.UserID, r.MessengerUserID, r.ChatID)
			// A verification proves the phone of one messenger account; it does not carry over to another.
			// (Two concurrent relinks of one user serialise on the link's row lock; each resets when the
			// account it read differs from its own, so a verification never outlives a change of account.)
			if previous != nil && *previous != r.MessengerUserID {
				res.Replaced = true
				b.Queue(`
					UPDATE phone_verifications
					SET status = 'unverified', session_expires_at = NULL, phone_last4 = NULL, phone_hash = NULL,
					    verified_at = NULL, updated_at = now()
					WHERE tenant_id = $1 AND user_id = $2`, res.TenantID, res.UserID)
			}
			return []NewNotification{reply(res)}, nil
		},
	})
	return res, err
}

// ContactShare is the sender's own contact, shared in a private chat: only the last four digits and the
// keyed digest of the E.164 number, never the number.
type ContactShare struct {
	MessengerUserID int64
	PhoneLast4      string
	PhoneHash       [32]byte
}

// Session is one phone verification session of a tenant user.
type Session struct {
	TenantID string
	UserID   string
	Label    string // the session's label snapshot, or the tenant's developer name
}

// VerificationResult describes a contact share.
type VerificationResult struct {
	Verified []Session
	// Expired is set when nothing was completed but the sender has a pending session past its expiry (the
	// most recent one, for branding the reply).
	Expired *Session
}

// CompleteVerifications verifies every pending, unexpired session of the tenant users linked to the
// sender's messenger account, across tenants, in the transaction that claims updateID and queues the
// replies built from the result. ErrUpdateProcessed for a repeated update.
func (s *Store) CompleteVerifications(ctx context.Context, updateID int64, c ContactShare, replies func(VerificationResult) []NewNotification, publish PublisherFor) (VerificationResult, error) {
	var res VerificationResult
	err := s.processUpdate(ctx, updateID, "completing phone verification", publish, updateEffect{
		actor: c.MessengerUserID,
		first: func(b *pgx.Batch) {
			res = VerificationResult{}
			b.Queue(`
				UPDATE phone_verifications v
				SET status = 'verified', phone_last4 = $2, phone_hash = $3, verified_at = now(), updated_at = now()
				FROM links l, tenants t
				WHERE l.messenger_user_id = $1 AND v.tenant_id = l.tenant_id AND v.user_id = l.user_id
				  AND t.id = v.tenant_id AND v.status = 'pending' AND v.session_expires_at > now()
				RETURNING v.tenant_id, v.user_id, COALESCE(v.label, t.developer_name)`,
				c.MessengerUserID, c.PhoneLast4, c.PhoneHash[:]).Query(func(rows pgx.Rows) error {
				var err error
				res.Verified, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Session, error) {
					var v Session
					err := r.Scan(&v.TenantID, &v.UserID, &v.Label)
					return v, err
				})
				return err
			})
			// The most recent expired session, for the reply when nothing was completed. Sessions verified
			// just above are no longer pending, so they cannot show up here.
			b.Queue(`
				SELECT v.tenant_id, v.user_id, COALESCE(v.label, t.developer_name)
				FROM phone_verifications v JOIN links l USING (tenant_id, user_id) JOIN tenants t ON t.id = v.tenant_id
				WHERE l.messenger_user_id = $1 AND v.status = 'pending' AND v.session_expires_at <= now()
				ORDER BY v.session_expires_at DESC LIMIT 1`, c.MessengerUserID).QueryRow(func(row pgx.Row) error {
				var e Session
				err := row.Scan(&e.TenantID, &e.UserID, &e.Label)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				if err == nil && len(res.Verified) == 0 {
					res.Expired = &e
				}
				return err
			})
		},
		then: func(*pgx.Batch) ([]NewNotification, error) { return replies(res), nil },
	})
	return res, err
}

// PruneProcessedUpdates forgets update ids processed before olderThan ago and returns how many.
func (s *Store) PruneProcessedUpdates(ctx context.Context, olderThan time.Duration) (int64, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `DELETE FROM processed_updates WHERE processed_at < now() - $1::interval`, olderThan.String())
	if err != nil {
		return 0, translate(err, "pruning processed updates")
	}
	return tag.RowsAffected(), nil
}

// DeveloperTenants returns the tenants whose developers include the messenger user, or every tenant for a
// platform admin, ordered by id.
func (s *Store) DeveloperTenants(ctx context.Context, messengerUserID int64, admin bool) ([]Tenant, error) {
	if admin {
		return s.ListTenants(ctx)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT id, developer_name, suspended, developers, created_at FROM tenants
		WHERE $1 = ANY (developers) ORDER BY id`, messengerUserID)
	if err != nil {
		return nil, translate(err, "listing a developer's tenants")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Tenant, error) {
		var t Tenant
		err := r.Scan(&t.ID, &t.DeveloperName, &t.Suspended, &t.Developers, &t.CreatedAt)
		return t, err
	})
	return out, translate(err, "listing a developer's tenants")
}

// StatusCount is the number of a tenant's notifications in one status.
type StatusCount struct {
	TenantID string
	Status   string
	Count    int64
}

// NotificationStats counts the tenant notifications of the given tenants created within the last window,
// by tenant and status, ordered by tenant and status.
func (s *Store) NotificationStats(ctx context.Context, tenantIDs []string, window time.Duration) ([]StatusCount, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		SELECT tenant_id, status, count(*) FROM notifications
		WHERE kind = 'tenant' AND tenant_id = ANY ($1) AND created_at > now() - $2::interval
		GROUP BY tenant_id, status ORDER BY tenant_id, status`, tenantIDs, window.String())
	if err != nil {
		return nil, translate(err, "counting notifications")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StatusCount, error) {
		var c StatusCount
		err := r.Scan(&c.TenantID, &c.Status, &c.Count)
		return c, err
	})
	return out, translate(err, "counting notifications")
}

// TenantNotification is a tenant notification's metadata with its tenant (never the body).
type TenantNotification struct {
	TenantID string
	NotificationView
}

// FindTenantNotification reads the metadata of a tenant notification that belongs to one of tenantIDs;
// ErrNotFound otherwise (unknown id, a system message, or another tenant's).
func (s *Store) FindTenantNotification(ctx context.Context, tenantIDs []string, trackingID string) (TenantNotification, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var v TenantNotification
	err := s.pool.QueryRow(ctx, `
		SELECT tenant_id, tracking_id::text, user_id, priority, status, attempts, created_at, updated_at,
		       messenger_message_id, last_error_code, last_error_message
		FROM notifications WHERE tracking_id = $1 AND kind = 'tenant' AND tenant_id = ANY ($2)`, trackingID, tenantIDs).
		Scan(&v.TenantID, &v.TrackingID, &v.UserID, &v.Priority, &v.Status, &v.Attempts, &v.CreatedAt, &v.UpdatedAt,
			&v.MessengerMessageID, &v.LastErrorCode, &v.LastErrorMessage)
	return v, translate(err, "reading notification")
}
