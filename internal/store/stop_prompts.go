package store

// /stop and /resume in a private chat (spec v1-extensions §9), as effects of the webhook's update
// transaction (processed_updates.go), so that each takes effect once per update id: the tenants linked to
// the chat (ChatTenants, read before), an opt-out or a lift made at once (ChatOptOutEffect), or an inline
// keyboard whose choices are kept here, server-side (StopPromptEffect), and the tap on one of its buttons
// (StopChoiceEffect). A button's callback_data names only the prompt's random id and a choice's index, so a
// forged or stale one finds nothing to apply.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
)

// ChatUser is a messenger user in a private chat with a bot: who sends /stop, or taps a button.
type ChatUser struct {
	Bot             notification.BotID // the bot that received the update
	ChatID          int64
	MessengerUserID int64
}

// chatTenantsSQL reads the links of messenger user $3 in chat $2 of bot $1, each with its label, the
// categories sent within $4 (at most MaxChatCategories) and the opt-outs (at most MaxCategoryOptOuts and the
// whole tenant's: a user written past the cap shows no more).
var chatTenantsSQL = `
	SELECT l.tenant_id, l.user_id,
	       COALESCE(l.label, t.developer_name),
	       (` + sentCategoriesLimit(`l.tenant_id`, `l.user_id`, `$4`, MaxChatCategories) + `),
	       COALESCE(o.categories, '{}'), COALESCE(o.bys, '{}')
	FROM links l JOIN tenants t ON t.id = l.tenant_id
	LEFT JOIN LATERAL (
		SELECT array_agg(category ORDER BY category) AS categories, array_agg(by ORDER BY category) AS bys FROM (
			SELECT category, by FROM opt_outs o WHERE o.tenant_id = l.tenant_id AND o.user_id = l.user_id
			ORDER BY category LIMIT ` + strconv.Itoa(MaxCategoryOptOuts+1) + `) c) o ON true
	WHERE l.messenger_user_id = $3 AND l.chat_id = $2 AND l.bot_id IS NOT DISTINCT FROM $1::bigint
	ORDER BY l.linked_at, l.tenant_id, l.user_id`

// ChatTenants lists the tenants linked to the chat with this messenger user, in the order the user linked
// them: what /stop and /resume offer. What it reads of each tenant's user is bounded (MaxChatCategories,
// MaxCategoryOptOuts), merged in linear time with sets, and it stops at the deadline (issue 35: a tenant's
// volume must not stop the other tenants' users of the chat).
func (s *Store) ChatTenants(ctx context.Context, who ChatUser) ([]consent.Tenant, error) {
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, chatTenantsSQL, botArg(who.Bot), who.ChatID, who.MessengerUserID, consent.SentCategoriesWindow.String())
	if err != nil {
		return nil, translate(err, "reading the tenants of a chat")
	}
	var out []consent.Tenant
	// The categories and opt-outs of out's last tenant already merged (a tenant's rows are consecutive).
	var seenCategories, seenOptOuts map[string]bool
	var tenantID, userID, label string
	var categories, optOuts, bys []string
	_, err = pgx.ForEachRow(rows, []any{&tenantID, &userID, &label, &categories, &optOuts, &bys}, func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].TenantID != tenantID {
			out = append(out, consent.Tenant{TenantID: tenantID, Label: label})
			seenCategories, seenOptOuts = map[string]bool{}, map[string]bool{}
		}
		ct := &out[len(out)-1]
		ct.UserIDs = append(ct.UserIDs, userID)
		for _, c := range categories {
			if !seenCategories[c] && len(ct.Categories) < MaxChatCategories {
				seenCategories[c] = true
				ct.Categories = append(ct.Categories, c)
			}
		}
		for i, c := range optOuts {
			if !seenOptOuts[c] && len(ct.OptOuts) <= MaxCategoryOptOuts {
				seenOptOuts[c] = true
				ct.OptOuts = append(ct.OptOuts, consent.Record{Category: c, By: consent.By(bys[i])})
			}
		}
		return nil
	})
	for i := range out {
		slices.Sort(out[i].Categories)
		slices.SortFunc(out[i].OptOuts, func(a, b consent.Record) int { return strings.Compare(a.Category, b.Category) })
	}
	return out, translate(err, "reading the tenants of a chat")
}

// ChatReply is the reply to a /stop or /resume applied at once: the message addressed to the chat (its
// tenant and body left for the outcome) and the labels of the chat's tenants. The store renders the body
// from the result it resolved (consent.Outcome) inside the update's transaction.
type ChatReply struct {
	To     NewNotification
	Labels map[string]string
}

