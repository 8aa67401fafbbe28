package store

// A tenant's users as Herald knows them (GET /v1/users/{user_id}), and their erasure (DELETE): the user
// record and everything hanging off it — users, links, link_tokens, phone_verifications, opt_outs —, the
// /stop keyboards in the user's chat that name the tenant, the bodies and
// messenger identifiers of the user's notifications, the tenant's system messages to the user's chat, and
// the user's callback events.

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/callbackstate"
	"github.com/heraldhq/herald/internal/notification"
)

// User is what a tenant may read about one of its users: never the chat id or the phone number.
type User struct {
	UserID            string
	LinkedAt          *time.Time // nil: not linked
	PhoneVerification string     // unverified, pending or verified
	VerifiedAt        *time.Time
	PhoneLast4        *string
	// OptedOut: an opt-out of the whole tenant; OptedOutCategories: of these categories (sorted, never nil).
	OptedOut           bool
	OptedOutCategories []string
	// Blocked: the user's link is marked blocked (the user blocked the bot).
	Blocked bool
	// Locale and TimeZone: what the tenant set (§12); MessengerLanguage: the language_code the messenger
	// reported for the chat of the user's link, from the latest update through its bot. nil: none.
	Locale, TimeZone, MessengerLanguage *string
}

// GetUser reads a user of the tenant; ErrNotFound when the tenant has never asked for a link token for
// them (or erased them since).
func (s *Store) GetUser(ctx context.Context, tenantID, userID string) (User, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	u := User{UserID: userID}
	err := s.pool.QueryRow(ctx, `
		SELECT l.linked_at, `+verificationStatusSQL+`, v.verified_at, v.phone_last4,
		       EXISTS (SELECT 1 FROM opt_outs o WHERE o.tenant_id = u.tenant_id AND o.user_id = u.user_id AND o.category = ''),
		       (SELECT COALESCE(array_agg(o.category ORDER BY o.category), '{}') FROM opt_outs o
		        WHERE o.tenant_id = u.tenant_id AND o.user_id = u.user_id AND o.category <> ''),
		       COALESCE(l.blocked_at IS NOT NULL, false), u.locale, u.time_zone, cl.language_code
		FROM users u
		LEFT JOIN links l USING (tenant_id, user_id)
		LEFT JOIN phone_verifications v USING (tenant_id, user_id)
		LEFT JOIN chat_languages cl ON cl.bot_id = COALESCE(l.bot_id, 0) AND cl.chat_id = l.chat_id
		WHERE u.tenant_id = $1 AND u.user_id = $2`, tenantID, userID).
		Scan(&u.LinkedAt, &u.PhoneVerification, &u.VerifiedAt, &u.PhoneLast4, &u.OptedOut, &u.OptedOutCategories, &u.Blocked,
			&u.Locale, &u.TimeZone, &u.MessengerLanguage)
	return u, translate(err, "reading user")
}

// Erasure counts what EraseUser did.
type Erasure struct {
	Cancelled int // notifications that were scheduled, queued or retrying
	// Erased counts the user's notifications whose body, chat or messenger message id were erased (the
	// cancelled ones included).
	Erased         int
	SystemMessages int // the tenant's system messages to the user's chat, deleted
	Events         int // callback events naming the user: undelivered ones deleted, the others anonymised
	OptOuts        int // the user's opt-outs, deleted
	StopPrompts    int // the /stop and /resume keyboards in the user's chats that name the tenant, deleted
	ChatLanguages  int // the languages the messenger reported for the user's chats (§12), deleted
}

// erasedNotifications selects the user's notifications ($1 the tenant, $2 the user) in the statements of
// an erasure.
const erasedNotifications = `tenant_id = $1 AND user_id = $2 AND kind = ` + notification.KindTenantSQL

