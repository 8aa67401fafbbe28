package store

// The delivery states of notifications: a worker's claim, the write that ends its attempt, and the
// queries that hand envelopes to publish again (due retries, failed publishes, lost envelopes).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/phone"
)

// ErrNotClaimable means the notification exists but is terminal, not yet due, or leased by another worker.
// The error is a *NotClaimable, which says which.
var ErrNotClaimable = errors.New("not claimable")

// NotClaimable describes a notification a claim refused.
type NotClaimable struct {
	TrackingID string
	Status     notification.Status
	// Leased: another attempt holds it (status delivering under a live lease): a worker that received the
	// same envelope during a partition handover, or a redelivered copy.
	Leased bool
	// Age is how long ago the row last changed (for a terminal one: when its last attempt was recorded).
	Age time.Duration
	// Behind: it may be sent, but not yet — a message ahead of it in its chat is pending
	// (notification.AheadSQL; ClaimDeliveryInOrder only).
	Behind bool
}

func (e *NotClaimable) Error() string {
	if e.Behind {
		return fmt.Sprintf("notification %s waits for a message ahead of it in its chat", e.TrackingID)
	}
	return fmt.Sprintf("notification %s is not claimable (%s)", e.TrackingID, e.Status)
}

// Is makes errors.Is(err, ErrNotClaimable) hold.
func (e *NotClaimable) Is(target error) bool { return target == ErrNotClaimable }

// claimSQL is notification.Claim's condition: the rows a claim may take now.
var claimSQL = notification.Claim.SQL()

// ClaimDelivery moves a notification to delivering (attempts + 1, leased until now + lease) in one
// statement, when it is queued, a due retry, or delivering under an expired lease, and its expires_at (if
// any) has not passed. ErrNotFound when the row does not exist: every producer commits the row before it
// publishes the envelope, so that is an envelope whose publish was given up (see DiscardNotifications). A
// *NotClaimable when it exists but must not be sent now (terminal — cancelled included —, scheduled, retry
// not due, leased by someone). One whose expires_at has passed is moved to expired here (the expiry
// transition, lifecycle.go), and refused as expired: no attempt starts after expires_at.
func (s *Store) ClaimDelivery(ctx context.Context, trackingID string, lease time.Duration) (notification.Delivery, error) {
	return s.claimDelivery(ctx, trackingID, lease, false)
}

// ClaimDeliveryInOrder is ClaimDelivery keeping the order of the notification's chat across kinds and
// priorities (notification.AheadSQL): while a message ahead of it is pending it claims nothing and
// returns a *NotClaimable whose Behind is set.
func (s *Store) ClaimDeliveryInOrder(ctx context.Context, trackingID string, lease time.Duration) (notification.Delivery, error) {
	return s.claimDelivery(ctx, trackingID, lease, true)
}

// aheadSQL is notification.AheadSQL, or notification.KeyAheadSQL (the order of one replace_key, §13), for
// the claimed row (the UPDATE's notifications, or n).
func aheadSQL(n string) string {
	return `(EXISTS (SELECT 1 FROM notifications e WHERE ` + notification.AheadSQL("e", n) + `)
		OR EXISTS (SELECT 1 FROM notifications e WHERE ` + notification.KeyAheadSQL("e", n) + `))`
}

