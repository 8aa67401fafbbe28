package updates

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/heraldhq/herald/internal/messenger"
)

// updatesTotal counts updates by kind and outcome. Both label sets are closed (the constants below): an
// update's kind comes from the sender, so it is mapped to a known name or "other", never copied.
var updatesTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "herald_webhook_updates_total",
	Help: "Messenger updates received (webhook or polling), by kind and outcome.",
}, []string{"kind", "outcome"})

// Kinds: what an update is, as far as Herald is concerned.
const (
	kindNone         = "none"          // rejected before it was parsed (unauthorized, malformed)
	kindStart        = "start"         // /start with or without a token
	kindContact      = "contact"       // a shared contact
	kindDevCommand   = "dev_command"   // /dev_*
	kindCommand      = "command"       // any other /command
	kindText         = "text"          // text that is not a command
	kindGroupMessage = "group_message" // a message outside a private chat
	kindOtherMessage = "other_message" // a private message without text or contact (sticker, photo, …)
	kindOther        = "other"         // an update kind Herald does not model
)

// Outcomes.
const (
	outcomeLinked       = "linked"       // an account was linked
	outcomeVerified     = "verified"     // at least one phone verification completed
	outcomeRejected     = "rejected"     // the request could not be honoured (bad token, foreign contact, …); a reply says why
	outcomeReplied      = "replied"      // answered (explanation, developer command)
	outcomeRefused      = "refused"      // a /dev_* command from someone not allowed: answered as an unknown command
	outcomeIgnored      = "ignored"      // acknowledged, nothing done
	outcomeDuplicate    = "duplicate"    // the update_id was handled before
	outcomeInvalid      = "invalid"      // 400
	outcomeUnauthorized = "unauthorized" // 401
	outcomeError        = "error"        // storing or queueing failed; the platform retries
)

// updateKindLabel maps a non-message update kind to a label value.
func updateKindLabel(kind string) string {
	switch kind {
	case messenger.KindEditedMessage, messenger.KindCallbackQuery, messenger.KindMyChatMember,
		messenger.KindChatMember, messenger.KindUnknown:
		return kind
	}
	return kindOther
}

func observe(kind, outcome string) { updatesTotal.WithLabelValues(kind, outcome).Inc() }