// chatTarget is a choice applied to one of the tenant's users linked in the chat.
type chatTarget struct {
	choice consent.Choice
	userID string
}

// resolveChoicesSQL resolves choices ($4 tenants, $5 categories) of kind $6 to the users of those tenants
// linked to chat $2 of bot $1 with messenger user $3.
const resolveChoicesSQL = `
	SELECT $6::text, c.tenant_id, c.category, l.user_id
	FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS c(tenant_id, category, i)
	JOIN links l ON l.tenant_id = c.tenant_id AND l.chat_id = $2 AND l.messenger_user_id = $3 AND l.bot_id IS NOT DISTINCT FROM $1::bigint
	ORDER BY c.i, l.user_id`

// takeChoiceSQL takes choice $5 of prompt $4 — only the prompt's own user in its own chat of its own bot,
// only once, only within $6 (consent.PromptTTL) — and resolves it as resolveChoicesSQL does. No row: nothing to
// take. A row without a user: a tenant of the choice the user is no longer linked to here.
const takeChoiceSQL = `
	WITH p AS (
		UPDATE stop_prompts SET used_at = now()
		WHERE id = $4 AND bot_id IS NOT DISTINCT FROM $1::bigint AND chat_id = $2 AND messenger_user_id = $3
		  AND used_at IS NULL AND created_at > now() - $6::interval
		  AND $5::int >= 0 AND $5::int < jsonb_array_length(choices)
		RETURNING kind, choices -> $5::int AS choice)
	SELECT p.kind, c.tenant_id, COALESCE(c.category, ''), l.user_id
	FROM p CROSS JOIN LATERAL ROWS FROM (jsonb_to_recordset(p.choice) AS (tenant_id text, category text)) WITH ORDINALITY AS c(tenant_id, category, i)
	LEFT JOIN links l ON l.tenant_id = c.tenant_id AND l.chat_id = $2 AND l.messenger_user_id = $3 AND l.bot_id IS NOT DISTINCT FROM $1::bigint
	ORDER BY c.i, l.user_id`

// chatEffect is the effect of an update that stops or resumes choices: first queue's statement resolves
// them to users (rows of kind, tenant, category and user, read by scan; no row leaves the result as initial
// is), then the opt-outs or lifts are applied, by the user — an opt-out after the gate locks of its users,
// as OptOut takes its user's.
func chatEffect(updateID int64, who ChatUser, res *consent.Result, initial consent.Result, queue func(b *pgx.Batch, scan func(pgx.Rows) error),
	reply *ChatReply) *Effect {
	var targets []chatTarget
	scan := func(rows pgx.Rows) error {
		var kind string
		var c consent.Choice
		var userID *string
		_, err := pgx.ForEachRow(rows, []any{&kind, &c.TenantID, &c.Category, &userID}, func() error {
			res.Stale, res.Kind = false, consent.Kind(kind)
			if userID != nil {
				targets = append(targets, chatTarget{choice: c, userID: *userID})
			}
			return nil
		})
		return err
	}
	e := &Effect{UpdateID: updateID, Bot: who.Bot}
	endings := &e.Endings
	e.first, e.then = func(b *pgx.Batch) {
		*res, targets = initial, nil
		queue(b, scan)
	}, func(b *pgx.Batch) ([]NewNotification, error) {
		if res.Stale {
			return replyOf(reply, *res), nil
		}
		tenants, users := make([]string, len(targets)), make([]string, len(targets))
		for i, t := range targets {
			tenants[i], users[i] = t.choice.TenantID, t.userID
			if !slices.Contains(res.Choices, t.choice) {
				res.Choices = append(res.Choices, t.choice)
			}
		}
		query := optOutSQL
		if res.Kind == consent.Stop && len(targets) > 0 {
			b.Queue(exclusiveGatesSQL, gateBuckets(tenants, users))
		} else if res.Kind != consent.Stop {
			query = liftOptOutSQL
		}
		for _, t := range targets {
			b.Queue(query, t.choice.TenantID, t.userID, t.choice.Category, string(consent.ByUser), audit.User).QueryRow(func(row pgx.Row) error {
				var exists bool
				var changed, marked int
				var err error
				if res.Kind == consent.Stop {
					// One refused for the cap (MaxCategoryOptOuts) changes nothing: /stop offers at most
					// MaxChatCategories categories, and the whole tenant's is always made.
					var capped bool
					err = row.Scan(&exists, &changed, &marked, &capped)
					if marked == 1 && !slices.Contains(*endings, UserRef{t.choice.TenantID, t.userID}) {
						*endings = append(*endings, UserRef{t.choice.TenantID, t.userID})
					}
				} else {
					var held string
					var lifted bool
					err = row.Scan(&exists, &held, &lifted)
					if lifted {
						changed = 1
					}
				}
				res.Changed += changed
				return err
			})
		}
		return replyOf(reply, *res), nil
	}
	return e
}