// editTargetSQL selects, for the claimed row c, its replace_key's message to edit (§13): the key's latest
// delivered notification, when it went to the same chat through the same bot less than
// notification.MessageWindow ago (from the message's first send) and its message is neither deleted nor
// asked to be (by any notification that names it). No row: a new message. One probe of
// notifications_replace_key_idx.
var editTargetSQL = `
	SELECT CASE WHEN p.chat_id = c.chat_id AND p.bot_id IS NOT DISTINCT FROM c.bot_id
	                 AND COALESCE(p.message_sent_at, p.delivered_at) > now() - make_interval(secs => ` +
	strconv.Itoa(int(notification.MessageWindow.Seconds())) + `)
	                 AND p.message_deleted_at IS NULL
	                 AND NOT EXISTS (SELECT 1 FROM notifications x
	                                 WHERE x.tenant_id = p.tenant_id AND x.user_id = p.user_id AND x.replace_key = p.replace_key
	                                   AND x.messenger_message_id = p.messenger_message_id
	                                   AND (x.message_delete_requested_at IS NOT NULL OR x.message_deleted_at IS NOT NULL))
	            THEN p.messenger_message_id END AS message_id,
	       COALESCE(p.message_sent_at, p.delivered_at) AS sent_at
	FROM notifications p
	WHERE c.replace_key IS NOT NULL AND p.tenant_id = c.tenant_id AND p.user_id = c.user_id AND p.replace_key = c.replace_key
	  AND p.status = ` + notification.Delivered.SQL() + ` AND p.messenger_message_id IS NOT NULL AND p.tracking_id <> c.tracking_id
	ORDER BY p.delivered_at DESC LIMIT 1`

func (s *Store) claimDelivery(ctx context.Context, trackingID string, lease time.Duration, inOrder bool) (notification.Delivery, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	for try := 0; ; try++ {
		d, err := s.claimOnce(ctx, trackingID, lease, inOrder)
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return d, translate(err, "claiming notification "+trackingID)
			}
			return d, nil
		}
		// Nothing claimed: tell a missing row from one that must not be sent now. The UPDATE and this
		// SELECT see different snapshots, so a row that changed between them reads as claimable; claim again.
		nc := &NotClaimable{TrackingID: trackingID}
		var claimable, expirable, behind bool
		var age float64
		err = s.pool.QueryRow(ctx, `
			SELECT status, `+claimSQL+`, COALESCE(`+expirableSQL+`, false),
			       status = `+notification.Delivering.SQL()+` AND lease_expires_at >= now(),
			       extract(epoch FROM now() - updated_at), $2 AND `+aheadSQL("n")+`
			FROM notifications n WHERE tracking_id = $1`, trackingID, inOrder).Scan(&nc.Status, &claimable, &expirable, &nc.Leased, &age, &behind)
		if err != nil {
			return d, translate(err, "claiming notification "+trackingID)
		}
		nc.Age = time.Duration(age * float64(time.Second))
		if expirable {
			expired, err := s.expireOne(ctx, trackingID)
			if err != nil {
				return d, translate(err, "expiring notification "+trackingID)
			}
			if expired {
				nc.Status, nc.Age = notification.Expire.To(), 0
				return d, nc
			}
			claimable = true // it changed meanwhile: look again
		}
		if claimable && behind {
			nc.Behind = true
			return d, nc
		}
		if !claimable || try == 2 {
			return d, nc
		}
	}
}

// claimOnce claims one notification with the claim's one statement (claimMany). A tenant notification goes to the chat recorded when it was
// accepted, through the bot recorded then, and only while the user's link still leads there (the same
// chat of the same bot): a relink that committed before this statement has ended the notification if it
// was waiting, or makes this claim Relinked if an attempt was running then (its retry); one that commits
// after it ends nothing this attempt holds, which then goes to the verified owner's chat. It reads whether
// the bot's token was refused (a tenant's own bot only: the shared bot has no row), and for a tenant
// notification whether that link is marked blocked and whether an opt-out covers it (§9): an opt-out that
// committed before this statement is seen here, so a notification it did not end (accepted before it, its
// envelope held by a worker) is not sent either. Likewise it reads whether the notification belongs to an
// erasure whose pass has not reached it yet (erasedSQL): the worker ends it cancelled (notification.Erase).
//
// The statement claims many notifications at once (ClaimDeliveries: the lanes' claims of the same moment),
// each exactly as it would alone: the condition and the reads are per row. inOrder are those of them that
// are claimed only when no message ahead of them in their chat is pending (notification.AheadSQL).
func (s *Store) claimOnce(ctx context.Context, trackingID string, lease time.Duration, inOrder bool) (notification.Delivery, error) {
	var ordered []string
	if inOrder {
		ordered = []string{trackingID}
	}
	ds, err := s.claimMany(ctx, []string{trackingID}, ordered, lease)
	if err != nil {
		return notification.Delivery{}, err
	}
	if len(ds) == 0 {
		return notification.Delivery{}, pgx.ErrNoRows
	}
	return ds[0], nil
}