// The statements of an erasure that count what they did; each takes the tenant ($1) and the user ($2), but
// eraseSystemMessagesSQL and eraseStopPromptsSQL, which take the tenant and the user's chats.
var (
	// eraseCancelSQL cancels the waiting notifications; each reports notification.cancelled.
	eraseCancelSQL = `WITH changed AS (` + cancelUpdate(erasedNotifications) + ` RETURNING ` + notificationEventColumns + `),
		` + notificationEvents("changed") + `
		SELECT count(*) FROM changed`
	// eraseNotificationsSQL keeps the delivery metadata (v1 extensions §6) and erases the body (with its
	// entities and link buttons, §10) and the messenger identity. A notification being delivered right now loses them too: its attempt records no
	// messenger message id afterwards (finishUpdateSQL).
	eraseNotificationsSQL = `WITH erased AS (
		UPDATE notifications SET body = '', entities = NULL, reply_markup = NULL, chat_id = NULL, messenger_message_id = NULL
		WHERE ` + erasedNotifications + ` AND (body <> '' OR chat_id IS NOT NULL OR messenger_message_id IS NOT NULL)
		RETURNING 1)
		SELECT count(*) FROM erased`
	// eraseSystemMessagesSQL deletes the link confirmations, verification prompts and replies the tenant's
	// bot sent to the user's chats ($2): they tie the chat to the tenant. Not when another user of the
	// tenant is linked to that chat (they are about that user too), nor one being sent right now (its
	// worker finishes it, and retention purges it). A waiting one becomes an orphan, which a worker drops.
	eraseSystemMessagesSQL = `WITH gone AS (
		DELETE FROM notifications n
		WHERE n.kind = ` + notification.KindSystemSQL + ` AND n.tenant_id = $1 AND n.chat_id = ANY ($2::bigint[]) AND n.status <> ` + notification.Delivering.SQL() + `
		  AND NOT EXISTS (SELECT 1 FROM links l WHERE l.tenant_id = n.tenant_id AND l.chat_id = n.chat_id)
		RETURNING 1)
		SELECT count(*) FROM gone`
	// eraseEventsSQL: user.* events name the user. One not yet sent would tell the tenant about a user it
	// has erased: it goes, from the inbox or the outbox. A delivered or dropped one stays, without the user
	// id, as the record of the endpoint's traffic, until the callback retention purges it. The
	// notification.* events name no user (their payload is the notification, read when sent).
	eraseEventsSQL = `WITH inbox AS (DELETE FROM callback_inbox WHERE tenant_id = $1 AND user_id = $2 RETURNING 1),
		pending AS (
			DELETE FROM callback_events e USING callback_endpoints ep
			WHERE e.user_id = $2 AND e.state = ` + callbackstate.Pending.SQL() + ` AND ep.id = e.endpoint_id AND ep.tenant_id = $1
			RETURNING 1),
		finished AS (
			UPDATE callback_events e SET user_id = NULL, payload = NULL, data = NULL
			FROM callback_endpoints ep
			WHERE e.user_id = $2 AND e.state <> ` + callbackstate.Pending.SQL() + ` AND ep.id = e.endpoint_id AND ep.tenant_id = $1
			RETURNING 1)
		SELECT (SELECT count(*) FROM inbox) + (SELECT count(*) FROM pending) + (SELECT count(*) FROM finished)`
	// eraseOptOutsSQL deletes the user's opt-outs (the users row's cascade would too: this counts them).
	eraseOptOutsSQL = `WITH gone AS (DELETE FROM opt_outs WHERE tenant_id = $1 AND user_id = $2 RETURNING 1) SELECT count(*) FROM gone`
	// eraseStopPromptsSQL deletes the /stop and /resume keyboards shown in the user's chats ($2) that name
	// the tenant: like the system messages, they tie the chat to the tenant. (A keyboard that also names
	// other tenants goes too: a tap on it then changes nothing.)
	eraseStopPromptsSQL = `WITH gone AS (
		DELETE FROM stop_prompts
		WHERE chat_id = ANY ($2::bigint[]) AND choices @> jsonb_build_array(jsonb_build_array(jsonb_build_object('tenant_id', $1::text)))
		RETURNING 1)
		SELECT count(*) FROM gone`
	// eraseChatLanguagesSQL deletes the language the messenger reported for the user's chats ($1), through
	// any bot (§12: erasing a user erases its messenger_language). The next update from the chat records it
	// again.
	eraseChatLanguagesSQL = `WITH gone AS (DELETE FROM chat_languages WHERE chat_id = ANY ($1::bigint[]) RETURNING 1) SELECT count(*) FROM gone`
)

