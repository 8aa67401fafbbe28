package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/phone"
)

// LinkTokenTTL is the lifetime of a link token, fixed by the spec.
const LinkTokenTTL = 15 * time.Minute

// CreateLinkToken records a link token's digest with the label snapshot, creating the user record if it
// is new, and returns the expiry.
func (s *Store) CreateLinkToken(ctx context.Context, tenantID, userID string, digest [32]byte, label string) (time.Time, error) {
	t, err := s.IssueLinkToken(ctx, tenantID, userID, digest, label)
	return t.ExpiresAt, err
}

// IssuedLinkToken is what IssueLinkToken recorded, and where its deep link leads.
type IssuedLinkToken struct {
	ExpiresAt time.Time
	// BotUsername is the username of the tenant's own bot, which its deep links name (spec §11); "" for a
	// tenant of the shared bot.
	BotUsername string
}

// IssueLinkToken is CreateLinkToken for the tenant API, which also needs the tenant's bot for the deep
// link: read in the same statement, so that a change of bot is seen at once. (The token links only through
// the tenant's bot at redemption, whatever the link named: RedeemLinkToken.)
func (s *Store) IssueLinkToken(ctx context.Context, tenantID, userID string, digest [32]byte, label string) (IssuedLinkToken, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var t IssuedLinkToken
	var username *string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO users (tenant_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, tenantID, userID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO link_tokens (digest, tenant_id, user_id, label, expires_at)
			VALUES ($1, $2, $3, $4, now() + $5::interval)
			RETURNING expires_at, (SELECT b.username FROM tenants t JOIN bots b ON b.id = t.bot_id WHERE t.id = $2)`,
			digest[:], tenantID, userID, label, LinkTokenTTL.String()).Scan(&t.ExpiresAt, &username)
	})
	if username != nil {
		t.BotUsername = *username
	}
	return t, translate(err, "creating link token")
}

// LinkOutcome is what a /start with a token did.
type LinkOutcome string

// Link outcomes.
const (
	LinkLinked  LinkOutcome = "linked"  // the token was valid: the user is linked to the sender
	LinkUnknown LinkOutcome = "unknown" // no such token
	LinkExpired LinkOutcome = "expired" // the token outlived LinkTokenTTL unused
	LinkUsed    LinkOutcome = "used"    // the token was redeemed before
	// LinkWrongBot: the token is valid, but its tenant sends through another bot than the one it was
	// redeemed in (§11): nothing is linked, and the token stays valid for the tenant's own bot.
	LinkWrongBot LinkOutcome = "wrong_bot"
)

// Redemption is a /start <token> from a private chat.
type Redemption struct {
	Digest          [32]byte // SHA-256 of the token
	MessengerUserID int64
	ChatID          int64
	// Bot is the bot the /start was sent to (the bot of the webhook route or the poll that received it). A
	// token links only through its tenant's bot, and the link belongs to that bot.
	Bot notification.BotID
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

// RedeemLinkToken is the effect of a /start <token>: it consumes a valid, unexpired, unused token, links
// its user to the sender (recording the user.linked callback event; the link keeps the token's label, which
// brands the replies about the tenant in the chat, and a new link is not blocked), and inserts the reply built from the
// result (filled into *LinkResult when ApplyUpdates returns). Of two concurrent redemptions of one token
// exactly one links: the second waits on the token's row lock, then finds it used.
//
// A notification only ever reaches the chat whose owner was verified when it was accepted, so the user's
// notifications still waiting for another chat (scheduled, queued, retrying: accepted for the account
// linked before) end unlinked, each with its notification.unlinked event, and never reach the platform:
// the claim refuses them from the commit on, and they end after it, in chunks (Effect.Endings,
// FinishEndings), so that the link's transaction does not grow with the tenant's backlog (issue 35). A relink of the same account (the same chat of the same bot) ends nothing.
//
// A token links only through its tenant's bot (r.Bot): redeemed in another bot it links nothing
// (LinkWrongBot). The tenant's bot lock is taken shared first (tenantBotLockSQL), so that a change of the
// tenant's bot (SetTenantBot, which ends the links made through the old bot) is either seen here or waits
// for this link, and then ends it.
func RedeemLinkToken(updateID int64, r Redemption, reply func(LinkResult) NewNotification) (*Effect, *LinkResult) {
	var (
		res      LinkResult
		consumed bool
		previous *int64 // the messenger account the user was linked to
	)
	bot := botArg(r.Bot)
	e := &Effect{UpdateID: updateID}
	*e = Effect{
		UpdateID: updateID,
		first: func(b *pgx.Batch) {
			res, consumed, previous = LinkResult{}, false, nil
			b.Queue(`SELECT `+tenantBotLockSQL(`pg_advisory_xact_lock_shared`, `k.tenant_id`)+` FROM link_tokens k WHERE k.digest = $1`, r.Digest[:])
			b.Queue(`
				UPDATE link_tokens k SET used_at = now()
				WHERE k.digest = $1 AND k.used_at IS NULL AND k.expires_at > now()
				  AND EXISTS (SELECT 1 FROM tenants t WHERE t.id = k.tenant_id AND t.bot_id IS NOT DISTINCT FROM $2::bigint)
				RETURNING k.tenant_id, k.user_id, k.label`, r.Digest[:], bot).QueryRow(func(row pgx.Row) error {
				err := row.Scan(&res.TenantID, &res.UserID, &res.Label)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				consumed = err == nil
				return err
			})
			// Why a token was refused, and the current link of its user, read after the consumption above.
			b.Queue(`
				SELECT k.tenant_id, k.label, k.used_at IS NOT NULL, k.expires_at <= now(),
				       t.bot_id IS NOT DISTINCT FROM $2::bigint,
				       (SELECT l.messenger_user_id FROM links l WHERE l.tenant_id = k.tenant_id AND l.user_id = k.user_id)
				FROM link_tokens k JOIN tenants t ON t.id = k.tenant_id WHERE k.digest = $1`, r.Digest[:], bot).QueryRow(func(row pgx.Row) error {
				var tenantID, label string
				var used, expired, ownBot bool
				err := row.Scan(&tenantID, &label, &used, &expired, &ownBot, &previous)
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
				case !expired && !ownBot:
					res.Outcome, res.TenantID, res.Label = LinkWrongBot, tenantID, label
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
			// The link and its user.linked callback event, in one statement.
			b.Queue(`
				WITH linked AS (
					INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id, bot_id, label) VALUES ($1, $2, $3, $4, $5, $6)
					ON CONFLICT (tenant_id, user_id) DO UPDATE
					  SET messenger_user_id = EXCLUDED.messenger_user_id, chat_id = EXCLUDED.chat_id, bot_id = EXCLUDED.bot_id,
					      label = EXCLUDED.label, blocked_at = NULL, linked_at = now()
					RETURNING tenant_id, user_id, linked_at AS at),
				`+userEvents("linked", EventUserLinked)+`
				SELECT count(*) FROM linked`,
				res.TenantID, res.UserID, r.MessengerUserID, r.ChatID, bot, res.Label)
			// The notifications accepted for another chat: they were for the account verified then, not for
			// this one. (Also when no link was left to replace: the platform's "chat not found" removed it.)
			// They end after the commit, in chunks (FinishEndings; issue 35: a tenant's backlog must not size
			// this transaction); the claim refuses them meanwhile (claimOnce: Relinked).
			b.Queue(markEndingSQL, res.TenantID, res.UserID)
			e.Endings = append(e.Endings, UserRef{res.TenantID, res.UserID})
			// A verification proves the phone of one messenger account; it does not carry over to another.
			// (Two concurrent relinks of one user serialise on the link's row lock; each resets when the
			// account it read differs from its own, so a verification never outlives a change of account.)
			if previous != nil && *previous != r.MessengerUserID {
				res.Replaced = true
				b.Queue(`
					UPDATE phone_verifications
					SET status = `+phone.Unverified.SQL()+`, session_expires_at = NULL, phone_last4 = NULL, phone_hash = NULL,
					    verified_at = NULL, updated_at = now()
					WHERE tenant_id = $1 AND user_id = $2`, res.TenantID, res.UserID)
			}
			return []NewNotification{reply(res)}, nil
		},
	}
	return e, &res
}
