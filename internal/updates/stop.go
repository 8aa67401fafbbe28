package updates

// End users in control (spec v1-extensions §9): a block of the bot seen as it happens (my_chat_member),
// /stop and /resume, and the tap on their keyboards (callback_query). What changes is the store's
// (store.ChatBlockedEffect, ChatOptOutEffect, StopPromptEffect, StopChoiceEffect), applied once per update
// id like every other update; the keyboard's choices are kept server-side and a button's callback_data
// names only the prompt's random id and the choice's index, so a forged or stale one finds nothing.
//
// A tap is answered (answerCallbackQuery) and its message edited (editMessageText) by a direct call to the
// platform once the tap has taken effect: the platform wants the answer within seconds, and both concern
// a message already sent rather than a new one. Neither is retried: the state is right whether or not the
// notice shows, and a tap on a keyboard left in place finds its prompt used.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/store"
)

// The texts of /stop, /resume and their keyboards (what a choice did is consent.Outcome's). Replies about
// tenants are branded with their labels.
const (
	textNotConnected   = "This chat receives no notifications. To receive notifications here, open the link the app gave you."
	textStopPrompt     = "Which notifications do you want to stop?"
	textResumePrompt   = "Which notifications do you want to receive again?"
	textAllStopped     = "Everything is already stopped. Send /resume to receive notifications again."
	textNothingStopped = "Nothing is stopped: you receive every notification here. Send /stop to stop some."
	buttonAll          = "All of them"

	noticeStopped  = "Stopped."
	noticeResumed  = "Resumed."
	noticeStale    = "This button no longer works. Send /stop or /resume again."
	noticeNoChange = "Nothing changed."
)

// maxPromptButtons bounds a keyboard (the platform allows 100 buttons): past it, the categories that do
// not fit are left out, shared out fairly between the tenants (fairShare); each tenant's own button, which
// covers all of its categories, stays, and /resume's "All of them" lifts every opt-out, shown or not.
const maxPromptButtons = 50

// platformCallTimeout bounds answerCallbackQuery and editMessageText.
const platformCallTimeout = 5 * time.Second

// More kinds and outcomes of herald_webhook_updates_total.
const (
	kindStop   = "stop"   // /stop
	kindResume = "resume" // /resume

	outcomeBlocked   = "blocked"   // my_chat_member: the user blocked the bot
	outcomeUnblocked = "unblocked" // my_chat_member: the user unblocked it
	outcomeStopped   = "stopped"   // an opt-out was made (at once, or by a tap)
	outcomeResumed   = "resumed"   // an opt-out was lifted
	outcomePrompted  = "prompted"  // a keyboard was sent
	outcomeStale     = "stale"     // a tap that found no prompt to take: nothing changed
)

// chatMember handles my_chat_member in a private chat: kicked marks the chat's links of this bot blocked,
// member clears the mark. Anything else (a group, another status) is ignored.
func (rc *Receiver) chatMember(ctx context.Context, in incoming, raw json.RawMessage) (Result, error) {
	r := Result{Kind: messenger.KindMyChatMember, Outcome: outcomeIgnored}
	var cm messenger.ChatMemberUpdated
	if err := json.Unmarshal(raw, &cm); err != nil || cm.Chat.Type != messenger.ChatPrivate || cm.Chat.ID == 0 {
		return r, nil //nolint:nilerr // a payload that does not decode is acknowledged and ignored: redelivering it would not help
	}
	var blocked bool
	switch cm.NewChatMember.Status {
	case messenger.MemberKicked:
		blocked, r.Outcome = true, outcomeBlocked
	case messenger.MemberMember:
		r.Outcome = outcomeUnblocked
	default:
		return r, nil
	}
	in.m = &messenger.Message{From: &cm.From, Chat: cm.Chat}
	effect, changed := store.ChatBlockedEffect(in.id, in.bot, cm.Chat.ID, blocked)
	if err := rc.apply(ctx, in, effect); err != nil {
		return r, err
	}
	rc.log.LogAttrs(ctx, slog.LevelInfo, "the user changed the bot's membership", in.logAttrs(
		slog.Bool("blocked", blocked), slog.Int("links_changed", *changed))...)
	return r, nil
}

