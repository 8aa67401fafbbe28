package store

// The outbox of status callbacks. An event is recorded in the statement — and so the transaction — of the
// change it reports, through one helper, emitEvents, and its two uses: notificationEvents for every change
// of a notification's state (FinishDelivery; the lifecycle's cancel and expiry join it the same way) and
// userEvents for links and verifications. It lands in callback_inbox, one row per event; the sender
// (internal/callback) fans it out to callback_events, one row per endpoint (DispatchCallbackEvents),
// claims due rows with SKIP LOCKED, sends them, and writes each result.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/usage"
)

// Callback event types (spec v1-extensions §7, §9).
const (
	EventPing          = "ping"
	EventUserLinked    = "user.linked"
	EventUserVerified  = "user.verified"
	EventUserOptedOut  = "user.opted_out"
	EventUserOptedIn   = "user.opted_in"
	EventUserBlocked   = "user.blocked"
	EventUserUnblocked = "user.unblocked"
)

// NotificationEvent is the type of the event that reports a notification reaching the terminal state s.
func NotificationEvent(s notification.Status) string { return "notification." + string(s) }

// EventTypes lists every event type an endpoint may subscribe to, in the contract's order. Each terminal
// notification.Status has its notification.<status> here (a test checks it).
var EventTypes = []string{
	"notification.delivered", "notification.failed", "notification.blocked", "notification.unlinked",
	"notification.expired", "notification.cancelled", EventUserLinked, EventUserVerified, EventPing,
	EventUserOptedOut, EventUserOptedIn, EventUserBlocked, EventUserUnblocked, EventMessageDeleted,
}

// emitEvents is the one way an event enters the outbox. src names a CTE (or table expression) of events
// with the columns (tenant_id, type, tracking_id, user_id, at, data — the event's data beyond its user or
// notification, a jsonb object or NULL); emitEvents returns a CTE, name, to put after
// it in the same WITH, that records each event once in callback_inbox when its tenant has an endpoint
// subscribed to its type. It runs in the statement that makes the change: a tenant without such an
// endpoint costs an index probe — no round trip, no row — and one with five costs one narrow row. The
// sender fans the inbox out to the endpoints (DispatchCallbackEvents).
func emitEvents(name, src string) string {
	return name + ` AS (
		INSERT INTO callback_inbox (tenant_id, type, tracking_id, user_id, created_at, data)
		SELECT s.tenant_id, s.type, s.tracking_id, s.user_id, s.at, s.data FROM ` + src + ` s
		WHERE EXISTS (SELECT 1 FROM callback_endpoints ep WHERE ep.tenant_id = s.tenant_id AND s.type = ANY (ep.events)))`
}

// DispatchCallbackEvents moves up to limit events from the inbox into callback_events, one row per
// endpoint of the event's tenant subscribed to its type (all under the event's id), in one statement, and
// returns how many events it moved and the endpoints that received some. Several senders share the inbox
// with SKIP LOCKED.
func (s *Store) DispatchCallbackEvents(ctx context.Context, limit int) (int, []string, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var n int
	var endpoints []string
	err := s.pool.QueryRow(ctx, `
		WITH batch AS (
			DELETE FROM callback_inbox
			WHERE id IN (SELECT id FROM callback_inbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
			RETURNING id, event_id, tenant_id, type, tracking_id, user_id, created_at, data),
		fanned AS (
			INSERT INTO callback_events (event_id, endpoint_id, type, tracking_id, user_id, created_at, data)
			SELECT b.event_id, ep.id, b.type, b.tracking_id, b.user_id, b.created_at, b.data
			FROM batch b JOIN callback_endpoints ep ON ep.tenant_id = b.tenant_id AND b.type = ANY (ep.events)
			ORDER BY b.id, ep.id
			RETURNING endpoint_id)
		SELECT (SELECT count(*) FROM batch), COALESCE((SELECT array_agg(DISTINCT endpoint_id::text) FROM fanned), '{}')`,
		limit).Scan(&n, &endpoints)
	return n, endpoints, translate(err, "dispatching callback events")
}

// notificationEventColumns is what a statement that changes notifications returns (RETURNING …) for
// notificationEvents.
const notificationEventColumns = `tracking_id, kind, tenant_id, status, updated_at`

