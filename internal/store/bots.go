package store

// Tenants' own bots (spec v1-extensions §11): the bots table, a tenant's choice of bot, and what a change
// of bot does to the links made through the old one. The shared bot (HERALD_MESSENGER_BOT_TOKEN) has no
// row: in PostgreSQL it is a NULL bot_id (0 in processed_updates, whose key cannot be NULL), in Go
// notification.SharedBot. Tokens are stored sealed; internal/bot seals and opens them.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/phone"
)

// Bot is a row of bots.
type Bot struct {
	ID       notification.BotID
	Username string
	// TokenSealed is the token sealed under HERALD_BOT_TOKEN_KEY with the bot's id as additional data
	// (internal/bot); TokenDigest its SHA-256.
	TokenSealed []byte
	TokenDigest [32]byte
	// WebhookURL is where setWebhook pointed the bot, and WebhookSecretDigest the SHA-256 of the
	// secret_token it was given; "" and nil before a webhook was set.
	WebhookURL          string
	WebhookSecretDigest []byte
	// RateLimit is the bot's messages per second; 0: the workers' HERALD_MESSENGER_RATE_LIMIT.
	RateLimit     int
	PaidBroadcast bool
	State         botstate.State
	StateMessage  string // why the bot is not ready, for people; "" when it is
	UpdatedAt     time.Time
}

// botArg is a bot as a statement's argument: NULL for the shared bot.
func botArg(b notification.BotID) *int64 {
	if b == notification.SharedBot {
		return nil
	}
	id := int64(b)
	return &id
}

const botColumns = `id, username, token_sealed, token_digest, COALESCE(webhook_url, ''), webhook_secret_digest, COALESCE(rate_limit, 0),
	paid_broadcast, state, COALESCE(state_message, ''), updated_at`

func scanBot(r pgx.Row) (Bot, error) {
	var b Bot
	var digest []byte
	err := r.Scan(&b.ID, &b.Username, &b.TokenSealed, &digest, &b.WebhookURL, &b.WebhookSecretDigest, &b.RateLimit, &b.PaidBroadcast,
		&b.State, &b.StateMessage, &b.UpdatedAt)
	if err == nil {
		b.TokenDigest = [32]byte(digest) // the column's CHECK: 32 bytes
	}
	return b, err
}

// MaxBotRateLimit is the highest rate a bot may be given (spec §11: 1..1000 messages per second).
const MaxBotRateLimit = 1000

// UpsertBot records a registration (internal/bot.Register): the bot's row is created, or brought to b —
// username, token, webhook (a nil WebhookSecretDigest keeps the recorded URL and secret), rate, paid
// broadcast, state and its message. Tenants that name the same token share the row, and the last registration stands.
func (s *Store) UpsertBot(ctx context.Context, b Bot) error {
	if b.ID <= 0 {
		return fmt.Errorf("while recording bot %d: a bot's id is positive", b.ID)
	}
	if b.RateLimit < 0 || b.RateLimit > MaxBotRateLimit {
		return fmt.Errorf("while recording bot %d: the rate limit must be 1..%d, or 0 for the default", b.ID, MaxBotRateLimit)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `
		INSERT INTO bots (id, username, token_sealed, token_digest, webhook_url, webhook_secret_digest, rate_limit, paid_broadcast,
		                  state, state_message)
		VALUES ($1, $2, $3, $4, NULLIF($10, ''), $5, NULLIF($6, 0), $7, $8, NULLIF($9, ''))
		ON CONFLICT (id) DO UPDATE SET
			username = EXCLUDED.username, token_sealed = EXCLUDED.token_sealed, token_digest = EXCLUDED.token_digest,
			webhook_url = CASE WHEN EXCLUDED.webhook_secret_digest IS NULL THEN bots.webhook_url ELSE EXCLUDED.webhook_url END,
			webhook_secret_digest = COALESCE(EXCLUDED.webhook_secret_digest, bots.webhook_secret_digest),
			rate_limit = EXCLUDED.rate_limit, paid_broadcast = EXCLUDED.paid_broadcast,
			state = EXCLUDED.state, state_message = EXCLUDED.state_message, updated_at = now()`,
		int64(b.ID), b.Username, b.TokenSealed, b.TokenDigest[:], b.WebhookSecretDigest, b.RateLimit, b.PaidBroadcast,
		string(b.State), b.StateMessage, b.WebhookURL)
	return translate(err, "recording bot "+strconv.FormatInt(int64(b.ID), 10))
}

