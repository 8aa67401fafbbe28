package callback

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// payload is the body of every callback: {"type", "timestamp", "data"} (spec v1-extensions §7), in this
// order.
type payload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      any    `json:"data"`
}

// userData is the data of a user.* event: the user id, and what the event carries beyond it (§9:
// user.opted_out and user.opted_in's "category" and "by"), as the change recorded it.
func userData(userID string, extra []byte) (map[string]any, error) {
	data := map[string]any{}
	if len(extra) > 0 {
		if err := json.Unmarshal(extra, &data); err != nil {
			return nil, err
		}
	}
	data["user_id"] = userID
	return data, nil
}

// webhookID is the webhook-id of an event: one per event, the same at every endpoint and on every retry.
func webhookID(eventID string) string { return "evt_" + strings.ReplaceAll(eventID, "-", "") }

// render fills in the payload of each event claimed without one (its first attempt): data is the
// Notification resource as GET /v1/status shows it (read in one query for the batch) for notification.*,
// {"user_id", …} for user.*, {} for ping. A notification that no longer exists (purged) leaves its event
// without a payload: there is nothing to send.
func (s *Sender) render(ctx context.Context, evs []store.CallbackEvent) error {
	var ids []string
	for _, ev := range evs {
		if ev.Payload == nil && ev.TrackingID != "" {
			ids = append(ids, ev.TrackingID)
		}
	}
	var views map[string]store.TenantNotification
	if len(ids) > 0 {
		var err error
		if views, err = s.opts.Store.TenantNotifications(ctx, ids); err != nil {
			return err
		}
	}
	for i, ev := range evs {
		if ev.Payload != nil {
			continue
		}
		p := payload{Type: ev.Type, Timestamp: notification.Timestamp(ev.CreatedAt)}
		switch {
		case ev.TrackingID != "":
			v, ok := views[ev.TrackingID]
			if !ok || v.TenantID != ev.TenantID {
				continue // gone; never another tenant's
			}
			p.Data = v.Resource()
		case ev.UserID != "":
			data, err := userData(ev.UserID, ev.Data)
			if err != nil {
				return err
			}
			p.Data = data
		default:
			p.Data = struct{}{}
		}
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		evs[i].Payload = b
	}
	return nil
}