// notificationEvents is the hook every change of a notification's state goes through: changed names a
// CTE of the changed notifications rows, RETURNING notificationEventColumns. Tenant notifications that
// reached a terminal state (notification.TerminalSQL) become notification.<status> events, and are counted
// in their tenant's usage (countUsage: internal/usage maps the state to its column); anything else (a
// retry, a system message) becomes nothing. A statement goes through it once (its usage is one INSERT …
// ON CONFLICT): one that changes rows in two CTEs unites them first. Use:
//
//	WITH changed AS (UPDATE notifications SET status = … WHERE … RETURNING `+notificationEventColumns+`),
//	     `+notificationEvents("changed")+`
//	SELECT count(*) FROM changed
func notificationEvents(changed string) string {
	return notificationEventsOfAttempt(changed, "false", "false")
}

// notificationEventsOfAttempt is notificationEvents for the end of an attempt: paid is the SQL expression of
// whether a delivery carried allow_paid_broadcast (usage.PaidBroadcast), edited whether it edited its
// replace_key's message (usage.Edited).
func notificationEventsOfAttempt(changed, paid, edited string) string {
	return changed + `_src AS (
		SELECT tenant_id, 'notification.' || status AS type, tracking_id, NULL::text AS user_id, updated_at AS at,
		       NULL::jsonb AS data
		FROM ` + changed + ` WHERE kind = ` + notification.KindTenantSQL + ` AND ` + notification.TerminalSQL() + `),
	` + emitEvents(changed+"_events", changed+"_src") + `,
	` + countUsage(changed+"_usage", changed+` WHERE kind = `+notification.KindTenantSQL+` AND `+notification.TerminalSQL(),
		"updated_at", usage.EndingDeltas("status", paid, edited))
}

// userEvents records an event of type eventType (a constant of this package) for each row of the CTE
// changed, which returns tenant_id, user_id and at (the time of the change).
func userEvents(changed, eventType string) string { return userEventsWith(changed, eventType, "NULL") }

// userEventsWith is userEvents for events that carry data beyond the user: data is a SQL expression over the
// columns of changed that yields the jsonb object merged into the payload's data ({"user_id", …}).
func userEventsWith(changed, eventType, data string) string {
	return changed + `_src AS (
		SELECT tenant_id, '` + eventType + `'::text AS type, NULL::uuid AS tracking_id, user_id, at, (` + data + `)::jsonb AS data
		FROM ` + changed + `),
	` + emitEvents(changed+"_events", changed+"_src")
}

// CallbackEvent is an event claimed for one attempt at one endpoint.
type CallbackEvent struct {
	ID         int64  // the row: this event at this endpoint
	EventID    string // the webhook-id's event: the same at every endpoint and on every retry
	EndpointID string
	TenantID   string
	URL        string
	Type       string
	TrackingID string // notification.* events
	UserID     string // user.* events
	// Data is the event's data beyond its user (user.opted_out, user.opted_in: {"category", "by"}); nil for
	// the others.
	Data      []byte
	CreatedAt time.Time
	// Attempts counts this attempt; it identifies the claim (the result write is guarded by it).
	Attempts int
	// Payload is the body rendered at the first attempt and kept while the event is retried; nil before.
	Payload []byte
	// Secrets are the endpoint's valid secrets, sealed (signing.Key opens them), the current one first.
	Secrets [][]byte
}

