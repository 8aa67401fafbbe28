package store

// End users in control (spec v1-extensions §9): opt-outs — a tenant's user who wants none of the tenant's
// notifications (the empty category) or none of one category, said by the user in the chat (/stop) or by the
// tenant through the API — and blocks (links.blocked_at: the user blocked the bot). An opt-out ends the
// waiting notifications it covers (notification.OptOut) after it commits, in chunks (endings.go), the send gate refuses what it
// covers (insertTenantSQL, refusedByOptOutsSQL), and the claim reads both (claimOnce), so that nothing it
// covers reaches the platform once it is made. Who may lift or take over whose opt-out is
// internal/consent's table, rendered here as SQL. The chat's side — /stop, /resume, their keyboards — is in
// stop_prompts.go.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
)

// ErrOptedOutByUser means a tenant tried to lift an opt-out its user made in the chat: only the user lifts
// that, with /resume (409 opted_out_by_user).
var ErrOptedOutByUser = errors.New("opted out by the user")

// optOutCovers is the condition that an opt_outs row o covers a notification of its tenant and user whose
// category is the SQL expression category (NULL: none): an opt-out of the whole tenant, or of that category.
// It probes opt_outs' primary key.
func optOutCovers(category string) string { return `o.category IN ('', ` + category + `)` }

// optOutUpdate is the opt-out's transition for the rows cond selects: those still waiting end blocked, with
// notification.CodeOptedOut. One being delivered was claimed before the opt-out and is its attempt's.
func optOutUpdate(cond string) string {
	return moveTo(notification.OptOut.To()) + `,
		last_error_code = ` + strconv.Itoa(notification.CodeOptedOut) + `, last_error_message = '` + notification.OptedOutMessage + `'
		WHERE ` + cond + ` AND ` + notification.OptOut.SQL()
}

// optOutData is the data of user.opted_out and user.opted_in ({"category": null for the whole tenant,
// "by"}), over the columns category and by of the changed rows.
const optOutData = `jsonb_build_object('category', NULLIF(category, ''), 'by', by)`

// optOutSQL opts user $2 of tenant $1 out of category $3 (empty: the whole tenant), made by $4, in one
// statement: the opt-out is made — or, made by the user, taken over from the tenant; one the user made stays
// the user's —, user.opted_out recorded for it, and, when it was made, the user's endings_due row (the
// notifications it covers end after the commit, in chunks: FinishEndings). It returns whether the user
// exists, whether the opt-out was made (or taken over), whether endings are due, and whether it was refused
// for the cap: a new category opt-out past MaxCategoryOptOuts (the whole tenant's is always made). Its work
// does not grow with the user's notifications nor opt-outs (issue 35).
var optOutSQL = `
	WITH u AS (SELECT tenant_id, user_id FROM users WHERE tenant_id = $1 AND user_id = $2),
	room AS (SELECT $3 = '' OR EXISTS (SELECT 1 FROM opt_outs WHERE tenant_id = $1 AND user_id = $2 AND category = $3)
		OR (SELECT count(*) FROM (SELECT 1 FROM opt_outs WHERE tenant_id = $1 AND user_id = $2 AND category <> ''
			LIMIT ` + strconv.Itoa(MaxCategoryOptOuts) + `) c) < ` + strconv.Itoa(MaxCategoryOptOuts) + ` AS ok),
	made AS (
		INSERT INTO opt_outs AS o (tenant_id, user_id, category, by)
		SELECT tenant_id, user_id, $3, $4 FROM u WHERE (SELECT ok FROM room)
		ON CONFLICT (tenant_id, user_id, category) DO UPDATE SET by = EXCLUDED.by, created_at = now()
			WHERE ` + consent.TakeOverSQL(`EXCLUDED.by`, `o.by`) + `
		RETURNING tenant_id, user_id, category, by, now() AS at),
	` + userEventsWith("made", EventUserOptedOut, optOutData) + `,
	` + auditSQL("audited", audit.UserOptedOut, optOutActor, optOutAuditSrc("made")) + `,
	marked AS (
		INSERT INTO endings_due AS d (tenant_id, user_id) SELECT tenant_id, user_id FROM made
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET since = clock_timestamp()
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM u), (SELECT count(*) FROM made), (SELECT count(*) FROM marked), NOT (SELECT ok FROM room)`