// fairShare keeps at most n of the category buttons (each of one tenant's category), taken from the
// tenants in turn — each one's first, then each one's second, and so on — so that a tenant with many
// categories cannot push another's off the keyboard: each tenant keeps all of its own or at least n divided
// by the number of tenants, and what one leaves unused goes to the others. What is kept stays in its order
// (the tenants in link order, each one's categories sorted).
func fairShare(categories []consent.Offer, n int) []consent.Offer {
	if len(categories) <= n {
		return categories
	}
	turn := make([]int, len(categories)) // the turn at which each category comes: its place among its tenant's
	seen := map[string]int{}
	for i, c := range categories {
		tenant := c.Choices[0].TenantID
		turn[i] = seen[tenant]
		seen[tenant]++
	}
	order := make([]int, len(categories))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return turn[a] - turn[b] })
	keep := order[:n]
	slices.Sort(keep)
	kept := make([]consent.Offer, n)
	for i, k := range keep {
		kept[i] = categories[k]
	}
	return kept
}

// stopOrResume handles /stop and /resume in a private chat: nothing to offer is said so; a single choice
// (one tenant and no category, or one opt-out to lift) is applied at once; several are offered on a keyboard.
func (rc *Receiver) stopOrResume(ctx context.Context, in incoming, kind consent.Kind) (Result, error) {
	r := Result{Kind: kindStop, Outcome: outcomeReplied}
	prompt, nothing := textStopPrompt, textAllStopped
	if kind == consent.Resume {
		r.Kind, prompt, nothing = kindResume, textResumePrompt, textNothingStopped
	}
	who := rc.chatUser(in)
	tenants, err := rc.store.ChatTenants(ctx, who)
	if err != nil {
		return r, err
	}
	labels := consent.Labels(tenants)
	whole, categories := consent.Offers(kind, tenants)
	switch {
	case len(tenants) == 0:
		return r, rc.reply(ctx, in, unbranded(textNotConnected))
	case len(whole)+len(categories) == 0:
		return r, rc.reply(ctx, in, brandedFor(tenantIDs(tenants), labels, nothing))
	case len(whole)+len(categories) == 1:
		whole = append(whole, categories...)
		effect, res := store.ChatOptOutEffect(in.id, who, kind, whole[0].Choices,
			&store.ChatReply{To: rc.notification(in, outbox.SystemMessage{}), Labels: labels})
		if err := rc.apply(ctx, in, effect); err != nil {
			return r, err
		}
		r.Outcome = chatOutcome(*res)
		rc.logChoice(ctx, in, "chat opt-out applied at once", *res)
		return r, nil
	}
	// "All of them" covers everything, not only what fits on the keyboard: stopping every tenant covers
	// their categories; resuming lifts each opt-out, so that none is left that no button reaches.
	all := consent.Offer{Text: buttonAll}
	for _, c := range whole {
		all.Choices = append(all.Choices, c.Choices...)
	}
	if kind == consent.Resume {
		for _, c := range categories {
			all.Choices = append(all.Choices, c.Choices...)
		}
	}
	categories = fairShare(categories, max(0, maxPromptButtons-len(whole)-1))
	buttons := append(append(whole, categories...), all)
	p := store.StopPrompt{ChatUser: who, Kind: kind}
	if _, err := rand.Read(p.ID[:]); err != nil {
		return r, fmt.Errorf("while making a prompt id: %w", err)
	}
	var kb messenger.InlineKeyboardMarkup
	offered := map[string]bool{}
	for i, b := range buttons {
		p.Choices = append(p.Choices, b.Choices)
		kb.InlineKeyboard = append(kb.InlineKeyboard, []messenger.InlineKeyboardButton{{Text: b.Text, CallbackData: callbackData(p.ID, i)}})
		for _, c := range b.Choices {
			offered[c.TenantID] = true
		}
	}
	markup, err := json.Marshal(kb)
	if err != nil {
		return r, fmt.Errorf("while encoding a keyboard: %w", err)
	}
	ids := slices.DeleteFunc(tenantIDs(tenants), func(id string) bool { return !offered[id] })
	msg := brandedFor(ids, labels, prompt)
	msg.ReplyMarkup = markup
	effect, err := store.StopPromptEffect(in.id, p, rc.notification(in, msg))
	if err != nil {
		return r, err
	}
	if err := rc.apply(ctx, in, effect); err != nil {
		return r, err
	}
	r.Outcome = outcomePrompted
	rc.log.LogAttrs(ctx, slog.LevelInfo, "chat opt-out keyboard sent", in.logAttrs(
		slog.String("kind", string(kind)), slog.Int("buttons", len(buttons)))...)
	return r, nil
}

