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
	// Cancelled counts the notifications that were scheduled, queued or retrying and that EraseUser ended
	// before returning; Erased those whose body, chat or messenger message id it erased (the cancelled ones
	// included).
	Cancelled int
	Erased    int
	// Pending: some of the user's notifications may still wait or keep a body; they are cancelled and
	// emptied after EraseUser returns, by a pass of FinishEndings (the delivery workers' sweep finishes
	// it). None of them is sent meanwhile: the claim reads the erasure.
	Pending bool
	Events  int // callback events naming the user: undelivered ones deleted, the others anonymised
	OptOuts int // the user's opt-outs, deleted
	ChatErasure
	// ZonesVersion is the tenant's user_zones_version the erasure made when the user had a time zone (its
	// users' zones changed: zones.go); 0 when the user had none.
	ZonesVersion int64
}

// ChatErasure counts what went with the chats an erased user was reached in.
type ChatErasure struct {
	SystemMessages int // the tenant's system messages to the user's chat, deleted
	StopPrompts    int // the /stop and /resume keyboards in the user's chats that name the tenant, deleted
	ChatLanguages  int // the languages the messenger reported for the user's chats (§12), deleted
}

func (c ChatErasure) add(o ChatErasure) ChatErasure {
	return ChatErasure{c.SystemMessages + o.SystemMessages, c.StopPrompts + o.StopPrompts, c.ChatLanguages + o.ChatLanguages}
}

// The statements of an erasure that count what they did; each takes the tenant ($1) and the user ($2), but
// eraseSystemMessagesSQL and eraseStopPromptsSQL, which take the tenant and the user's chats, and
// eraseChatLanguagesSQL, the chats. The notifications' own (cancelled, emptied) are the endings' pass's:
// endingChunkSQL and scrubChunkSQL (endings.go).
var (
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

// eraseChats erases what ties the chats an erased user of the tenant was reached in to the tenant: its
// system messages there, the /stop keyboards naming it, and the chats' messenger languages.
func eraseChats(ctx context.Context, tx pgx.Tx, tenantID string, chats []int64) (ChatErasure, error) {
	var c ChatErasure
	for _, q := range []struct {
		sql  string
		args []any
		into *int
	}{
		{eraseSystemMessagesSQL, []any{tenantID, chats}, &c.SystemMessages},
		{eraseStopPromptsSQL, []any{tenantID, chats}, &c.StopPrompts},
		{eraseChatLanguagesSQL, []any{chats}, &c.ChatLanguages},
	} {
		if err := tx.QueryRow(ctx, q.sql, q.args...).Scan(q.into); err != nil {
			return c, err
		}
	}
	return c, nil
}

// EraseInlineChunks is how many chunks of EndingChunk notifications EraseUser cancels and empties itself
// after the erasure commits; what remains is left to the sweep (issue 35: the API's answer must not wait for
// the tenant's whole backlog).
const EraseInlineChunks = 1

// EraseUser erases what Herald holds about a tenant's user: the phone verification (digest, last four
// digits, session), the link, every link token, the opt-outs, the user record; the body, the chat and the
// messenger message id of the user's notifications; the tenant's system messages and /stop keyboards in the
// user's chats and their messenger languages; and the user's callback events (eraseEventsSQL).
// Notifications still scheduled, queued or retrying are cancelled (the cancel transition, lifecycle.go).
// Delivery metadata stays. ErrNotFound when there was nothing to erase.
//
// The decision commits first, in a short transaction whose work does not depend on the user's backlog
// (issue 35): everything but the notifications, and a row of endings_due whose erased_at says which
// notifications are the erasure's. They are cancelled and emptied afterwards, EraseInlineChunks chunks here
// and the rest by the sweep (FinishEndings, DueEndings); meanwhile the claim ends any of them cancelled
// without a send. An erasure while one is pending is the same again: it commits, and its pass goes on.
//
// The user's gate lock comes first (see lockGateSQL): it waits for the sends that already hold it to
// commit — their notifications then belong to the erasure — and makes every later send wait for the
// decision, then find no verified phone (409 phone_unverified). A notification being delivered right now is
// not stopped (its worker has read the body and the chat already); its body and messenger identifiers are
// erased all the same.
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
		// The chat of the user's link, read before the link goes; those recorded on the user's
		// notifications (a link the platform removed leaves them) are the pass's, as it empties them.
		var chats []int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(array_agg(chat_id), '{}') FROM links WHERE tenant_id = $1 AND user_id = $2`,
			tenantID, userID).Scan(&chats); err != nil {
			return err
		}
		deleted := int64(0)
		for _, q := range []string{
			`DELETE FROM phone_verifications WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM links WHERE tenant_id = $1 AND user_id = $2`,
			`DELETE FROM link_tokens WHERE tenant_id = $1 AND user_id = $2`,
		} {
			tag, err := tx.Exec(ctx, q, tenantID, userID)
			if err != nil {
				return err
			}
			deleted += tag.RowsAffected()
		}
		for _, c := range []struct {
			sql  string
			into *int
		}{
			{eraseEventsSQL, &e.Events},
			{eraseOptOutsSQL, &e.OptOuts},
		} {
			if err := tx.QueryRow(ctx, c.sql, tenantID, userID).Scan(c.into); err != nil {
				return err
			}
		}
		if len(chats) > 0 {
			ce, err := eraseChats(ctx, tx, tenantID, chats)
			if err != nil {
				return err
			}
			e.ChatErasure = ce
		}
		// Last: its cascade would take the opt-outs uncounted. A user with a time zone changes the tenant's
		// zones (zones.go).
		var n int64
		if err := tx.QueryRow(ctx, `
			WITH d AS (DELETE FROM users WHERE tenant_id = $1 AND user_id = $2 RETURNING time_zone),
			     `+bumpZonesSQL("$1", "EXISTS (SELECT 1 FROM d WHERE time_zone IS NOT NULL)")+`
			SELECT (SELECT count(*) FROM d), COALESCE((SELECT v FROM bumped), 0)`, tenantID, userID).Scan(&n, &e.ZonesVersion); err != nil {
			return err
		}
		deleted += n
		var pending bool
		if err := tx.QueryRow(ctx, markErasureSQL, tenantID, userID).Scan(&pending); err != nil {
			return err
		}
		if deleted == 0 && !pending && e == (Erasure{}) {
			return errNothing // rolls back the mark
		}
		// The notifications are ended after the commit (the pass): the event records the decision, and
		// whether any of them were still to end.
		return appendAudit(ctx, tx, tenantID, audit.UserErased, userID, map[string]any{
			"opt_outs": e.OptOuts, "notifications_pending": pending})
	})
	if errors.Is(err, errNothing) {
		return e, translate(pgx.ErrNoRows, "erasing user")
	}
	if err != nil {
		return e, translate(err, "erasing user")
	}
	// The decision has committed: a chunk that fails here is not the erasure's failure; the sweep ends what
	// it left.
	ended, done, _ := s.finishEndings(ctx, UserRef{tenantID, userID}, EraseInlineChunks)
	e.Cancelled, e.Erased, e.Pending = ended.Cancelled, ended.Erased, !done
	e.ChatErasure = e.ChatErasure.add(ended.ChatErasure)
	return e, nil
}

// UserSettings are the fields of PATCH /v1/users/{user_id} (§12): each Set* says the field was given (its
// value nil: cleared).
type UserSettings struct {
	SetLocale, SetTimeZone bool
	Locale, TimeZone       *string
}

// SetUserSettings sets what the tenant gave of its user's locale and time zone, making the user's record
// when the tenant has not asked for a link token yet (a user may be set up before linking), and returns the
// user as GetUser reads it and, when the time zone changed, the tenant's user_zones_version the change made
// (0: the zone is as it was; zones.go).
//
// The row is made first and then locked, so that the zone compared is the one the update replaces: a
// change that bumped no version would leave the ingress's caches stale for good.
func (s *Store) SetUserSettings(ctx context.Context, tenantID, userID string, set UserSettings) (User, int64, error) {
	sctx, cancel := withTimeout(ctx)
	var version int64
	err := pgx.BeginFunc(sctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(sctx, `INSERT INTO users (tenant_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, tenantID, userID); err != nil {
			return err
		}
		// CASE keeps a field not given as it was.
		return tx.QueryRow(sctx, `
			WITH old AS (SELECT time_zone FROM users WHERE tenant_id = $1 AND user_id = $2 FOR UPDATE),
			     u AS (UPDATE users SET
			               locale = CASE WHEN $3 THEN $4 ELSE users.locale END,
			               time_zone = CASE WHEN $5 THEN $6 ELSE users.time_zone END
			           WHERE tenant_id = $1 AND user_id = $2 AND EXISTS (SELECT 1 FROM old)),
			     `+bumpZonesSQL("$1", "$5 AND (SELECT time_zone FROM old) IS DISTINCT FROM $6::text")+`
			SELECT COALESCE((SELECT v FROM bumped), 0)`,
			tenantID, userID, set.SetLocale, set.Locale, set.SetTimeZone, set.TimeZone).Scan(&version)
	})
	cancel()
	if err != nil {
		return User{}, 0, translate(err, "setting a user's locale")
	}
	u, err := s.GetUser(ctx, tenantID, userID)
	return u, version, err
}

