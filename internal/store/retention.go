package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/phone"
)

// Retention: how long Herald keeps what it stores, for every table in one place (the purge job that runs
// these statements is internal/retention). Nothing is kept forever:
//
//	notification bodies      erased (body '', reply_markup and entities NULL) RetentionPolicy.Bodies after the final state
//	notification rows        deleted RetentionPolicy.Notifications after the final state, once their body is erased
//	link tokens              deleted RetentionPolicy.Expired after they expire (used or not)
//	verification sessions    a pending session RetentionPolicy.Expired past its expiry becomes unverified, its label dropped
//	idempotency keys         deleted IdempotencyWindow after they were claimed
//	processed update ids     deleted ProcessedUpdateRetention after they were handled
//	callback events          deleted RetentionPolicy.CallbackEvents after they were delivered or dropped
//	                         (pending ones end within their 24-hour retry window, and are never purged)
//	stop prompts             deleted consent.PromptTTL after they were made (a tap changes nothing after it)
//	digests                  deleted, with their items' places, RetentionPolicy.Notifications after they closed
//	                         (their items, terminal long before, are purged with the notifications)
//	usage counts             deleted usage.Retention (400 days) after their hour (usage.go)
//	audit events             deleted audit.Retention (400 days) after they were made (audit.go)
//
// "Final" is notification.Status.Terminal (notification.TerminalSQL), so a terminal state added later is
// purged without a change here. A notification's updated_at is the time it reached its final state: a terminal row never changes
// again. Each statement handles at most a batch of rows, oldest first, skipping rows another transaction
// holds, so it never waits on the hot path nor holds locks for long.

// PurgeKind is what one purge statement removes; its value labels the retention metrics.
type PurgeKind string

// Purge kinds, in the order a purge runs them: bodies before the rows that need them erased.
const (
	PurgeBodies               PurgeKind = "bodies"
	PurgeNotifications        PurgeKind = "notifications"
	PurgeLinkTokens           PurgeKind = "link_tokens"
	PurgeVerificationSessions PurgeKind = "verification_sessions"
	PurgeIdempotencyKeys      PurgeKind = "idempotency_keys"
	PurgeProcessedUpdates     PurgeKind = "processed_updates"
	PurgeCallbackEvents       PurgeKind = "callback_events"
	PurgeStopPrompts          PurgeKind = "stop_prompts"
	PurgeDigests              PurgeKind = "digests"
	// PurgeUsageShards removes no count: it moves the shards of each settled hour into the hour's one row
	// of usage_hours, before PurgeUsage purges the hours older than 400 days there.
	PurgeUsageShards PurgeKind = "usage_shards"
	PurgeUsage       PurgeKind = "usage"
	PurgeAuditEvents PurgeKind = "audit_events"
)

// PurgeKinds lists every kind in purge order.
var PurgeKinds = []PurgeKind{PurgeBodies, PurgeNotifications, PurgeLinkTokens, PurgeVerificationSessions,
	PurgeIdempotencyKeys, PurgeProcessedUpdates, PurgeCallbackEvents, PurgeStopPrompts, PurgeDigests, PurgeUsageShards,
	PurgeUsage, PurgeAuditEvents}

// ProcessedUpdateRetention is how long processed update ids are kept. The platform keeps an update it
// could not deliver for at most 24 hours; twice that covers any redelivery with a margin.
const ProcessedUpdateRetention = 48 * time.Hour

// RetentionPolicy is the configurable part of retention (HERALD_RETENTION_*).
type RetentionPolicy struct {
	Bodies        time.Duration // a body, after its notification's final state
	Notifications time.Duration // a notification row, after its final state; at least Bodies
	Expired       time.Duration // link tokens and verification sessions, after they expire
	// CallbackEvents: a callback event (one endpoint's copy), after it was delivered or dropped.
	CallbackEvents time.Duration
}

// DefaultRetention is the policy of the HERALD_RETENTION_* defaults.
var DefaultRetention = RetentionPolicy{Bodies: 7 * 24 * time.Hour, Notifications: 90 * 24 * time.Hour, Expired: 24 * time.Hour,
	CallbackEvents: 7 * 24 * time.Hour}

