package consent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/heraldhq/herald/internal/brand"
)

// The texts of what a choice did. They are rendered here, below the store, so that the store can insert
// the reply in the update's own transaction from the result it just resolved, without calling back into
// the webhook's handler.
const (
	textStoppedFormat = "Stopped: %s. You will not receive these notifications here. Send /resume to receive them again."
	textResumedFormat = "Resumed: %s. You will receive these notifications here again."
	// textNothingChanged answers a choice whose tenants the chat is no longer connected to.
	textNothingChanged = "Nothing changed: this chat is no longer connected to that app."
)

// Message is a reply's tenant (empty: a message about several tenants, or none, belongs to none) and its
// branded body.
type Message struct {
	TenantID string
	Body     string
}

// Outcome says what res stopped or resumed, branded with the labels (by tenant id) of its tenants.
func Outcome(res Result, labels map[string]string) Message {
	if len(res.Choices) == 0 {
		return Message{Body: textNothingChanged}
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
	if res.Kind == Resume {
		format = textResumedFormat
	}
	return BrandedFor(ids, labels, fmt.Sprintf(format, JoinNames(items)))
}

// BrandedFor brands text for the tenants (in this order): one tenant's label, or each one's named ("A
// message from Acme, Globex and Initech"). A message about several tenants belongs to none of them.
func BrandedFor(tenantIDs []string, labels map[string]string, text string) Message {
	names := make([]string, len(tenantIDs))
	for i, id := range tenantIDs {
		names[i] = labels[id]
	}
	msg := Message{Body: brand.Render(JoinNames(names), text)}
	if len(tenantIDs) == 1 {
		msg.TenantID = tenantIDs[0]
	}
	return msg
}

// JoinNames is "A", "A and B", "A, B and C".
func JoinNames(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Labels maps each tenant's id to its label.
func Labels(tenants []Tenant) map[string]string {
	out := make(map[string]string, len(tenants))
	for _, t := range tenants {
		out[t.TenantID] = t.Label
	}
	return out
}