// Claim is one notification to claim (ClaimDeliveries): its tracking id, and whether it keeps its chat's
// order (ClaimDeliveryInOrder).
type Claim struct {
	TrackingID string
	InOrder    bool
}

// ClaimDeliveries claims many notifications in one statement, each as ClaimDelivery (or, InOrder,
// ClaimDeliveryInOrder) would, and returns the deliveries of those it claimed, in claims' order, nil for
// the others: for those, ClaimDelivery says why (missing, terminal, leased, behind, expired).
func (s *Store) ClaimDeliveries(ctx context.Context, claims []Claim, lease time.Duration) ([]*notification.Delivery, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	ids := make([]string, len(claims))
	var ordered []string
	for i, c := range claims {
		ids[i] = c.TrackingID
		if c.InOrder {
			ordered = append(ordered, c.TrackingID)
		}
	}
	ds, err := s.claimMany(ctx, ids, ordered, lease)
	if err != nil {
		return nil, translate(err, "claiming notifications")
	}
	byID := make(map[string]*notification.Delivery, len(ds))
	for i := range ds {
		byID[ds[i].TrackingID] = &ds[i]
	}
	out := make([]*notification.Delivery, len(claims))
	for i, c := range claims {
		if d, ok := byID[strings.ToLower(c.TrackingID)]; ok {
			out[i] = d
			delete(byID, d.TrackingID) // a notification named twice is claimed once
		}
	}
	return out, nil
}

// byKeyOnly wraps a state guard of a statement that names its rows by key (the claim's, the finish's) in a
// subquery, which the planner evaluates on each row it fetched and never uses to find rows. As a plain
// condition it matched the partial index of the pending rows (notifications_inflight_idx: status queued or
// delivering), and whenever that index's statistics lagged a backlog — after a burst of sends, until
// autovacuum's next analyze — the planner ANDed a scan of the whole index to the key's: every pending
// row read for every claim and every status write, 25–90 ms each at 60,000 queued (make bench-bots, part
// paid), where the key alone reads the rows named.
func byKeyOnly(guard string) string { return "(SELECT " + guard + ")" }

// claimManySQL is the claim's statement: $1 the notifications, $2 the lease in seconds, $3 those of them
// that keep their chat's order.
var claimManySQL = `
		WITH c AS (
			UPDATE notifications
			SET status = ` + notification.Claim.To().SQL() + `, attempts = attempts + 1,
			    lease_expires_at = now() + make_interval(secs => $2), updated_at = now()
			WHERE tracking_id = ANY($1::uuid[]) AND ` + byKeyOnly(claimSQL) + `
			  AND NOT (COALESCE(tracking_id = ANY($3::uuid[]), false) AND ` + aheadSQL("notifications") + `)
			RETURNING tracking_id, kind, tenant_id, user_id, chat_id, bot_id, priority, body, reply_markup, attempts, expires_at, category,
			          format, entities, silent, protect_content, link_preview, replace_key, created_at, quiet_ignore, digest_key)
		SELECT c.tracking_id::text, c.kind, COALESCE(c.tenant_id, ''), COALESCE(c.user_id, ''),
		       CASE WHEN c.kind = ` + notification.KindSystemSQL + ` OR (l.chat_id = c.chat_id AND l.bot_id IS NOT DISTINCT FROM c.bot_id)
		            THEN c.chat_id ELSE 0 END,
		       COALESCE(l.chat_id <> c.chat_id OR l.bot_id IS DISTINCT FROM c.bot_id, false),
		       COALESCE(c.bot_id, 0), COALESCE(b.state = ` + botstate.TokenInvalid.SQL() + `, false),
		       COALESCE(l.blocked_at IS NOT NULL AND l.chat_id = c.chat_id AND l.bot_id IS NOT DISTINCT FROM c.bot_id, false),
		       c.kind = ` + notification.KindTenantSQL + ` AND EXISTS (
		           SELECT 1 FROM opt_outs o WHERE o.tenant_id = c.tenant_id AND o.user_id = c.user_id AND ` + optOutCovers(`c.category`) + `),
		       c.kind = ` + notification.KindTenantSQL + ` AND ` + erasedSQL("c") + `,
		       c.priority, c.body, c.reply_markup::text, c.attempts, c.expires_at,
		       COALESCE(c.format, ''), c.entities, COALESCE(c.silent, false), COALESCE(c.protect_content, false),
		       NOT COALESCE(c.link_preview, true),
		       COALESCE(c.replace_key, ''), t.message_id, t.sent_at,
		       EXISTS (SELECT 1 FROM notifications e WHERE ` + notification.KeyLaterDeliveredSQL("e", "c") + `),
		       ` + quietColumns("qt.") + `, u.time_zone, COALESCE(c.digest_key, '')
		FROM c LEFT JOIN links l ON c.kind = ` + notification.KindTenantSQL + ` AND l.tenant_id = c.tenant_id AND l.user_id = c.user_id
		     LEFT JOIN bots b ON b.id = c.bot_id
		     LEFT JOIN LATERAL (` + editTargetSQL + `) t ON true
		     LEFT JOIN tenants qt ON c.kind = ` + notification.KindTenantSQL + ` AND NOT COALESCE(c.quiet_ignore, false) AND qt.id = c.tenant_id
		     LEFT JOIN users u ON qt.quiet_start IS NOT NULL AND u.tenant_id = c.tenant_id AND u.user_id = c.user_id`