// ClaimCallbackEvents leases up to limit due events for one attempt each: per endpoint, the oldest due
// ones, at most perEndpoint minus the attempts already in flight there (across every sender), so a slow
// endpoint cannot take every slot. Rows and endpoints are locked with SKIP LOCKED for the statement, so
// several senders share the work without taking the same event; two claims racing on one endpoint can
// briefly exceed perEndpoint. A claim counts the attempt and moves next_attempt_at to the end of the
// lease: a sender that dies mid-send leaves the event due again then.
//
// only, when not nil, restricts the claim to those endpoints (the sender's quick claims, between the full
// ones that look at every endpoint).
func (s *Store) ClaimCallbackEvents(ctx context.Context, limit, perEndpoint int, lease time.Duration, only []string) ([]CallbackEvent, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
		WITH due AS (
			SELECT ev.id, ev.next_attempt_at
			FROM callback_endpoints ep
			CROSS JOIN LATERAL (
				SELECT count(*) AS n FROM callback_events b
				WHERE b.endpoint_id = ep.id AND b.leased_until > now()) busy
			CROSS JOIN LATERAL (
				SELECT e.id, e.next_attempt_at FROM callback_events e
				WHERE e.endpoint_id = ep.id AND e.state = `+callbackstate.Pending.SQL()+` AND e.next_attempt_at <= now()
				ORDER BY e.next_attempt_at
				LIMIT greatest($2 - busy.n, 0)
				FOR UPDATE SKIP LOCKED) ev
			WHERE $4::uuid[] IS NULL OR ep.id = ANY ($4::uuid[])
			ORDER BY ev.next_attempt_at
			LIMIT $1
			FOR NO KEY UPDATE OF ep SKIP LOCKED)
		UPDATE callback_events e
		SET attempts = e.attempts + 1, leased_until = now() + make_interval(secs => $3),
		    next_attempt_at = now() + make_interval(secs => $3)
		FROM due, callback_endpoints ep
		WHERE e.id = due.id AND ep.id = e.endpoint_id
		RETURNING e.id, e.event_id::text, e.endpoint_id::text, ep.tenant_id, ep.url, e.type,
		          COALESCE(e.tracking_id::text, ''), COALESCE(e.user_id, ''), e.data, e.created_at, e.attempts, e.payload,
		          (SELECT COALESCE(array_agg(sc.sealed ORDER BY sc.expires_at DESC NULLS FIRST, sc.id DESC), '{}')
		           FROM callback_secrets sc
		           WHERE sc.endpoint_id = e.endpoint_id AND (sc.expires_at IS NULL OR sc.expires_at > now()))`,
		limit, perEndpoint, lease.Seconds(), only)
	if err != nil {
		return nil, translate(err, "claiming callback events")
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CallbackEvent, error) {
		var e CallbackEvent
		err := r.Scan(&e.ID, &e.EventID, &e.EndpointID, &e.TenantID, &e.URL, &e.Type, &e.TrackingID, &e.UserID, &e.Data,
			&e.CreatedAt, &e.Attempts, &e.Payload, &e.Secrets)
		return e, err
	})
	return evs, translate(err, "claiming callback events")
}

// CallbackResult is the result of one attempt.
type CallbackResult struct {
	Delivered bool   // a 2xx answer in time
	Status    int    // the HTTP status, 0 when there was no answer
	Error     string // short; never the whole response body
	// Payload is the body sent, kept while the event is retried so that every retry sends the same bytes.
	Payload []byte
	// RetryIn is the wait before the next attempt, unless the event is older than RetryFor: then it is
	// dropped.
	RetryIn  time.Duration
	RetryFor time.Duration
	// Drop ends the event at once (there is nothing to send: its notification is gone).
	Drop bool
	// Release gives the event back without counting the attempt, due at once: the sender stopped before
	// the request could end.
	Release bool
}

// FinishCallbackEvent writes the result of the attempt ev.Attempts and returns the event's state after
// it (callbackstate.Delivered, Pending: retried later, Dropped), or "" when the claim was taken
// over meanwhile (its lease ran out and another sender claimed the event). A delivery or a failure also
// updates the endpoint: last_success_at (at most once a second, so a busy endpoint's row is not written on
// every event), or last_failure_at and consecutive_failures. The first success after failures makes the
// endpoint's waiting events due at once, so a receiver that comes back gets its backlog without waiting
// for each event's backoff.
func (s *Store) FinishCallbackEvent(ctx context.Context, ev CallbackEvent, r CallbackResult) (callbackstate.State, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var errText *string
	if r.Error != "" {
		errText = &r.Error
	}
	var state callbackstate.State
	var err error
	switch {
	case r.Release:
		err = s.pool.QueryRow(ctx, `
			UPDATE callback_events SET attempts = attempts - 1, leased_until = NULL, next_attempt_at = now()
			WHERE id = $1 AND attempts = $2 AND state = `+callbackstate.Pending.SQL()+` AND leased_until IS NOT NULL RETURNING state`, ev.ID, ev.Attempts).Scan(&state)
	case r.Delivered:
		err = s.pool.QueryRow(ctx, `
			WITH done AS (
				UPDATE callback_events
				SET state = `+callbackstate.Delivered.SQL()+`, leased_until = NULL, finished_at = now(), payload = NULL,
				    last_status = $3, last_error = NULL
				WHERE id = $1 AND attempts = $2 AND state = `+callbackstate.Pending.SQL()+` AND leased_until IS NOT NULL
				RETURNING endpoint_id, state),
			recovered AS (
				UPDATE callback_events e SET next_attempt_at = now()
				FROM done, callback_endpoints ep
				WHERE ep.id = done.endpoint_id AND ep.consecutive_failures > 0
				  AND e.endpoint_id = done.endpoint_id AND e.state = `+callbackstate.Pending.SQL()+` AND e.next_attempt_at > now()
				  AND (e.leased_until IS NULL OR e.leased_until < now())),
			endpoint AS (
				UPDATE callback_endpoints ep SET last_success_at = now(), consecutive_failures = 0
				FROM done
				WHERE ep.id = done.endpoint_id
				  AND (ep.consecutive_failures > 0 OR ep.last_success_at IS NULL OR ep.last_success_at < now() - interval '1 second'))
			SELECT state FROM done`, ev.ID, ev.Attempts, r.Status).Scan(&state)
	default:
		// (A statement may change a row once: the drop condition is spelled out for each column.)
		const dropped = `($7 OR created_at <= now() - make_interval(secs => $6))`
		err = s.pool.QueryRow(ctx, `
			WITH done AS (
				UPDATE callback_events
				SET state = CASE WHEN `+dropped+` THEN `+callbackstate.Dropped.SQL()+` ELSE `+callbackstate.Pending.SQL()+` END,
				    finished_at = CASE WHEN `+dropped+` THEN now() END,
				    payload = CASE WHEN `+dropped+` THEN NULL ELSE $8::bytea END,
				    leased_until = NULL, next_attempt_at = now() + make_interval(secs => $5),
				    last_status = $3, last_error = $4
				WHERE id = $1 AND attempts = $2 AND state = `+callbackstate.Pending.SQL()+` AND leased_until IS NOT NULL
				RETURNING endpoint_id, state),
			endpoint AS (
				UPDATE callback_endpoints ep SET last_failure_at = now(), consecutive_failures = ep.consecutive_failures + 1
				FROM done WHERE ep.id = done.endpoint_id AND NOT $7)
			SELECT state FROM done`,
			ev.ID, ev.Attempts, r.Status, errText, r.RetryIn.Seconds(), r.RetryFor.Seconds(), r.Drop, r.Payload).Scan(&state)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return state, translate(err, fmt.Sprintf("recording callback event %d", ev.ID))
}

// CallbackStats describe the outbox of callbacks, for the sender's gauges.
type CallbackStats struct {
	Pending   int64         // events not yet delivered or dropped (per endpoint; an event in the inbox counts once)
	Due       int64         // of which due now and not in flight: the sender's backlog, the inbox included
	InFlight  int64         // under a live lease
	OldestDue time.Duration // how long the oldest due event has been due (0 when none)
	// Failing maps each tenant with an endpoint whose last attempts failed to the most consecutive failures
	// among its endpoints.
	Failing map[string]int
}

// CallbackStats reads the outbox's depth and the failing endpoints.
func (s *Store) CallbackStats(ctx context.Context) (CallbackStats, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var st CallbackStats
	var oldest float64
	// Events still in the inbox are due: the next sender to come by dispatches and sends them.
	err := s.pool.QueryRow(ctx, `
		WITH inbox AS (SELECT count(*) AS n, min(created_at) AS oldest FROM callback_inbox),
		     outbox AS (
				SELECT count(*) AS pending, count(*) FILTER (WHERE next_attempt_at <= now()) AS due,
				       min(next_attempt_at) FILTER (WHERE next_attempt_at <= now()) AS oldest
				FROM callback_events WHERE state = `+callbackstate.Pending.SQL()+`)
		SELECT outbox.pending + inbox.n, outbox.due + inbox.n,
		       COALESCE(extract(epoch FROM now() - least(outbox.oldest, inbox.oldest)), 0),
		       (SELECT count(*) FROM callback_events WHERE leased_until > now())
		FROM inbox, outbox`).Scan(&st.Pending, &st.Due, &oldest, &st.InFlight)
	if err != nil {
		return st, translate(err, "reading the callback outbox")
	}
	st.OldestDue = time.Duration(oldest * float64(time.Second))
	st.Failing, err = queryMap[string, int](ctx, s.pool, "reading failing callback endpoints", `
		SELECT tenant_id, max(consecutive_failures) FROM callback_endpoints WHERE consecutive_failures > 0 GROUP BY tenant_id`)
	return st, err
}
