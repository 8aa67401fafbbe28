package updates

import (
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/outbox"
	"github.com/heraldhq/herald/internal/store"
)

// The texts of every reply. A reply about a tenant's user is branded with the tenant's label (the token's
// or the session's snapshot); replies without a tenant context are not.
const (
	// textUnknown answers free text, unknown commands and /dev_* commands from anyone not allowed them: one
	// reply for all, so that nothing reveals that the developer commands exist.
	textUnknown = "Sorry, I did not understand that. To receive notifications here, open the link the app gave you."
	// textStart also answers /help.
	textStart = "Hello! I deliver notifications from apps you use. To connect this chat, open the link the app gave you. " +
		"Send /stop to stop notifications (from one app, or of one kind) and /resume to receive them again."
	// textHelpLinked answers /help in a chat that is connected already: telling it how to connect would
	// suggest something is wrong.
	textHelpLinked = "This chat is connected: I deliver notifications here from the apps you connected it to. " +
		"Send /stop to stop notifications (from one app, or of one kind) and /resume to receive them again. " +
		"To connect another app, open the link it gave you."

	textLinked         = "This chat is now connected. You will receive notifications here."
	textLinkedReplaced = "This chat is now connected and replaces the one connected before. You will receive notifications here; please verify your phone number again when the app asks."
	textLinkUnknown    = "This link is not valid. Please ask the app for a new link."
	textLinkExpired    = "This link has expired. Please ask the app for a new link."
	textLinkUsed       = "This link has already been used. If you want to connect again, please ask the app for a new link."
	// textLinkWrongBot answers a token redeemed in another bot than its tenant's (spec §11): the deep link the
	// app gave opens the right bot.
	textLinkWrongBot = "This link is not for this bot. Please open the link the app gave you again: it opens the chat it is meant for."

	textVerified         = "Thank you, your phone number is verified."
	textNotOwnContact    = "I can only verify your own phone number. Please tap the \"Share my phone number\" button instead of sending a contact."
	textBadPhone         = "I could not read that phone number. Please tap the \"Share my phone number\" button to share your own number."
	textNoSession        = "There is no phone verification waiting for you. Please start it in the app first."
	textSessionExpired   = "Your phone verification has expired. Please start it again in the app."
	textDevNotFound      = "No notification with that tracking id belongs to your tenants."
	textDevStatusUsage   = "Usage: /dev_status <tracking_id>"
	textDevPingFormat    = "pong: update %d received at %s, queued, and delivered by a worker like any notification."
	textDevStatsNone     = "none"
	textDevNoTenants     = "(none)"
	textDevStatsTitle    = "Notifications created in the last 24 hours, by status:"
	textDevWhoamiFormat  = "Your messenger user id: %d"
	textDevWhoamiAdmin   = "Platform admin: every tenant."
	textDevWhoamiTenants = "Developer of:"
)

// devHelp lists the developer commands; only allowed developers ever see it.
const devHelp = `Developer commands:
/dev_help - this list
/dev_whoami - your messenger id and the tenants you develop
/dev_stats - notifications of your tenants in the last 24 hours, by status
/dev_status <tracking_id> - delivery metadata of a notification of your tenants
/dev_ping - a reply that travels the whole delivery pipeline`

func unbranded(text string) outbox.SystemMessage { return outbox.SystemMessage{Body: text} }

func branded(tenantID, label, text string) outbox.SystemMessage {
	return outbox.SystemMessage{TenantID: tenantID, Body: brand.Render(label, text)}
}

// linkReply is the answer to a /start with a token.
func linkReply(res store.LinkResult) outbox.SystemMessage {
	switch res.Outcome {
	case store.LinkLinked:
		if res.Replaced {
			return branded(res.TenantID, res.Label, textLinkedReplaced)
		}
		return branded(res.TenantID, res.Label, textLinked)
	case store.LinkExpired:
		return branded(res.TenantID, res.Label, textLinkExpired)
	case store.LinkUsed:
		return branded(res.TenantID, res.Label, textLinkUsed)
	case store.LinkWrongBot:
		return branded(res.TenantID, res.Label, textLinkWrongBot)
	}
	return unbranded(textLinkUnknown)
}

// verificationReplies answers a contact share: one confirmation per completed session, each branded for its
// tenant, or one reply saying why nothing was completed. Each removes the contact keyboard, which has no
// use left.
func verificationReplies(res store.VerificationResult) []outbox.SystemMessage {
	var out []outbox.SystemMessage
	for _, s := range res.Verified {
		out = append(out, branded(s.TenantID, s.Label, textVerified))
	}
	switch {
	case len(out) > 0:
	case res.Expired != nil:
		out = append(out, branded(res.Expired.TenantID, res.Expired.Label, textSessionExpired))
	default:
		out = append(out, unbranded(textNoSession))
	}
	for i := range out {
		out[i].ReplyMarkup = removeKeyboard
	}
	return out
}