// claimMany is the claim's statement over ids; ordered are those of them that keep their chat's order.
func (s *Store) claimMany(ctx context.Context, ids, ordered []string, lease time.Duration) ([]notification.Delivery, error) {
	rows, err := s.pool.Query(ctx, claimManySQL,
		ids, lease.Seconds(), ordered)
	if err != nil {
		return nil, err
	}
	var out []notification.Delivery
	var d notification.Delivery
	var markup, entities, editID, userZone *string
	var editSentAt *time.Time
	var q quietScan
	_, err = pgx.ForEachRow(rows, []any{&d.TrackingID, &d.Kind, &d.TenantID, &d.UserID, &d.ChatID, &d.Relinked, &d.Bot, &d.BotTokenRefused, &d.Blocked, &d.OptedOut, &d.Erased,
		&d.Priority, &d.Body, &markup, &d.Attempts, &d.ExpiresAt,
		&d.Format, &entities, &d.Silent, &d.ProtectContent, &d.NoLinkPreview,
		&d.ReplaceKey, &editID, &editSentAt, &d.Superseded,
		&q.start, &q.end, &q.zone, &q.mode, &userZone, &d.DigestKey}, func() error {
		one := d
		if editID != nil {
			// The id is the platform's message_id as the finish recorded it (decimal); one that does not
			// read as one (a row changed past the store) is no message to edit.
			if id, perr := strconv.ParseInt(*editID, 10, 64); perr == nil && editSentAt != nil {
				one.Edit = &notification.EditTarget{MessageID: id, SentAt: *editSentAt}
			}
		}
		one.Quiet = q.hours()
		if userZone != nil {
			one.UserZone = *userZone
		}
		if markup != nil {
			one.ReplyMarkup = json.RawMessage(*markup)
		}
		if entities != nil {
			one.Entities = *entities
		}
		out = append(out, one)
		// The next row's nullable columns start unset, as each scan of one row did.
		d, markup, entities, editID, userZone, editSentAt, q = notification.Delivery{}, nil, nil, nil, nil, nil, quietScan{}
		return nil
	})
	return out, err
}