// liftOptOutSQL lifts the opt-out of user $2 of tenant $1 from category $3, for $4, as far as consent.MayLift
// allows. It records user.opted_in (by: who lifted it), and returns whether the user exists,
// who had made the opt-out (empty when there was none) and whether it was lifted.
var liftOptOutSQL = `
	WITH u AS (SELECT 1 FROM users WHERE tenant_id = $1 AND user_id = $2),
	held AS (SELECT by FROM opt_outs WHERE tenant_id = $1 AND user_id = $2 AND category = $3),
	lifted AS (
		DELETE FROM opt_outs WHERE tenant_id = $1 AND user_id = $2 AND category = $3
			AND ` + consent.LiftSQL(`$4`, `by`) + `
		RETURNING tenant_id, user_id, category, $4::text AS by, now() AS at),
	` + userEventsWith("lifted", EventUserOptedIn, optOutData) + `,
	` + auditSQL("audited", audit.UserOptedIn, optOutActor, optOutAuditSrc("lifted")) + `
	SELECT EXISTS (SELECT 1 FROM u), COALESCE((SELECT by FROM held), ''), EXISTS (SELECT 1 FROM lifted)`

// optOutActor is the audit actor of optOutSQL and liftOptOutSQL: the user when the user made the change in
// the chat, else the actor $5 (the tenant's key, through the API).
const optOutActor = `CASE WHEN by = '` + string(consent.ByUser) + `' THEN '` + audit.User + `' ELSE $5 END`

// optOutAuditSrc is the audit source of the opt-outs the CTE changed made or lifted: the user, with the
// category and who made the change, as the callback event's data.
func optOutAuditSrc(changed string) string {
	return `(SELECT tenant_id, user_id AS target, by, ` + optOutData + ` AS details FROM ` + changed + `) ` + changed + `_audit`
}

// exclusiveGatesSQL takes the exclusive locks of a set of users' buckets ($1, ascending), as an erasure takes
// its user's (eraseGateSQL).
var exclusiveGatesSQL = `SELECT count(pg_advisory_xact_lock(` + strconv.Itoa(userGateClass) + `, b)) FROM unnest($1::int[]) AS b`

// gateBuckets are the buckets of the given (tenant, user) pairs, ascending, each once: the order every
// holder of several takes them in, so that two cannot deadlock.
func gateBuckets(tenants, users []string) []int32 {
	buckets := make([]int32, len(tenants))
	for i := range tenants {
		buckets[i] = userGateBucket(tenants[i], users[i])
	}
	slices.Sort(buckets)
	return slices.Compact(buckets)
}

// OptOutResult is what an opt-out did.
type OptOutResult struct {
	// Made: the opt-out is new, or the user took over one the tenant had made (user.opted_out recorded).
	Made bool
	// Ended counts the user's waiting notifications it covered that OptOut ended before returning, now
	// blocked ("opted out").
	Ended int
	// Pending: some covered notifications may still wait; they end after OptOut returns, by a pass of
	// FinishEndings (the delivery workers' sweep finishes it). None of them is sent meanwhile: the claim
	// reads the opt-out.
	Pending bool
}

// OptOutInlineChunks is how many chunks of EndingChunk notifications OptOut ends itself after the
// opt-out commits; what remains is left to the sweep (issue 35: the API's answer must not wait for the
// tenant's whole backlog).
const OptOutInlineChunks = 1