// GetBot reads one bot; ErrNotFound when there is no such row.
func (s *Store) GetBot(ctx context.Context, id notification.BotID) (Bot, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	b, err := scanBot(s.pool.QueryRow(ctx, `SELECT `+botColumns+` FROM bots WHERE id = $1`, int64(id)))
	return b, translate(err, "reading bot "+strconv.FormatInt(int64(id), 10))
}

// BotsChangedSince returns the bots whose row changed at or after since (the zero time: every bot), ordered
// by updated_at: what a cache (internal/bot.Registry) reads to stay current. A row's updated_at is the
// time its statement started, and that statement commits a moment later: a caller that asks again should
// ask from a little before the newest updated_at it has seen, not from it, or it may miss a row that
// committed late.
func (s *Store) BotsChangedSince(ctx context.Context, since time.Time) ([]Bot, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+botColumns+` FROM bots WHERE updated_at >= $1 ORDER BY updated_at, id`, since)
	if err != nil {
		return nil, translate(err, "listing bots")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Bot, error) { return scanBot(r) })
	return out, translate(err, "listing bots")
}

// SetBotState records a bot's state and why, and reports whether that changed anything: a worker whose send
// met the platform's 401 marks the bot BotTokenInvalid once, however many of its sends meet it; the
// operator reads the state back. ErrNotFound when there is no such bot.
func (s *Store) SetBotState(ctx context.Context, id notification.BotID, state botstate.State, message string) (bool, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var changed bool
	err := s.pool.QueryRow(ctx, `
		WITH b AS (SELECT id FROM bots WHERE id = $1),
		u AS (
			UPDATE bots SET state = $2, state_message = NULLIF($3, ''), updated_at = now()
			WHERE id = $1 AND (state <> $2 OR state_message IS DISTINCT FROM NULLIF($3, ''))
			RETURNING id)
		SELECT EXISTS (SELECT 1 FROM u) FROM b`, int64(id), string(state), message).Scan(&changed)
	return changed, translate(err, "setting the state of bot "+strconv.FormatInt(int64(id), 10))
}

