package notification

import (
	"regexp"
	"time"
)

// Replace and delete after send (spec v1-extensions §13): a notification with a replace_key is delivered by
// editing its key's message when that message may still be edited, and a delivered message may be
// deleted. The rules live here; the store renders them as SQL (the claim's choice of the message to edit,
// the deletion's guard) and the worker acts on them (internal/delivery/send).

// ReplaceKeyPattern is the rule of a send's replace_key.
var ReplaceKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// MessageWindow is how long after a message was sent Herald edits or deletes it: the platform lets a bot
// delete its messages for 48 hours (and Herald edits within the same window, so that a key's message is
// one the tenant can still delete). It runs from the message's first send: an edit does not restart it.
const MessageWindow = 48 * time.Hour

// How a delivered notification reached the chat (the resource's delivered_as).
const (
	DeliveredSent   = "sent"   // a new message (sendMessage)
	DeliveredEdited = "edited" // the key's message, edited (editMessageText)
)

// EditTarget is the message a claimed notification with a replace_key is to edit: its key's latest
// delivered message, in the same chat through the same bot, sent less than MessageWindow ago and not
// deleted (nor asked to be). nil: a new message.
type EditTarget struct {
	MessageID int64
	SentAt    time.Time // when the message was first sent: the edit keeps it (DeliveryResult.MessageSentAt)
}

// CodeSuperseded: a notification with a replace_key whose turn came after a notification with the same key
// accepted later had been delivered (it waited for a retry, the later one did not wait for it): delivering
// it now would replace the newer status with an older one. It fails without a call to the platform.
const (
	CodeSuperseded    = 1107
	SupersededMessage = "a later notification with the same replace_key was delivered first"
)

// KeyAheadSQL renders the condition that the notifications row e is a pending notification of n's
// replace_key accepted before n (the order of one key: §13 "delivered in the order accepted, edits
// included"). As AheadSQL's rule, only while e is pending — waiting for its first attempt, or in one: a
// retrying one holds nothing back (its new envelope queues behind n in the same lane), and a notification
// whose turn comes after a later one of its key was delivered is superseded instead (CodeSuperseded).
// Batch items share created_at; their tracking ids (UUIDv7, in the order of the batch) break the tie.
func KeyAheadSQL(e, n string) string {
	return n + `.replace_key IS NOT NULL AND ` + e + `.tenant_id = ` + n + `.tenant_id AND ` + e + `.user_id = ` + n + `.user_id
		AND ` + e + `.replace_key = ` + n + `.replace_key AND ` + e + `.status IN (` + literals([]Status{Queued, Delivering}) + `)
		AND (` + e + `.created_at, ` + e + `.tracking_id) < (` + n + `.created_at, ` + n + `.tracking_id)`
}

// KeyLaterDeliveredSQL renders the condition that the notifications row e is a delivered notification of
// n's replace_key accepted after n: n is superseded.
func KeyLaterDeliveredSQL(e, n string) string {
	return n + `.replace_key IS NOT NULL AND ` + e + `.tenant_id = ` + n + `.tenant_id AND ` + e + `.user_id = ` + n + `.user_id
		AND ` + e + `.replace_key = ` + n + `.replace_key AND ` + e + `.status = ` + Delivered.SQL() + `
		AND (` + e + `.created_at, ` + e + `.tracking_id) > (` + n + `.created_at, ` + n + `.tracking_id)`
}

// Why a message cannot be deleted (409 not_deletable), in the order they are checked.
const (
	NotDeletableUndelivered = "the notification was not delivered: there is no message to delete"
	NotDeletableTooOld      = "the message was sent more than 48 hours ago: the messaging platform no longer lets the bot delete it"
	NotDeletableDeleted     = "the message was deleted already, or its deletion is under way"
)