// OptOut opts a tenant's user out of the tenant's notifications (category "") or of one category, made by
// by, and ends the user's notifications still scheduled, queued or retrying that it covers: blocked,
// "opted out" (notification.OptOut), each with its notification.blocked event. A new opt-out records
// user.opted_out; the user making one the tenant made takes it over (it becomes the user's, and the tenant
// cannot lift it any more); the tenant making one the user made changes nothing. ErrNotFound for a user the
// tenant has never seen; ErrTooManyOptOuts for a new category opt-out when the user has MaxCategoryOptOuts
// already.
//
// The opt-out commits first, in a short transaction whose work does not depend on the user's backlog
// (issue 35); the covered notifications end afterwards, OptOutInlineChunks chunks here and the rest by the
// sweep (FinishEndings, DueEndings). The user's gate lock comes first in that transaction, exclusively (as
// for an erasure, lockGateSQL): the sends that already hold it commit before the opt-out, later sends wait
// for the commit, then find the opt-out and are refused. With the claim's check (claimOnce), none of the
// covered notifications reaches the platform after OptOut returns, but one whose attempt was claimed
// before it.
func (s *Store) OptOut(ctx context.Context, tenantID, userID, category string, by consent.By) (OptOutResult, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var res OptOutResult
	var exists, capped bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = OptOutResult{}
		if _, err := tx.Exec(ctx, eraseGateSQL, userGateBucket(tenantID, userID)); err != nil {
			return err
		}
		var made, marked int
		err := tx.QueryRow(ctx, optOutSQL, tenantID, userID, category, string(by), audit.ActorOf(ctx)).Scan(&exists, &made, &marked, &capped)
		res.Made, res.Pending = made == 1, marked == 1
		return err
	})
	if err == nil && !exists {
		err = pgx.ErrNoRows
	}
	if err == nil && capped {
		return res, fmt.Errorf("while opting a user out: %w", ErrTooManyOptOuts)
	}
	if err != nil {
		return res, translate(err, "opting a user out")
	}
	if res.Pending {
		// The opt-out has committed: a chunk that fails here is not the opt-out's failure; the sweep ends
		// what it left.
		ended, done, _ := s.FinishEndings(ctx, UserRef{tenantID, userID}, OptOutInlineChunks)
		res.Ended, res.Pending = ended, !done
	}
	return res, nil
}

// LiftOptOut lifts a tenant's user's opt-out of the tenant (category "") or of one category, for by: the
// user lifts any, the tenant only one it made — ErrOptedOutByUser for the user's own, which stays. It
// reports whether there was one to lift (user.opted_in is recorded then). ErrNotFound for a user the tenant
// has never seen. Notifications ended by the opt-out stay ended; later sends pass the gate again.
func (s *Store) LiftOptOut(ctx context.Context, tenantID, userID, category string, by consent.By) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var exists, lifted bool
	var held string
	err := s.pool.QueryRow(ctx, liftOptOutSQL, tenantID, userID, category, string(by), audit.ActorOf(ctx)).Scan(&exists, &held, &lifted)
	switch {
	case err != nil:
		return false, translate(err, "lifting an opt-out")
	case !exists:
		return false, translate(pgx.ErrNoRows, "lifting an opt-out")
	case !lifted && held != "" && !consent.MayLift(by, consent.By(held)):
		return false, fmt.Errorf("while lifting an opt-out: %w", ErrOptedOutByUser)
	}
	return lifted, nil
}

// SentCategoriesScan bounds the notifications of a user whose categories /stop reads: the latest ones (issue
// 35: a tenant's backlog for one user must not size a /stop).
const SentCategoriesScan = 1000