// finishUpdateSQL ends attempts: the status writes of many notifications in one statement, each guarded
// by its attempt number (a row whose attempt was taken over is left as it is). The outcomes are the rows of
// f (finishValues: the arrays $1…$11, one element per notification). A tenant notification without a chat
// is one whose user was erased during the attempt (a claim sends none that has no chat): the platform's
// message id is not recorded on it. The rows are named by key twice: by the join with f, and by the
// array of their keys, which makes the plan an index scan of the keys whatever the statistics say — with the
// join alone, the plan found no index condition on notifications, and one made while the table was small
// hashed f and read the whole table at each write (make bench-bots, part soak; store.StablePlans).
var finishUpdateSQL = `
	UPDATE notifications
	SET status = f_status,
	    attempts = attempts - CASE WHEN f_release THEN 1 ELSE 0 END,
	    messenger_message_id = CASE WHEN kind = ` + notification.KindTenantSQL + ` AND chat_id IS NULL THEN NULL ELSE COALESCE(f_message_id, messenger_message_id) END,
	    last_error_code = CASE WHEN f_release THEN last_error_code ELSE f_error_code END,
	    last_error_message = CASE WHEN f_release THEN last_error_message ELSE f_error_message END,
	    next_attempt_at = CASE WHEN f_status = ` + notification.Retry.To().SQL() + ` THEN now() + make_interval(secs => f_retry_in) END,
	    delivered_at = CASE WHEN f_status = ` + notification.Deliver.To().SQL() + ` THEN now() END,
	    delivered_as = CASE WHEN f_status = ` + notification.Deliver.To().SQL() + ` THEN f_delivered_as END,
	    message_sent_at = CASE WHEN f_status = ` + notification.Deliver.To().SQL() + ` THEN COALESCE(f_message_sent_at, now()) END,
	    lease_expires_at = NULL, published_at = NULL, updated_at = now()
	FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::int[], $6::text[], $7::float8[], $8::boolean[], $9::text[],
	            $10::timestamptz[], $11::boolean[])
	     AS f(f_tracking_id, f_attempts, f_status, f_message_id, f_error_code, f_error_message, f_retry_in, f_release, f_delivered_as,
	          f_message_sent_at, f_paid)
	WHERE tracking_id = ANY($1::uuid[]) AND tracking_id = f_tracking_id AND ` + byKeyOnly(notification.OutcomeSQL()) + ` AND attempts = f_attempts
	RETURNING ` + notificationEventColumns + `, f_attempts, f_paid, f_delivered_as`

// finishSQL is the status writes with the callback events and the usage counts of the terminal states, in
// one statement; it returns the attempts written (tracking id and attempt number).
var finishSQL = `WITH changed AS (` + finishUpdateSQL + `),
	` + notificationEventsOfAttempt("changed", "f_paid", "f_delivered_as = '"+notification.DeliveredEdited+"'") + `
	SELECT tracking_id::text, f_attempts FROM changed`

// Finish is the outcome of one attempt to record: the claim's delivery and the result of its attempt.
type Finish struct {
	D notification.Delivery
	R notification.DeliveryResult
}

// finishValues are the arguments of finishSQL: one element per outcome in each array.
func finishValues(fs []Finish) []any {
	n := len(fs)
	ids, statuses, deliveredAs := make([]string, n), make([]string, n), make([]string, n)
	attempts, codes := make([]int32, n), make([]int32, n)
	msgIDs, errMsgs := make([]*string, n), make([]*string, n)
	retryIn := make([]float64, n)
	release, paid := make([]bool, n), make([]bool, n)
	sentAt := make([]*time.Time, n)
	for i, f := range fs {
		r := f.R
		ids[i], attempts[i], statuses[i], codes[i] = f.D.TrackingID, int32(f.D.Attempts), string(r.Status), int32(r.ErrorCode)
		if r.MessengerMessageID != "" {
			msgIDs[i] = &r.MessengerMessageID
		}
		if r.ErrorMessage != "" {
			errMsgs[i] = &r.ErrorMessage
		}
		retryIn[i], release[i], sentAt[i], paid[i] = r.RetryIn.Seconds(), r.Release, r.MessageSentAt, r.PaidBroadcast
		deliveredAs[i] = r.DeliveredAs
		if deliveredAs[i] == "" {
			deliveredAs[i] = notification.DeliveredSent
		}
	}
	return []any{ids, attempts, statuses, msgIDs, codes, errMsgs, retryIn, release, deliveredAs, sentAt, paid}
}