// EraseUser erases what Herald holds about a tenant's user, in one transaction: the phone verification
// (digest, last four digits, session), the link, every link token, the opt-outs, the user record; the body,
// the chat and the messenger message id of the user's notifications; the tenant's system messages and
// /stop keyboards in the user's chat; and the user's callback events (eraseSQL). Notifications still scheduled, queued or retrying are
// cancelled (the cancel transition, lifecycle.go). Delivery metadata stays. ErrNotFound when there was
// nothing to erase.
//
// The user's gate lock comes first (see lockGateSQL): it waits for the sends that already hold it to
// commit — their notifications are then visible to the cancel below — and makes every later send wait for
// this transaction, then find no verified phone (409 phone_unverified). A notification being delivered
// right now is not stopped (its worker has read the body and the chat already); its body and messenger
// identifiers are erased all the same.
func (s *Store) EraseUser(ctx context.Context, tenantID, userID string) (Erasure, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var e Erasure
	errNothing := errors.New("nothing to erase")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		e = Erasure{}
		if _, err := tx.Exec(ctx, eraseGateSQL, userGateBucket(tenantID, userID)); err != nil {
			return err
		}
		// The chats the user was reached in, read before the link goes: the link's, and those recorded on
		// the user's notifications (a link the platform removed leaves them).
		var chats []int64
		if err := tx.QueryRow(ctx, `
			SELECT COALESCE(array_agg(DISTINCT chat_id), '{}') FROM (
				SELECT chat_id FROM links WHERE tenant_id = $1 AND user_id = $2
				UNION ALL
				SELECT chat_id FROM notifications WHERE `+erasedNotifications+` AND chat_id IS NOT NULL) c`,
			tenantID, userID).Scan(&chats); err != nil {
			return err
		}
		for _, q := range []string{
			`DELETE FROM phone_verifications WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM links WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM link_tokens WHERE tenant_id = $1 AND user_id = $2`,
		} {
			if _, err := tx.Exec(ctx, q, tenantID, userID); err != nil {
				return err
			}
		}
		for _, c := range []struct {
			sql  string
			args []any
			into *int
		}{
			{eraseCancelSQL, []any{tenantID, userID}, &e.Cancelled},
			{eraseNotificationsSQL, []any{tenantID, userID}, &e.Erased},
			{eraseSystemMessagesSQL, []any{tenantID, chats}, &e.SystemMessages},
			{eraseEventsSQL, []any{tenantID, userID}, &e.Events},
			{eraseOptOutsSQL, []any{tenantID, userID}, &e.OptOuts},
			{eraseStopPromptsSQL, []any{tenantID, chats}, &e.StopPrompts},
			{eraseChatLanguagesSQL, []any{chats}, &e.ChatLanguages},
		} {
			if err := tx.QueryRow(ctx, c.sql, c.args...).Scan(c.into); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM users WHERE tenant_id = $1 AND user_id = $2`, tenantID, userID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 && e == (Erasure{}) {
			return errNothing
		}
		return appendAudit(ctx, tx, tenantID, audit.UserErased, userID, map[string]any{
			"cancelled": e.Cancelled, "erased": e.Erased, "opt_outs": e.OptOuts})
	})
	if errors.Is(err, errNothing) {
		return e, translate(pgx.ErrNoRows, "erasing user")
	}
	return e, translate(err, "erasing user")
}

// UserSettings are the fields of PATCH /v1/users/{user_id} (§12): each Set* says the field was given (its
// value nil: cleared).
type UserSettings struct {
	SetLocale, SetTimeZone bool
	Locale, TimeZone       *string
}

// SetUserSettings sets what the tenant gave of its user's locale and time zone, making the user's record
// when the tenant has not asked for a link token yet (a user may be set up before linking), and returns the
// user as GetUser reads it.
func (s *Store) SetUserSettings(ctx context.Context, tenantID, userID string, set UserSettings) (User, error) {
	sctx, cancel := withTimeout(ctx)
	// The user's row and the settings in one statement: CASE keeps a field not given as it was.
	_, err := s.pool.Exec(sctx, `
		INSERT INTO users (tenant_id, user_id, locale, time_zone) VALUES ($1, $2, $4, $6)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET
			locale = CASE WHEN $3 THEN $4 ELSE users.locale END,
			time_zone = CASE WHEN $5 THEN $6 ELSE users.time_zone END`,
		tenantID, userID, set.SetLocale, set.Locale, set.SetTimeZone, set.TimeZone)
	cancel()
	if err != nil {
		return User{}, translate(err, "setting a user's locale")
	}
	return s.GetUser(ctx, tenantID, userID)
}

// UserLocale is what the locale chain (§12) reads of a user: the tenant's setting, then the messenger's
// report for the chat of the user's link. "": none.
type UserLocale struct {
	Locale, MessengerLanguage string
	TimeZone                  string // the tenant's setting (PATCH /v1/users), an IANA name; "" unset
}

// UserLocales reads the locales of the tenant's users, for the sends of one request (one statement for a
// whole batch). A user without a record is absent from the map.
func (s *Store) UserLocales(ctx context.Context, tenantID string, userIDs []string) (map[string]UserLocale, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, _ := s.pool.Query(ctx, `
		SELECT u.user_id, COALESCE(u.locale, ''), COALESCE(cl.language_code, ''), COALESCE(u.time_zone, '')
		FROM users u
		LEFT JOIN links l USING (tenant_id, user_id)
		LEFT JOIN chat_languages cl ON cl.bot_id = COALESCE(l.bot_id, 0) AND cl.chat_id = l.chat_id
		WHERE u.tenant_id = $1 AND u.user_id = ANY ($2::text[])`, tenantID, userIDs)
	out := make(map[string]UserLocale, len(userIDs))
	var id string
	var l UserLocale
	_, err := pgx.ForEachRow(rows, []any{&id, &l.Locale, &l.MessengerLanguage, &l.TimeZone}, func() error { out[id] = l; return nil })
	return out, translate(err, "reading users' locales")
}