// UserLocale is what the locale chain (§12) reads of a user: the tenant's setting, then the messenger's
// report for the chat of the user's link. "": none.
type UserLocale struct {
	Locale, MessengerLanguage string
	TimeZone                  string // the tenant's setting (PATCH /v1/users), an IANA name; "" unset
}

// TenantUser names one tenant's user.
type TenantUser struct{ TenantID, UserID string }

// UserLocales reads the locales of users, of one tenant or several: the templated sends of many concurrent
// requests read theirs in one statement (internal/ingress gathers them), so a template that formats dates,
// which needs every send's user's time zone, costs a share of a round trip instead of one. A user without
// a record is absent from the map.
func (s *Store) UserLocales(ctx context.Context, users []TenantUser) (map[TenantUser]UserLocale, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tenants, ids := make([]string, len(users)), make([]string, len(users))
	for i, u := range users {
		tenants[i], ids[i] = u.TenantID, u.UserID
	}
	rows, _ := s.pool.Query(ctx, `
		SELECT u.tenant_id, u.user_id, COALESCE(u.locale, ''), COALESCE(cl.language_code, ''), COALESCE(u.time_zone, '')
		FROM unnest($1::text[], $2::text[]) AS k (tenant_id, user_id)
		JOIN users u USING (tenant_id, user_id)
		LEFT JOIN links l USING (tenant_id, user_id)
		LEFT JOIN chat_languages cl ON cl.bot_id = COALESCE(l.bot_id, 0) AND cl.chat_id = l.chat_id`, tenants, ids)
	out := make(map[TenantUser]UserLocale, len(users))
	var k TenantUser
	var l UserLocale
	_, err := pgx.ForEachRow(rows, []any{&k.TenantID, &k.UserID, &l.Locale, &l.MessengerLanguage, &l.TimeZone}, func() error {
		out[k] = l
		return nil
	})
	return out, translate(err, "reading users' locales")
}