// FinishDeliveries writes the results of many attempts in one statement (the worker's lanes finishing at
// the same moment), each exactly as FinishDelivery would, and reports for each whether it was written (false:
// the notification is no longer delivering under that attempt). The callback events and the usage counts
// of the terminal states are recorded in the same statement, the counts summed per tenant. An outcome
// that removes a link (RemoveLink) takes a transaction of its own: give those to FinishDelivery. Two
// attempts of one notification may come together (a lane that outlived its lease, and the attempt that
// took it over): only the current one is written.
func (s *Store) FinishDeliveries(ctx context.Context, fs []Finish) ([]bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, finishSQL, finishValues(fs)...)
	if err != nil {
		return nil, translate(err, "recording deliveries")
	}
	type attempt struct {
		id string
		n  int
	}
	written := map[attempt]bool{}
	var a attempt
	_, err = pgx.ForEachRow(rows, []any{&a.id, &a.n}, func() error { written[a] = true; return nil })
	if err != nil {
		return nil, translate(err, "recording deliveries")
	}
	ok := make([]bool, len(fs))
	for i, f := range fs {
		ok[i] = written[attempt{f.D.TrackingID, f.D.Attempts}]
	}
	return ok, nil
}

// FinishDelivery writes the result of the attempt d.Attempts. It reports false when the notification is
// no longer delivering under that attempt (its lease ran out and another worker claimed it): the write is
// then dropped, and the newer attempt's result will stand. A terminal state records its callback events
// (notification.<status>) for the tenant's subscribed endpoints in the same statement.
func (s *Store) FinishDelivery(ctx context.Context, d notification.Delivery, r notification.DeliveryResult) (bool, error) {
	removeLink := r.RemoveLink && d.TenantID != "" && d.ChatID != 0
	if !removeLink {
		// The common case is one statement: no transaction, one round trip, the callback events included.
		ok, err := s.FinishDeliveries(ctx, []Finish{{D: d, R: r}})
		if err != nil {
			return false, fmt.Errorf("recording the delivery of %s: %w", d.TrackingID, err)
		}
		return ok[0], nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	updated := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, finishSQL, finishValues([]Finish{{D: d, R: r}})...)
		if err != nil {
			return fmt.Errorf("updating status: %w", err)
		}
		n := 0
		var id string
		var attempts int
		if _, err := pgx.ForEachRow(rows, []any{&id, &attempts}, func() error { n++; return nil }); err != nil {
			return fmt.Errorf("updating status: %w", err)
		}
		updated = n == 1
		if !updated {
			return nil
		}
		// Only the link the attempt used: if the user linked another account (or through another bot)
		// meanwhile, that link stands. A system message names no user, so every link of its tenant to the
		// dead chat of its bot goes.
		_, err = tx.Exec(ctx, `
			WITH gone AS (
				DELETE FROM links WHERE tenant_id = $1 AND chat_id = $3 AND bot_id IS NOT DISTINCT FROM $4::bigint
				                        AND ($2 = '' OR user_id = $2)
				RETURNING tenant_id, user_id)
			UPDATE phone_verifications v
			SET status = `+phone.Unverified.SQL()+`, session_expires_at = NULL, verified_at = NULL, phone_last4 = NULL,
			    phone_hash = NULL, updated_at = now()
			FROM gone WHERE v.tenant_id = gone.tenant_id AND v.user_id = gone.user_id`,
			d.TenantID, d.UserID, d.ChatID, botArg(d.Bot))
		if err != nil {
			return fmt.Errorf("removing link: %w", err)
		}
		return nil
	})
	return updated, translate(err, "recording the delivery of "+d.TrackingID)
}