// inFlightSQL names the states that are not terminal, as the predicate of notifications_body_kept_idx
// (migrations 00006 and 00008) does; a query must repeat it for PostgreSQL to use that index.
// terminalSQL is the same condition, as IN.
var (
	inFlightSQL = notification.InFlightSQL()
	terminalSQL = notification.TerminalSQL()
)

// purgeRule is one kind's statements: purge removes up to $2 rows due under the age $1; oldest reads the
// time the oldest row still due became due (NULL when none is).
type purgeRule struct {
	purge, oldest string
	age           func(p RetentionPolicy) time.Duration
}

var purgeRules = map[PurgeKind]purgeRule{
	PurgeBodies: {
		purge: `UPDATE notifications SET body = '', reply_markup = NULL, entities = NULL WHERE tracking_id IN (
			SELECT tracking_id FROM notifications
			WHERE body <> '' AND ` + inFlightSQL + ` AND ` + terminalSQL + ` AND updated_at < now() - $1::interval
			ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT updated_at + $1::interval FROM notifications
			WHERE body <> '' AND ` + inFlightSQL + ` AND ` + terminalSQL + ` AND updated_at < now() - $1::interval
			ORDER BY updated_at LIMIT 1`,
		age: func(p RetentionPolicy) time.Duration { return p.Bodies },
	},
	PurgeNotifications: {
		purge: `DELETE FROM notifications WHERE tracking_id IN (
			SELECT tracking_id FROM notifications
			WHERE body = '' AND ` + terminalSQL + ` AND updated_at < now() - $1::interval
			ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT updated_at + $1::interval FROM notifications
			WHERE body = '' AND ` + terminalSQL + ` AND updated_at < now() - $1::interval
			ORDER BY updated_at LIMIT 1`,
		age: func(p RetentionPolicy) time.Duration { return p.Notifications },
	},
	PurgeLinkTokens: {
		purge: `DELETE FROM link_tokens WHERE digest IN (
			SELECT digest FROM link_tokens WHERE expires_at < now() - $1::interval
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT min(expires_at) + $1::interval FROM link_tokens WHERE expires_at < now() - $1::interval`,
		age:    func(p RetentionPolicy) time.Duration { return p.Expired },
	},
	PurgeVerificationSessions: {
		// The row stays: it is the user's verification state, which reads "unverified" past the session's
		// expiry anyway; only the session (its expiry and its branding snapshot) goes.
		purge: `UPDATE phone_verifications v SET status = ` + phone.Unverified.SQL() + `, session_expires_at = NULL, label = NULL
			FROM (SELECT tenant_id, user_id FROM phone_verifications
			      WHERE status = ` + phone.Pending.SQL() + ` AND session_expires_at < now() - $1::interval
			      ORDER BY session_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
			WHERE v.tenant_id = d.tenant_id AND v.user_id = d.user_id`,
		oldest: `SELECT min(session_expires_at) + $1::interval FROM phone_verifications
			WHERE status = ` + phone.Pending.SQL() + ` AND session_expires_at < now() - $1::interval`,
		age: func(p RetentionPolicy) time.Duration { return p.Expired },
	},
	PurgeIdempotencyKeys: {
		purge: `DELETE FROM idempotency_keys k USING (
			SELECT tenant_id, key FROM idempotency_keys WHERE created_at < now() - $1::interval
			ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED) d
			WHERE k.tenant_id = d.tenant_id AND k.key = d.key`,
		oldest: `SELECT min(created_at) + $1::interval FROM idempotency_keys WHERE created_at < now() - $1::interval`,
		age:    func(RetentionPolicy) time.Duration { return IdempotencyWindow },
	},
	PurgeProcessedUpdates: {
		// By the whole key: two bots' updates may share an update id.
		purge: `DELETE FROM processed_updates WHERE (bot_id, update_id) IN (
			SELECT bot_id, update_id FROM processed_updates WHERE processed_at < now() - $1::interval
			ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT min(processed_at) + $1::interval FROM processed_updates WHERE processed_at < now() - $1::interval`,
		age:    func(RetentionPolicy) time.Duration { return ProcessedUpdateRetention },
	},
	PurgeCallbackEvents: {
		// Through callback_events_finished_idx (migration 00009), whose predicate this repeats.
		purge: `DELETE FROM callback_events WHERE id IN (
			SELECT id FROM callback_events WHERE state <> ` + callbackstate.Pending.SQL() + ` AND finished_at < now() - $1::interval
			ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT min(finished_at) + $1::interval FROM callback_events
			WHERE state <> ` + callbackstate.Pending.SQL() + ` AND finished_at < now() - $1::interval`,
		age: func(p RetentionPolicy) time.Duration { return p.CallbackEvents },
	},
	PurgeStopPrompts: {
		// Used or not: a day after it was made a tap on it changes nothing (StopChoiceEffect).
		purge: `DELETE FROM stop_prompts WHERE id IN (
			SELECT id FROM stop_prompts WHERE created_at < now() - $1::interval
			ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT min(created_at) + $1::interval FROM stop_prompts WHERE created_at < now() - $1::interval`,
		age:    func(RetentionPolicy) time.Duration { return consent.PromptTTL },
	},
	PurgeDigests: {
		// Through digests_closed_idx (migration 00023); digest_items go with them (ON DELETE CASCADE).
		purge: `DELETE FROM digests WHERE id IN (
			SELECT id FROM digests WHERE NOT open AND closes_at < now() - $1::interval
			ORDER BY closes_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		oldest: `SELECT min(closes_at) + $1::interval FROM digests WHERE NOT open AND closes_at < now() - $1::interval`,
		age:    func(p RetentionPolicy) time.Duration { return p.Notifications },
	},
	PurgeUsage:       usagePurgeRule,
	PurgeAuditEvents: auditPurgeRule,
	PurgeUsageShards: usageFoldRule,
}

// Purge removes at most limit rows of a kind that are due under p, in one short statement of its own,
// and returns how many it removed.
func (s *Store) Purge(ctx context.Context, kind PurgeKind, p RetentionPolicy, limit int) (int64, error) {
	r, ok := purgeRules[kind]
	if !ok {
		return 0, fmt.Errorf("no purge rule for %q", kind)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, r.purge, r.age(p).String(), limit)
	if err != nil {
		return 0, translate(err, "purging "+string(kind))
	}
	return tag.RowsAffected(), nil
}

// Overdue is how long ago the oldest row of a kind still due under p became due (0 when none is): what a
// purge that keeps up holds near zero.
func (s *Store) Overdue(ctx context.Context, kind PurgeKind, p RetentionPolicy) (time.Duration, error) {
	r, ok := purgeRules[kind]
	if !ok {
		return 0, fmt.Errorf("no purge rule for %q", kind)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var overdue *float64
	err := s.pool.QueryRow(ctx, `SELECT extract(epoch FROM now() - due) FROM (`+r.oldest+`) AS o(due)`, r.age(p).String()).Scan(&overdue)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, translate(err, "measuring overdue "+string(kind))
	}
	if overdue == nil || *overdue < 0 {
		return 0, nil
	}
	return time.Duration(*overdue * float64(time.Second)), nil
}

// retentionLockKey is the advisory lock that lets one purge run at a time across all workers.
const retentionLockKey int64 = 0x6865_7261_6c64_7201 // "herald" + retention

// TryRetentionLock takes the purge's advisory lock for a session of its own; ok is false when another
// process holds it. unlock releases it (closing the session, if it cannot, which releases it too). A
// process that dies releases it with its connection.
func (s *Store) TryRetentionLock(ctx context.Context) (unlock func(), ok bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, translate(err, "acquiring a connection for the retention lock")
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, retentionLockKey).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, translate(err, "taking the retention lock")
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), DefaultQueryTimeout)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, retentionLockKey); err != nil {
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, true, nil
}
