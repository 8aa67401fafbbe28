package notification

import "strconv"

// The order of one chat's messages across kinds and priorities (docs/delivery.md, "Ordering"). Within one
// priority topic a chat's messages go one at a time in the order accepted (one Kafka key, one lane); the
// two topics are read apart, so without a rule a tenant's normal notification could reach the chat before
// Herald's system message accepted earlier — "Your order has shipped", sent on the user.verified callback,
// before "Thank you, your phone number is verified" (issue 42). The rule:
//
//   - a system message goes before every tenant notification to its chat accepted after it;
//   - a high-priority notification (HighPriority and above) goes before every normal one to its chat
//     accepted after it (one accepted later still overtakes the normal ones waiting when it reaches the
//     chat's turn first: its topic is served first, but it does not hold them back);
//
// held while the earlier message is pending — waiting for its first attempt, or in one. One that is
// retrying, or scheduled, holds nothing back: holding a chat's later messages behind a failing one would
// be worse (the same rule as within a topic). The claim applies it (store.ClaimDeliveryInOrder); a worker
// whose notification is held back waits and claims again, up to a bound after which it sends anyway (an
// earlier message whose envelope was lost waits for the redrive, minutes).

// HighPriority is the priority from which a notification is high: its own topic, and the rule above.
const HighPriority = 7

// AheadSQL renders the condition that the notifications row e is a pending message ahead of the row n in
// n's chat (the rule above). The index notifications_ahead_idx (migration 00019) holds exactly the rows
// the first lines select, so the check is one probe of a small index.
func AheadSQL(e, n string) string {
	return e + `.chat_id = ` + n + `.chat_id AND ` + e + `.status IN (` + literals([]Status{Queued, Delivering}) + `)
		AND (` + e + `.kind = ` + KindSystemSQL + ` OR ` + e + `.priority >= ` + highPrioritySQL + `)
		AND ` + e + `.bot_id IS NOT DISTINCT FROM ` + n + `.bot_id AND ` + e + `.tracking_id <> ` + n + `.tracking_id
		AND ` + n + `.kind = ` + KindTenantSQL + ` AND ` + e + `.created_at < ` + n + `.created_at
		AND (` + e + `.kind = ` + KindSystemSQL + ` OR ` + n + `.priority < ` + highPrioritySQL + `)`
}

var highPrioritySQL = strconv.Itoa(HighPriority)