// DeliveryRecorded reports whether the notification already shows the result r of attempt d.Attempts: a
// status write whose answer was lost (the connection broke after the commit) and whose retry then matched
// nothing.
func (s *Store) DeliveryRecorded(ctx context.Context, d notification.Delivery, r notification.DeliveryResult) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	attempts := d.Attempts
	if r.Release {
		attempts--
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT status = $2 AND attempts = $3 FROM notifications WHERE tracking_id = $1`,
		d.TrackingID, r.Status, attempts).Scan(&ok)
	return ok, translate(err, "reading the delivery of "+d.TrackingID)
}

// Pending is a notification whose envelope must be produced again.
type Pending struct {
	TrackingID string
	Kind       string
	TenantID   string
	UserID     string
	ChatID     int64
	Bot        notification.BotID // with ChatID, the envelope's key
	Priority   int
	Status     notification.Status
}

// pendingColumns are the columns scanPending reads, of a notifications row.
const pendingColumns = `tracking_id::text, kind, COALESCE(tenant_id, ''), COALESCE(user_id, ''), COALESCE(chat_id, 0),
	COALESCE(bot_id, 0), priority, status`

func scanPending(row pgx.CollectableRow) (Pending, error) {
	var p Pending
	err := row.Scan(&p.TrackingID, &p.Kind, &p.TenantID, &p.UserID, &p.ChatID, &p.Bot, &p.Priority, &p.Status)
	return p, err
}

// RepublishFunc produces the envelopes of batch and returns the tracking ids it produced.
type RepublishFunc func(ctx context.Context, batch []Pending) []string

// RepublishDueRetries hands up to limit retrying notifications whose next attempt is due to publish, and
// marks the ones it produced as published. quiet is how long a published envelope is trusted to arrive
// before the notification is published again. Rows are locked with SKIP LOCKED for the duration, so
// several workers share the work without producing the same envelope twice.
func (s *Store) RepublishDueRetries(ctx context.Context, limit int, quiet time.Duration, publish RepublishFunc) (int, error) {
	return s.republish(ctx, `
		SELECT `+pendingColumns+`
		FROM notifications
		WHERE status = `+notification.Retrying.SQL()+` AND next_attempt_at <= now()
		  AND (published_at IS NULL OR published_at < now() - make_interval(secs => $2))
		ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED`, publish, limit, quiet.Seconds())
}

// RepublishUnpublished is the outbox relay: it hands up to limit queued notifications whose publish failed
// (published_at cleared by MarkUnpublished) to publish, and marks the ones it produced.
func (s *Store) RepublishUnpublished(ctx context.Context, limit int, publish RepublishFunc) (int, error) {
	return s.republish(ctx, `
		SELECT `+pendingColumns+`
		FROM notifications
		WHERE status = `+notification.Queued.SQL()+` AND published_at IS NULL
		ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`, publish, limit)
}

// RepublishStuck hands up to limit notifications that look lost to publish: queued, and last published,
// longer than queuedAfter ago (the envelope never arrived; 0 hands out no queued row), or delivering past
// an expired lease (the worker died) and last published longer than quiet ago.
func (s *Store) RepublishStuck(ctx context.Context, limit int, queuedAfter, quiet time.Duration, publish RepublishFunc) (int, error) {
	return s.republish(ctx, `
		SELECT `+pendingColumns+`
		FROM notifications
		WHERE `+notification.StatusIn(notification.Queued, notification.Delivering)+`
		  AND ((status = `+notification.Queued.SQL()+` AND $2::float8 > 0 AND updated_at < now() - make_interval(secs => $2)
		        AND (published_at IS NULL OR published_at < now() - make_interval(secs => $2)))
		       OR (`+notification.Redrive.SQL()+` AND (published_at IS NULL OR published_at < now() - make_interval(secs => $3))))
		ORDER BY updated_at LIMIT $1 FOR UPDATE SKIP LOCKED`, publish, limit, queuedAfter.Seconds(), quiet.Seconds())
}

func (s *Store) republish(ctx context.Context, query string, publish RepublishFunc, args ...any) (int, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	n := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("selecting: %w", err)
		}
		batch, err := pgx.CollectRows(rows, scanPending)
		if err != nil || len(batch) == 0 {
			return err
		}
		done := publish(ctx, batch)
		n = len(done)
		if n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE notifications SET published_at = now() WHERE tracking_id = ANY($1::uuid[])`, done); err != nil {
			return fmt.Errorf("marking published: %w", err)
		}
		return nil
	})
	return n, translate(err, "republishing notifications")
}