// replyOf is reply (nil: none) with the outcome of res.
func replyOf(reply *ChatReply, res consent.Result) []NewNotification {
	if reply == nil {
		return nil
	}
	m := consent.Outcome(res, reply.Labels)
	n := reply.To
	n.TenantID, n.Body = m.TenantID, m.Body
	return []NewNotification{n}
}

// ChatOptOutEffect is a /stop (kind consent.Stop) or /resume (consent.Resume) applied at once, without a
// keyboard — one tenant, no categories —: the choices are opted out of (or lifted) by the user, for each of
// the tenant's users linked to the chat with who's messenger user; a choice of a tenant not linked there is
// skipped. The user lifts the tenant's opt-outs as well as their own. An opt-out ends the waiting
// notifications it covers after the commit (Effect.Endings), as OptOut does. reply (nil: none) is the reply, its body rendered from the
// result (consent.Outcome), which *consent.Result holds in full once ApplyUpdates returns.
func ChatOptOutEffect(updateID int64, who ChatUser, kind consent.Kind, choices []consent.Choice, reply *ChatReply) (*Effect, *consent.Result) {
	res := &consent.Result{}
	tenants, categories := make([]string, len(choices)), make([]string, len(choices))
	for i, c := range choices {
		tenants[i], categories[i] = c.TenantID, c.Category
	}
	return chatEffect(updateID, who, res, consent.Result{Kind: kind}, func(b *pgx.Batch, scan func(pgx.Rows) error) {
		b.Queue(resolveChoicesSQL, botArg(who.Bot), who.ChatID, who.MessengerUserID, tenants, categories, string(kind)).Query(scan)
	}, reply), res
}

// StopPrompt is a /stop or /resume keyboard: its choices, each one button's (a tenant, a category, or "All
// of them": several), kept server-side under a random id for the tap (StopChoiceEffect).
type StopPrompt struct {
	ID [16]byte // random (crypto/rand): a button's callback_data carries it
	ChatUser
	Kind    consent.Kind
	Choices [][]consent.Choice
}

// StopPromptEffect records the prompt and inserts reply (the message with its keyboard), once per update
// id.
func StopPromptEffect(updateID int64, p StopPrompt, reply NewNotification) (*Effect, error) {
	if p.ID == ([16]byte{}) {
		return nil, errors.New("a stop prompt needs a random id")
	}
	choices, err := json.Marshal(p.Choices)
	if err != nil {
		return nil, fmt.Errorf("while recording a stop prompt: %w", err)
	}
	return &Effect{UpdateID: updateID, Bot: p.Bot, replies: []NewNotification{reply}, first: func(b *pgx.Batch) {
		b.Queue(`INSERT INTO stop_prompts (id, bot_id, chat_id, messenger_user_id, kind, choices) VALUES ($1, $2, $3, $4, $5, $6)`,
			p.ID[:], botArg(p.Bot), p.ChatID, p.MessengerUserID, string(p.Kind), string(choices))
	}}, nil
}

// StopChoiceEffect is a tap on a prompt's button (a callback_query): it takes the choice at index of
// prompt id once — for the prompt's own user in its own chat, within consent.PromptTTL — and applies it as
// ChatOptOutEffect does. Anything else is Stale and changes nothing. A tap redelivered under the same update
// id is a repeat (ApplyUpdates); another tap on a used prompt is Stale.
func StopChoiceEffect(updateID int64, who ChatUser, id [16]byte, index int, reply *ChatReply) (*Effect, *consent.Result) {
	res := &consent.Result{}
	return chatEffect(updateID, who, res, consent.Result{Stale: true}, func(b *pgx.Batch, scan func(pgx.Rows) error) {
		b.Queue(takeChoiceSQL, botArg(who.Bot), who.ChatID, who.MessengerUserID, id[:], index, consent.PromptTTL.String()).Query(scan)
	}, reply), res
}