// tap handles a callback_query: a tap on a /stop or /resume keyboard's button takes its choice (once, only
// the prompt's own user in its own chat, within consent.PromptTTL), answers the query and edits the
// message to say what is now stopped. Anything else changes nothing and is answered with a short notice.
func (rc *Receiver) tap(ctx context.Context, in incoming, raw json.RawMessage) (Result, error) {
	r := Result{Kind: messenger.KindCallbackQuery, Outcome: outcomeIgnored}
	var q messenger.CallbackQuery
	if err := json.Unmarshal(raw, &q); err != nil || q.ID == "" || q.From.ID == 0 || q.From.IsBot || q.Message == nil ||
		q.Message.Chat.Type != messenger.ChatPrivate {
		return r, nil //nolint:nilerr // a payload that does not decode is acknowledged and ignored: redelivering it would not help
	}
	in.m = &messenger.Message{MessageID: q.Message.MessageID, From: &q.From, Chat: q.Message.Chat}
	r.Outcome = outcomeStale
	id, index, ok := parseCallbackData(q.Data)
	if !ok {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "tap refused: not a keyboard's button", in.logAttrs()...)
		rc.answer(ctx, in, q.ID, noticeStale)
		return r, nil
	}
	who := rc.chatUser(in)
	tenants, err := rc.store.ChatTenants(ctx, who)
	if err != nil {
		return r, err
	}
	effect, res := store.StopChoiceEffect(in.id, who, id, index, nil)
	if err := rc.apply(ctx, in, effect); err != nil {
		return r, err
	}
	if res.Stale {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "tap refused: no prompt to take (forged, another user's, used or expired)", in.logAttrs()...)
		rc.answer(ctx, in, q.ID, noticeStale)
		return r, nil
	}
	r.Outcome = chatOutcome(*res)
	rc.logChoice(ctx, in, "chat opt-out tapped", *res)
	notice := noticeNoChange
	switch {
	case len(res.Choices) == 0:
	case res.Kind == consent.Stop:
		notice = noticeStopped
	default:
		notice = noticeResumed
	}
	rc.answer(ctx, in, q.ID, notice)
	rc.edit(ctx, in, consent.Outcome(*res, consent.Labels(tenants)).Body)
	return r, nil
}

// chatOutcome is the metric's outcome of an applied choice.
func chatOutcome(res consent.Result) string {
	switch {
	case len(res.Choices) == 0:
		return outcomeReplied
	case res.Kind == consent.Stop:
		return outcomeStopped
	}
	return outcomeResumed
}