// sentCategoriesLimit is the query of the categories tenant sent user (SQL expressions) within window (an
// interval's parameter), each once, sorted, the first limit of them only (0: all): among the user's latest
// SentCategoriesScan notifications (a range of notifications_user_list_idx, newest first).
func sentCategoriesLimit(tenant, user, window string, limit int) string {
	most := ""
	if limit > 0 {
		most = ` LIMIT ` + strconv.Itoa(limit)
	}
	return `SELECT COALESCE(array_agg(category ORDER BY category), '{}') FROM (
		SELECT DISTINCT category FROM (
			SELECT n.category FROM notifications n
			WHERE n.tenant_id = ` + tenant + ` AND n.user_id = ` + user + ` AND n.kind = ` + notification.KindTenantSQL + `
			  AND n.created_at > now() - ` + window + `::interval
			ORDER BY n.created_at DESC LIMIT ` + strconv.Itoa(SentCategoriesScan) + `) r
		WHERE category IS NOT NULL ORDER BY category` + most + `) c`
}

// refusedByOptOutsSQL returns, of the notifications ($1 tracking ids, $2 tenants, $3 users, $4 categories)
// just offered to insertTenantSQL in the same transaction, those it refused that an opt-out covers, each with
// the category of one that does (the whole tenant's, empty, first). The opt-outs are probed first (by key;
// most users have none), and only a send that finds one asks whether its row was stored.
var refusedByOptOutsSQL = `
	SELECT r.tracking_id::text, min(o.category)
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS r(tracking_id, tenant_id, user_id, category)
	JOIN opt_outs o ON o.tenant_id = r.tenant_id AND o.user_id = r.user_id AND ` + optOutCovers(`r.category`) + `
	WHERE NOT EXISTS (SELECT 1 FROM notifications n WHERE n.tracking_id = r.tracking_id)
	GROUP BY r.tracking_id`

// optionalText is s as a statement's argument: NULL when empty.
func optionalText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// chatBlockSQL marks every link of bot $1 ($1 NULL: the shared bot) to chat $2 blocked, or clears the mark,
// where that changes it, with a user.blocked or user.unblocked event per link; it returns how many changed.
// It finds the links through links_chat_idx.
func chatBlockSQL(blocked bool) string {
	set, unchanged, event := `now()`, `blocked_at IS NULL`, EventUserBlocked
	if !blocked {
		set, unchanged, event = `NULL`, `blocked_at IS NOT NULL`, EventUserUnblocked
	}
	return `
	WITH marked AS (
		UPDATE links SET blocked_at = ` + set + `
		WHERE chat_id = $2 AND bot_id IS NOT DISTINCT FROM $1::bigint AND ` + unchanged + `
		RETURNING tenant_id, user_id, now() AS at),
	` + userEvents("marked", event) + `
	SELECT count(*) FROM marked`
}

var (
	blockChatSQL   = chatBlockSQL(true)
	unblockChatSQL = chatBlockSQL(false)
)

func chatBlock(blocked bool) string {
	if blocked {
		return blockChatSQL
	}
	return unblockChatSQL
}

// SetChatBlocked marks every link of the bot's chat blocked (the user blocked the bot: a 403 from the
// platform to a send there), or clears the mark (blocked false), and returns how many links changed, each
// with its user.blocked or user.unblocked event. A send for a blocked user is still accepted; its claim
// ends it blocked without a call (notification.Delivery.Blocked). A my_chat_member update does the same
// through ChatBlockedEffect.
func (s *Store) SetChatBlocked(ctx context.Context, bot notification.BotID, chatID int64, blocked bool) (int, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, chatBlock(blocked), botArg(bot), chatID).Scan(&n)
	return n, translate(err, "marking a chat's block")
}

// ChatBlockedEffect is SetChatBlocked as the effect of a my_chat_member update of bot (kicked: blocked;
// member: not), once per update id; *changed counts the links it changed once ApplyUpdates returns.
func ChatBlockedEffect(updateID int64, bot notification.BotID, chatID int64, blocked bool) (*Effect, *int) {
	changed := new(int)
	return &Effect{UpdateID: updateID, Bot: bot, first: func(b *pgx.Batch) {
		b.Queue(chatBlock(blocked), botArg(bot), chatID).QueryRow(func(row pgx.Row) error { return row.Scan(changed) })
	}}, changed
}
