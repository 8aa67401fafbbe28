package updates

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/phone"
	"github.com/heraldhq/herald/internal/store"
)

// Result says what Handle made of an update: its kind and the outcome, as counted in
// herald_webhook_updates_total.
type Result struct {
	Kind    string
	Outcome string
}

// Handle acts on one update of the shared bot; the webhook and the poller share it. A repeated update_id is
// acknowledged without effect. An error means nothing took effect and the update may be retried
// (IsTransient tells whether a retry can help).
func (rc *Receiver) Handle(ctx context.Context, u messenger.Update) (Result, error) {
	return rc.handleFrom(ctx, bot.Shared, u)
}

// handleFrom is Handle for an update that bot through received: its update_id is that bot's, and what it
// does concerns that bot's links and tenants.
func (rc *Receiver) handleFrom(ctx context.Context, through bot.ID, u messenger.Update) (Result, error) {
	res, err := rc.handle(ctx, through, u)
	switch {
	case errors.Is(err, store.ErrUpdateProcessed):
		res.Outcome, err = outcomeDuplicate, nil
	case err != nil:
		res.Outcome = outcomeError
		rc.log.LogAttrs(ctx, slog.LevelError, "handling an update failed", slog.Int64("update_id", u.UpdateID),
			slog.Int64("bot_id", int64(through)), slog.String("kind", res.Kind), slog.Bool("transient", IsTransient(err)), slog.Any("err", err))
	}
	observe(res.Kind, res.Outcome)
	if err == nil {
		rc.log.LogAttrs(ctx, slog.LevelDebug, "update handled", slog.Int64("update_id", u.UpdateID),
			slog.Int64("bot_id", int64(through)), slog.String("kind", res.Kind), slog.String("outcome", res.Outcome))
	}
	return res, err
}

// incoming is a private message from a human, as the handlers below see it: the bot that received it, the
// update's id (that bot's) and the message. For a tap or a block, the message stands for the user's act: its
// sender is the user, its chat the private chat (and, for a tap, its id the keyboard's message).
type incoming struct {
	bot bot.ID
	id  int64
	m   *messenger.Message
}

// logAttrs are the attributes of every line about the update: its id and its bot's, never the sender.
func (in incoming) logAttrs(attrs ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{slog.Int64("update_id", in.id), slog.Int64("bot_id", int64(in.bot))}, attrs...)
}

func (rc *Receiver) handle(ctx context.Context, through bot.ID, u messenger.Update) (Result, error) {
	switch u.Kind() {
	case messenger.KindMyChatMember:
		return rc.chatMember(ctx, incoming{bot: through, id: u.UpdateID}, u.MyChatMember)
	case messenger.KindCallbackQuery:
		return rc.tap(ctx, incoming{bot: through, id: u.UpdateID}, u.CallbackQuery)
	}
	m := u.Message
	if u.Kind() != messenger.KindMessage || m == nil {
		return Result{Kind: updateKindLabel(u.Kind()), Outcome: outcomeIgnored}, nil
	}
	// Linking and verification are private matters, and a command in a group would answer to everyone.
	if m.Chat.Type != messenger.ChatPrivate {
		return Result{Kind: kindGroupMessage, Outcome: outcomeIgnored}, nil
	}
	if m.From == nil || m.From.IsBot {
		return Result{Kind: kindOtherMessage, Outcome: outcomeIgnored}, nil
	}
	in := incoming{bot: through, id: u.UpdateID, m: m}
	if m.Contact != nil {
		return rc.contact(ctx, in)
	}
	if m.Text == "" {
		return Result{Kind: kindOtherMessage, Outcome: outcomeIgnored}, nil
	}
	name, args, isCommand := parseCommand(m.Text)
	switch {
	case !isCommand:
		return Result{Kind: kindText, Outcome: outcomeReplied}, rc.reply(ctx, in, unbranded(textUnknown))
	case name == "/start":
		return rc.start(ctx, in, args)
	case name == "/help":
		return rc.help(ctx, in)
	case name == "/stop":
		return rc.stopOrResume(ctx, in, consent.Stop)
	case name == "/resume":
		return rc.stopOrResume(ctx, in, consent.Resume)
	case strings.HasPrefix(name, "/dev_"):
		return rc.dev(ctx, in, name, args)
	}
	return Result{Kind: kindCommand, Outcome: outcomeReplied}, rc.reply(ctx, in, unbranded(textUnknown))
}

// help answers /help: as /start without a token in a chat not connected yet, without the invitation to
// connect it in one that is.
func (rc *Receiver) help(ctx context.Context, in incoming) (Result, error) {
	r := Result{Kind: kindCommand, Outcome: outcomeReplied}
	tenants, err := rc.store.ChatTenants(ctx, rc.chatUser(in))
	if err != nil {
		return r, fmt.Errorf("finding the chat's tenants for /help: %w", err)
	}
	if len(tenants) > 0 {
		return r, rc.reply(ctx, in, unbranded(textHelpLinked))
	}
	return r, rc.reply(ctx, in, unbranded(textStart))
}