func (rc *Receiver) logChoice(ctx context.Context, in incoming, msg string, res consent.Result) {
	tenants := make([]string, 0, len(res.Choices))
	for _, c := range res.Choices {
		if !slices.Contains(tenants, c.TenantID) {
			tenants = append(tenants, c.TenantID)
		}
	}
	rc.log.LogAttrs(ctx, slog.LevelInfo, msg, in.logAttrs(slog.String("kind", string(res.Kind)), slog.Any("tenant_ids", tenants),
		slog.Int("changed", res.Changed))...)
}

// brandedFor is consent.BrandedFor as a system message.
func brandedFor(tenantIDs []string, labels map[string]string, text string) outbox.SystemMessage {
	m := consent.BrandedFor(tenantIDs, labels, text)
	return outbox.SystemMessage{TenantID: m.TenantID, Body: m.Body}
}

func tenantIDs(tenants []consent.Tenant) []string {
	out := make([]string, len(tenants))
	for i, t := range tenants {
		out[i] = t.TenantID
	}
	return out
}

func (rc *Receiver) chatUser(in incoming) store.ChatUser {
	return store.ChatUser{Bot: in.bot, ChatID: in.m.Chat.ID, MessengerUserID: in.m.From.ID}
}

// callbackData is a button's callback_data: the prompt's id (base64url, 22 characters) and the choice's
// index, well within the platform's 64 bytes.
func callbackData(id [16]byte, index int) string {
	return base64.RawURLEncoding.EncodeToString(id[:]) + ":" + strconv.Itoa(index)
}

// parseCallbackData reads callbackData's form; anything else is not a button of Herald's keyboards.
func parseCallbackData(data string) (id [16]byte, index int, ok bool) {
	rawID, rawIndex, found := strings.Cut(data, ":")
	if !found || len(rawID) != base64.RawURLEncoding.EncodedLen(len(id)) || len(rawIndex) == 0 || len(rawIndex) > 3 {
		return id, 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rawID)
	if err != nil || len(b) != len(id) {
		return id, 0, false
	}
	index, err = strconv.Atoi(rawIndex)
	if err != nil || index < 0 || strconv.Itoa(index) != rawIndex {
		return id, 0, false
	}
	copy(id[:], b)
	return id, index, true
}

// platform is the Bot API client of the bot that received the update, nil (logged) when there is none.
func (rc *Receiver) platform(ctx context.Context, in incoming) *messenger.Client {
	if rc.bots == nil {
		rc.log.LogAttrs(ctx, slog.LevelWarn, "no Bot API client to answer a tap with (the shared bot's token is not configured)", in.logAttrs()...)
		return nil
	}
	c, err := rc.bots.Client(ctx, in.bot)
	if err != nil {
		rc.log.LogAttrs(ctx, slog.LevelWarn, "no Bot API client to answer a tap with", in.logAttrs(slog.Any("err", err))...)
		return nil
	}
	return c
}

// answer answers the callback query with a notice; a failure is logged (the tap took effect regardless).
func (rc *Receiver) answer(ctx context.Context, in incoming, queryID, notice string) {
	c := rc.platform(ctx, in)
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, platformCallTimeout)
	defer cancel()
	if err := c.AnswerCallbackQuery(ctx, messenger.AnswerCallbackQueryRequest{CallbackQueryID: queryID, Text: notice}); err != nil {
		rc.log.LogAttrs(ctx, slog.LevelWarn, "answering a tap failed", in.logAttrs(slog.Any("err", err))...)
	}
}

// edit replaces the keyboard's message with text, without the keyboard.
func (rc *Receiver) edit(ctx context.Context, in incoming, text string) {
	c := rc.platform(ctx, in)
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, platformCallTimeout)
	defer cancel()
	if err := c.EditMessageText(ctx, messenger.EditMessageTextRequest{ChatID: in.m.Chat.ID, MessageID: in.m.MessageID, Text: text}); err != nil {
		rc.log.LogAttrs(ctx, slog.LevelWarn, "editing a keyboard's message failed", in.logAttrs(slog.Any("err", err))...)
	}
}