// SetBotSettings records a bot's settings alone (its rate, 1..MaxBotRateLimit or 0 for the default, and
// whether it pays for broadcasts), as the operator does when they change and nothing else does: they are
// Herald's, not the platform's, so a change calls no Bot API and keeps the webhook and its secret.
// ErrNotFound when there is no such bot.
func (s *Store) SetBotSettings(ctx context.Context, id notification.BotID, rateLimit int, paidBroadcast bool) error {
	if rateLimit < 0 || rateLimit > MaxBotRateLimit {
		return fmt.Errorf("while setting the settings of bot %d: the rate limit must be 1..%d, or 0 for the default", id, MaxBotRateLimit)
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE bots SET rate_limit = NULLIF($2, 0), paid_broadcast = $3, updated_at = now() WHERE id = $1`,
		int64(id), rateLimit, paidBroadcast)
	if err == nil && tag.RowsAffected() == 0 {
		return fmt.Errorf("while setting the settings of bot %d: %w", id, ErrNotFound)
	}
	return translate(err, "setting the settings of bot "+strconv.FormatInt(int64(id), 10))
}

// BotChange is what SetTenantBot did.
type BotChange struct {
	// Previous is the bot the tenant sent through before.
	Previous notification.BotID
	// Changed: the tenant now sends through another bot. When false (the same bot, perhaps with a new
	// token) nothing else was touched.
	Changed bool
	// LinksEnded counts the links made through the previous bot, now deleted: those users must link again.
	LinksEnded int
	// Unlinked counts those users' notifications that were waiting to go through the previous bot and
	// ended unlinked (notification.CodeBotChanged).
	Unlinked int
}

// changeBotUpdate is the change of bot's transition for the rows cond selects: those in a state no attempt
// is running in end unlinked with notification.CodeBotChanged. A notification being delivered is its
// attempt's (it was claimed with the old bot's token); a retry of it is refused by the claim, the link
// being gone.
func changeBotUpdate(cond string) string {
	return moveTo(notification.ChangeBot.To()) + `,
		last_error_code = ` + strconv.Itoa(notification.CodeBotChanged) + `, last_error_message = '` + notification.BotChangedMessage + `'
		WHERE ` + cond + ` AND ` + notification.ChangeBot.SQL()
}

// setTenantBotSQL ends the links of tenant $1 made through its previous bot $2, resets those users' phone
// verifications (a verification proves a phone to one bot's chat: as for a relink), and ends their
// notifications still waiting to go through it, each with its notification.unlinked event. It returns the
// number of links and notifications it ended.
var setTenantBotSQL = `
	WITH ended AS (
		DELETE FROM links WHERE tenant_id = $1 AND bot_id IS NOT DISTINCT FROM $2::bigint
		RETURNING tenant_id, user_id),
	reset AS (
		UPDATE phone_verifications v
		SET status = ` + phone.Unverified.SQL() + `, session_expires_at = NULL, phone_last4 = NULL, phone_hash = NULL,
		    verified_at = NULL, updated_at = now()
		FROM ended WHERE v.tenant_id = ended.tenant_id AND v.user_id = ended.user_id),
	changed AS (` + changeBotUpdate(`kind = `+notification.KindTenantSQL+` AND bot_id IS NOT DISTINCT FROM $2::bigint
		AND (tenant_id, user_id) IN (SELECT tenant_id, user_id FROM ended)`) + `
		RETURNING ` + notificationEventColumns + `),
	` + notificationEvents("changed") + `
	SELECT (SELECT count(*) FROM ended), (SELECT count(*) FROM changed)`

// A change of a tenant's bot and a redemption of one of its link tokens serialise on an advisory lock of
// the tenant (by a hash of its id): the change holds it exclusively for its transaction, a redemption shared
// from before it reads the tenant's bot until it commits. So a link is never made through the old bot after
// the change ended the old bot's links. The lock lives in memory: a /start writes nothing for it (a share
// lock of the tenant's row would write the row on every /start).
const tenantBotClass = 0x48524c42 // "HRLB": the first key of the two-key advisory locks of tenants' bots

// tenantBotLockSQL takes, with lockFunction (pg_advisory_xact_lock or its _shared variant), the bot lock of
// the tenant whose id is the SQL expression tenant.
func tenantBotLockSQL(lockFunction, tenant string) string {
	return lockFunction + `(` + strconv.Itoa(tenantBotClass) + `, hashtext(` + tenant + `))`
}

// SetTenantBot makes the tenant send through bot (notification.SharedBot: the shared bot), with §11's
// "Changing the bot", in one transaction. The same bot as before (a new token for it: UpsertBot) keeps
// everything. Another bot, or the shared one: the tenant's links made through the old bot end, their users'
// phone verifications are reset, and their notifications still waiting to go through the old bot
// (scheduled, queued, retrying) end unlinked with notification.CodeBotChanged and their
// notification.unlinked events; the users link again, through the new bot. ErrNotFound when the tenant
// does not exist; ErrConflict when the bot has no row (UpsertBot first).
//
// The tenant's bot lock is taken first (tenantBotLockSQL): a link token of the tenant redeemed at the same
// time (RedeemLinkToken) either links before this reads the links, or waits and then finds the new bot.
func (s *Store) SetTenantBot(ctx context.Context, tenantID string, bot notification.BotID) (BotChange, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var c BotChange
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		c = BotChange{}
		if _, err := tx.Exec(ctx, `SELECT `+tenantBotLockSQL(`pg_advisory_xact_lock`, `$1::text`), tenantID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(bot_id, 0) FROM tenants WHERE id = $1 FOR NO KEY UPDATE`, tenantID).Scan(&c.Previous); err != nil {
			return err
		}
		if c.Previous == bot {
			return nil
		}
		c.Changed = true
		if _, err := tx.Exec(ctx, `UPDATE tenants SET bot_id = $2, updated_at = now() WHERE id = $1`, tenantID, botArg(bot)); err != nil {
			return err
		}
		// The bot's id only (null: the shared bot): its token is never in an event.
		var botID any
		if bot != 0 {
			botID = int64(bot)
		}
		if err := appendAudit(ctx, tx, tenantID, audit.TenantUpdated, tenantID, map[string]any{"bot_id": botID}); err != nil {
			return err
		}
		return tx.QueryRow(ctx, setTenantBotSQL, tenantID, botArg(c.Previous)).Scan(&c.LinksEnded, &c.Unlinked)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("while setting the bot of tenant %s: %w", tenantID, ErrNotFound)
	}
	return c, translate(err, "setting the bot of tenant "+tenantID)
}