// parseCommand splits "/name@bot args" into "/name" (lower case, without the bot's name) and the
// arguments. ok is false for text that is not a command.
func parseCommand(text string) (name, args string, ok bool) {
	if !strings.HasPrefix(text, "/") {
		return "", "", false
	}
	name, args = text, ""
	if i := strings.IndexFunc(text, unicode.IsSpace); i >= 0 {
		name, args = text[:i], strings.TrimSpace(text[i:])
	}
	if at := strings.IndexByte(name, '@'); at >= 0 {
		name = name[:at]
	}
	return strings.ToLower(name), args, true
}

// validToken: link tokens are base64url (43 characters for 32 bytes; the platform allows 64).
func validToken(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// start handles /start: with a token it links, without one it explains. A token links only through its
// tenant's bot (store.RedeemLinkToken), and the link is that bot's.
func (rc *Receiver) start(ctx context.Context, in incoming, args string) (Result, error) {
	r := Result{Kind: kindStart, Outcome: outcomeReplied}
	fields := strings.Fields(args)
	if len(fields) == 0 {
		return r, rc.reply(ctx, in, unbranded(textStart))
	}
	r.Outcome = outcomeRejected
	token := fields[0]
	if !validToken(token) {
		return r, rc.reply(ctx, in, linkReply(store.LinkResult{Outcome: store.LinkUnknown}))
	}
	effect, result := store.RedeemLinkToken(in.id,
		store.Redemption{Digest: sha256.Sum256([]byte(token)), MessengerUserID: in.m.From.ID, ChatID: in.m.Chat.ID, Bot: in.bot},
		func(res store.LinkResult) store.NewNotification { return rc.notification(in, linkReply(res)) })
	if err := rc.apply(ctx, in, effect); err != nil {
		return r, err
	}
	res := *result
	if res.Outcome == store.LinkLinked {
		r.Outcome = outcomeLinked
		// Never the tenant's user id nor the messenger account (docs/security.md): the update id ties the line
		// to the update.
		rc.log.LogAttrs(ctx, slog.LevelInfo, "account linked", in.logAttrs(
			slog.String("tenant_id", res.TenantID), slog.Bool("replaced_other_account", res.Replaced))...)
	} else {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "link token refused", in.logAttrs(
			slog.String("reason", string(res.Outcome)), slog.String("tenant_id", res.TenantID))...)
	}
	return r, nil
}

// contact handles a shared contact: only the sender's own contact completes verification, of the sessions
// of the sender's links made through the bot it was shared with.
func (rc *Receiver) contact(ctx context.Context, in incoming) (Result, error) {
	r := Result{Kind: kindContact, Outcome: outcomeRejected}
	m, c := in.m, in.m.Contact
	// A contact without user_id was typed in by hand; one with another user_id is somebody else's. Neither
	// proves the sender's number.
	if c.UserID == 0 || c.UserID != m.From.ID {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "contact refused: not the sender's own", in.logAttrs(
			slog.Bool("has_user_id", c.UserID != 0))...)
		return r, rc.reply(ctx, in, unbranded(textNotOwnContact))
	}
	e164, err := phone.Normalize(c.PhoneNumber)
	if err != nil {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "contact refused: unreadable phone number", in.logAttrs()...)
		return r, rc.reply(ctx, in, unbranded(textBadPhone))
	}
	share := store.ContactShare{MessengerUserID: m.From.ID, PhoneLast4: phone.Last4(e164), PhoneHash: rc.hasher.Sum(e164), Bot: in.bot}
	effect, result := store.CompleteVerifications(in.id, share, func(res store.VerificationResult) []store.NewNotification {
		msgs := verificationReplies(res)
		out := make([]store.NewNotification, len(msgs))
		for i, msg := range msgs {
			out[i] = rc.notification(in, msg)
		}
		return out
	})
	if err := rc.apply(ctx, in, effect); err != nil {
		return r, err
	}
	res := *result
	if len(res.Verified) > 0 {
		r.Outcome = outcomeVerified
	}
	for _, s := range res.Verified {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "phone verified", in.logAttrs(slog.String("tenant_id", s.TenantID))...)
	}
	if len(res.Verified) == 0 {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "contact refused: no pending verification", in.logAttrs(
			slog.Bool("expired", res.Expired != nil))...)
	}
	return r, nil
}

// reply queues one message to the sender's chat, once per update.
func (rc *Receiver) reply(ctx context.Context, in incoming, msg outbox.SystemMessage) error {
	return rc.apply(ctx, in, store.ReplyEffect(in.id, rc.notification(in, msg)))
}

// notification addresses msg to the chat the update came from, through the bot that received it.
func (rc *Receiver) notification(in incoming, msg outbox.SystemMessage) store.NewNotification {
	msg.ChatID = in.m.Chat.ID
	n := outbox.System(msg)
	n.Bot = in.bot
	return n
}

// removeKeyboard is the reply_markup that takes the contact button away once it has served.
var removeKeyboard = json.RawMessage(`{"remove_keyboard":true}`)
