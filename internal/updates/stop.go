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

	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/store"
)

// The texts of /stop, /resume and their keyboards. Replies about tenants are branded with their labels.
const (
	textNotConnected   = "This chat receives no notifications. To receive notifications here, open the link the app gave you."
	textStopPrompt     = "Which notifications do you want to stop?"
	textResumePrompt   = "Which notifications do you want to receive again?"
	textStoppedFormat  = "Stopped: %s. You will not receive these notifications here. Send /resume to receive them again."
	textResumedFormat  = "Resumed: %s. You will receive these notifications here again."
	textAllStopped     = "Everything is already stopped. Send /resume to receive notifications again."
	textNothingStopped = "Nothing is stopped: you receive every notification here. Send /stop to stop some."
	// textNothingChanged answers a choice whose tenants the chat is no longer connected to.
	textNothingChanged = "Nothing changed: this chat is no longer connected to that app."
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

// choice is a button of a keyboard: its text, and what it stops or resumes.
type choice struct {
	text    string
	choices []store.ChatChoice
}

// stopChoices are what /stop offers: each tenant the user has not stopped whole, and each category it
// sent in the last 30 days that the user has not stopped. An opt-out the tenant made is offered too: the
// user's /stop makes it the user's own, which the tenant cannot lift.
func stopChoices(tenants []store.ChatTenant) (whole, categories []choice) {
	for _, t := range tenants {
		stopped := func(category string) bool {
			return slices.ContainsFunc(t.OptOuts, func(o store.OptOutRecord) bool { return o.Category == category && o.By == store.ByUser })
		}
		if stopped("") {
			continue
		}
		whole = append(whole, choice{t.Label, []store.ChatChoice{{TenantID: t.TenantID}}})
		for _, c := range t.Categories {
			if !stopped(c) {
				categories = append(categories, choice{t.Label + ": " + c, []store.ChatChoice{{TenantID: t.TenantID, Category: c}}})
			}
		}
	}
	return whole, categories
}

// resumeChoices are what /resume offers: every opt-out, the user's and the tenant's alike (the user may lift
// either).
func resumeChoices(tenants []store.ChatTenant) (whole, categories []choice) {
	for _, t := range tenants {
		for _, o := range t.OptOuts {
			c := choice{t.Label, []store.ChatChoice{{TenantID: t.TenantID, Category: o.Category}}}
			if o.Category == "" {
				whole = append(whole, c)
			} else {
				c.text += ": " + o.Category
				categories = append(categories, c)
			}
		}
	}
	return whole, categories
}

// fairShare keeps at most n of the category buttons (each of one tenant's category), taken from the
// tenants in turn — each one's first, then each one's second, and so on — so that a tenant with many
// categories cannot push another's off the keyboard: each tenant keeps all of its own or at least n divided
// by the number of tenants, and what one leaves unused goes to the others. What is kept stays in its order
// (the tenants in link order, each one's categories sorted).
func fairShare(categories []choice, n int) []choice {
	if len(categories) <= n {
		return categories
	}
	turn := make([]int, len(categories)) // the turn at which each category comes: its place among its tenant's
	seen := map[string]int{}
	for i, c := range categories {
		tenant := c.choices[0].TenantID
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
	kept := make([]choice, n)
	for i, k := range keep {
		kept[i] = categories[k]
	}
	return kept
}

// stopOrResume handles /stop and /resume in a private chat: nothing to offer is said so; a single choice
// (one tenant and no category, or one opt-out to lift) is applied at once; several are offered on a keyboard.
func (rc *Receiver) stopOrResume(ctx context.Context, in incoming, kind store.PromptKind) (Result, error) {
	r := Result{Kind: kindStop, Outcome: outcomeReplied}
	offer, prompt, nothing := stopChoices, textStopPrompt, textAllStopped
	if kind == store.PromptResume {
		r.Kind, offer, prompt, nothing = kindResume, resumeChoices, textResumePrompt, textNothingStopped
	}
	who := rc.chatUser(in)
	tenants, err := rc.store.ChatTenants(ctx, who)
	if err != nil {
		return r, err
	}
	labels := labelsOf(tenants)
	whole, categories := offer(tenants)
	switch {
	case len(tenants) == 0:
		return r, rc.reply(ctx, in, unbranded(textNotConnected))
	case len(whole)+len(categories) == 0:
		return r, rc.reply(ctx, in, brandedFor(tenantIDs(tenants), labels, nothing))
	case len(whole)+len(categories) == 1:
		whole = append(whole, categories...)
		effect, res := store.ChatOptOutEffect(in.id, who, kind, whole[0].choices, func(res store.ChatOptOutResult) []store.NewNotification {
			return []store.NewNotification{rc.notification(in, outcomeMessage(res, labels))}
		})
		if err := rc.apply(ctx, in, effect); err != nil {
			return r, err
		}
		r.Outcome = chatOutcome(*res)
		rc.logChoice(ctx, in, "chat opt-out applied at once", *res)
		return r, nil
	}
	// "All of them" covers everything, not only what fits on the keyboard: stopping every tenant covers
	// their categories; resuming lifts each opt-out, so that none is left that no button reaches.
	all := choice{text: buttonAll}
	for _, c := range whole {
		all.choices = append(all.choices, c.choices...)
	}
	if kind == store.PromptResume {
		for _, c := range categories {
			all.choices = append(all.choices, c.choices...)
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
		p.Choices = append(p.Choices, b.choices)
		kb.InlineKeyboard = append(kb.InlineKeyboard, []messenger.InlineKeyboardButton{{Text: b.text, CallbackData: callbackData(p.ID, i)}})
		for _, c := range b.choices {
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
// the prompt's own user in its own chat, within store.StopPromptTTL), answers the query and edits the
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
	case res.Kind == store.PromptStop:
		notice = noticeStopped
	default:
		notice = noticeResumed
	}
	rc.answer(ctx, in, q.ID, notice)
	rc.edit(ctx, in, outcomeMessage(*res, labelsOf(tenants)).Body)
	return r, nil
}

// chatOutcome is the metric's outcome of an applied choice.
func chatOutcome(res store.ChatOptOutResult) string {
	switch {
	case len(res.Choices) == 0:
		return outcomeReplied
	case res.Kind == store.PromptStop:
		return outcomeStopped
	}
	return outcomeResumed
}

func (rc *Receiver) logChoice(ctx context.Context, in incoming, msg string, res store.ChatOptOutResult) {
	tenants := make([]string, 0, len(res.Choices))
	for _, c := range res.Choices {
		if !slices.Contains(tenants, c.TenantID) {
			tenants = append(tenants, c.TenantID)
		}
	}
	rc.log.LogAttrs(ctx, slog.LevelInfo, msg, in.logAttrs(slog.String("kind", string(res.Kind)), slog.Any("tenant_ids", tenants),
		slog.Int("changed", res.Changed))...)
}

// outcomeMessage says what a choice stopped or resumed, branded with the labels of its tenants.
func outcomeMessage(res store.ChatOptOutResult, labels map[string]string) outbox.SystemMessage {
	if len(res.Choices) == 0 {
		return unbranded(textNothingChanged)
	}
	var ids, items []string
	for _, c := range res.Choices {
		if !slices.Contains(ids, c.TenantID) {
			ids = append(ids, c.TenantID)
		}
		item := labels[c.TenantID]
		if c.Category != "" {
			item += ": " + c.Category
		}
		items = append(items, item)
	}
	format := textStoppedFormat
	if res.Kind == store.PromptResume {
		format = textResumedFormat
	}
	return brandedFor(ids, labels, fmt.Sprintf(format, joinNames(items)))
}

// brandedFor brands text for the tenants (in this order): one tenant's label, or each one's named
// ("A message from Acme, Globex and Initech"). A message about several tenants belongs to none of them.
func brandedFor(tenantIDs []string, labels map[string]string, text string) outbox.SystemMessage {
	names := make([]string, len(tenantIDs))
	for i, id := range tenantIDs {
		names[i] = labels[id]
	}
	msg := outbox.SystemMessage{Body: brand.Render(joinNames(names), text)}
	if len(tenantIDs) == 1 {
		msg.TenantID = tenantIDs[0]
	}
	return msg
}

// joinNames is "A", "A and B", "A, B and C".
func joinNames(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func labelsOf(tenants []store.ChatTenant) map[string]string {
	out := make(map[string]string, len(tenants))
	for _, t := range tenants {
		out[t.TenantID] = t.Label
	}
	return out
}

func tenantIDs(tenants []store.ChatTenant) []string {
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
