package updates

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"unicode"

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

// Handle acts on one update; the webhook and the poller share it. A repeated update_id is acknowledged
// without effect. An error means nothing took effect and the update may be retried (IsTransient tells
// whether a retry can help).
func (rc *Receiver) Handle(ctx context.Context, u messenger.Update) (Result, error) {
	res, err := rc.handle(ctx, u)
	switch {
	case errors.Is(err, store.ErrUpdateProcessed):
		res.Outcome, err = outcomeDuplicate, nil
	case err != nil:
		res.Outcome = outcomeError
		rc.log.LogAttrs(ctx, slog.LevelError, "handling an update failed", slog.Int64("update_id", u.UpdateID),
			slog.String("kind", res.Kind), slog.Bool("transient", IsTransient(err)), slog.Any("err", err))
	}
	observe(res.Kind, res.Outcome)
	if err == nil {
		rc.log.LogAttrs(ctx, slog.LevelDebug, "update handled", slog.Int64("update_id", u.UpdateID),
			slog.String("kind", res.Kind), slog.String("outcome", res.Outcome))
	}
	return res, err
}

func (rc *Receiver) handle(ctx context.Context, u messenger.Update) (Result, error) {
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
	if m.Contact != nil {
		return rc.contact(ctx, u.UpdateID, m)
	}
	if m.Text == "" {
		return Result{Kind: kindOtherMessage, Outcome: outcomeIgnored}, nil
	}
	name, args, isCommand := parseCommand(m.Text)
	switch {
	case !isCommand:
		return Result{Kind: kindText, Outcome: outcomeReplied}, rc.reply(ctx, u.UpdateID, m, unbranded(textUnknown))
	case name == "/start":
		return rc.start(ctx, u.UpdateID, m, args)
	case strings.HasPrefix(name, "/dev_"):
		return rc.dev(ctx, u.UpdateID, m, name, args)
	}
	return Result{Kind: kindCommand, Outcome: outcomeReplied}, rc.reply(ctx, u.UpdateID, m, unbranded(textUnknown))
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

// start handles /start: with a token it links, without one it explains.
func (rc *Receiver) start(ctx context.Context, updateID int64, m *messenger.Message, args string) (Result, error) {
	r := Result{Kind: kindStart, Outcome: outcomeReplied}
	fields := strings.Fields(args)
	if len(fields) == 0 {
		return r, rc.reply(ctx, updateID, m, unbranded(textStart))
	}
	r.Outcome = outcomeRejected
	token := fields[0]
	if !validToken(token) {
		return r, rc.reply(ctx, updateID, m, linkReply(store.LinkResult{Outcome: store.LinkUnknown}))
	}
	effect, result := store.RedeemLinkToken(updateID,
		store.Redemption{Digest: sha256.Sum256([]byte(token)), MessengerUserID: m.From.ID, ChatID: m.Chat.ID},
		func(res store.LinkResult) store.NewNotification { return rc.notification(m, linkReply(res)) })
	if err := rc.apply(ctx, m.From.ID, effect); err != nil {
		return r, err
	}
	res := *result
	if res.Outcome == store.LinkLinked {
		r.Outcome = outcomeLinked
		// Never the tenant's user id nor the messenger account (docs/security.md): the update id ties the line
		// to the update.
		rc.log.LogAttrs(ctx, slog.LevelInfo, "account linked", slog.Int64("update_id", updateID),
			slog.String("tenant_id", res.TenantID), slog.Bool("replaced_other_account", res.Replaced),
			slog.Int("notifications_unlinked", res.Unlinked))
	} else {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "link token refused", slog.Int64("update_id", updateID),
			slog.String("reason", string(res.Outcome)), slog.String("tenant_id", res.TenantID))
	}
	return r, nil
}

// contact handles a shared contact: only the sender's own contact completes verification.
func (rc *Receiver) contact(ctx context.Context, updateID int64, m *messenger.Message) (Result, error) {
	r := Result{Kind: kindContact, Outcome: outcomeRejected}
	c := m.Contact
	// A contact without user_id was typed in by hand; one with another user_id is somebody else's. Neither
	// proves the sender's number.
	if c.UserID == 0 || c.UserID != m.From.ID {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "contact refused: not the sender's own", slog.Int64("update_id", updateID),
			slog.Bool("has_user_id", c.UserID != 0))
		return r, rc.reply(ctx, updateID, m, unbranded(textNotOwnContact))
	}
	e164, err := phone.Normalize(c.PhoneNumber)
	if err != nil {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "contact refused: unreadable phone number", slog.Int64("update_id", updateID))
		return r, rc.reply(ctx, updateID, m, unbranded(textBadPhone))
	}
	share := store.ContactShare{MessengerUserID: m.From.ID, PhoneLast4: phone.Last4(e164), PhoneHash: rc.hasher.Sum(e164)}
	effect, result := store.CompleteVerifications(updateID, share, func(res store.VerificationResult) []store.NewNotification {
		msgs := verificationReplies(res)
		out := make([]store.NewNotification, len(msgs))
		for i, msg := range msgs {
			out[i] = rc.notification(m, msg)
		}
		return out
	})
	if err := rc.apply(ctx, m.From.ID, effect); err != nil {
		return r, err
	}
	res := *result
	if len(res.Verified) > 0 {
		r.Outcome = outcomeVerified
	}
	for _, s := range res.Verified {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "phone verified", slog.Int64("update_id", updateID),
			slog.String("tenant_id", s.TenantID))
	}
	if len(res.Verified) == 0 {
		rc.log.LogAttrs(ctx, slog.LevelInfo, "contact refused: no pending verification", slog.Int64("update_id", updateID),
			slog.Bool("expired", res.Expired != nil))
	}
	return r, nil
}

// reply queues one message to the sender's chat, once per update.
func (rc *Receiver) reply(ctx context.Context, updateID int64, m *messenger.Message, msg outbox.SystemMessage) error {
	return rc.apply(ctx, m.From.ID, store.ReplyEffect(updateID, rc.notification(m, msg)))
}

// notification addresses msg to the chat the update came from.
func (rc *Receiver) notification(m *messenger.Message, msg outbox.SystemMessage) store.NewNotification {
	msg.ChatID = m.Chat.ID
	return outbox.System(msg)
}

// removeKeyboard is the reply_markup that takes the contact button away once it has served.
var removeKeyboard = json.RawMessage(`{"remove_keyboard":true}`)
