// Package resource renders the tenant-facing resources, once, for every place that shows them: the /v1
// answers (internal/ingress) and the payloads of status callbacks (internal/callback). A field added to a
// resource here appears in both.
package resource

import (
	"time"

	"github.com/heraldhq/herald/internal/store"
)

// Timestamp renders a time as RFC 3339 in UTC with millisecond precision, the form of every timestamp
// Herald shows.
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// OptionalTimestamp is Timestamp for a time that may be absent (null).
func OptionalTimestamp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Timestamp(*t)
	return &s
}

// Notification is the Notification resource: the spec's fields, then the v1 extensions' (§2). Never the
// body.
type Notification struct {
	TrackingID         string            `json:"tracking_id"`
	UserID             string            `json:"user_id"`
	Priority           int               `json:"priority"`
	Status             string            `json:"status"`
	Attempts           int               `json:"attempts"`
	CreatedAt          string            `json:"created_at"`
	UpdatedAt          string            `json:"updated_at"`
	MessengerMessageID *string           `json:"messenger_message_id"`
	LastErrorCode      int               `json:"last_error_code"`
	LastErrorMessage   *string           `json:"last_error_message"`
	Metadata           map[string]string `json:"metadata"`
	SendAt             *string           `json:"send_at"`
	ExpiresAt          *string           `json:"expires_at"`
	DeliveredAt        *string           `json:"delivered_at"`
	NextAttemptAt      *string           `json:"next_attempt_at"`
}

// NewNotification renders a notification's stored metadata as the resource.
func NewNotification(v store.NotificationView) Notification {
	metadata := v.Metadata
	if metadata == nil {
		metadata = map[string]string{} // {} when none, never null
	}
	return Notification{
		TrackingID: v.TrackingID, UserID: v.UserID, Priority: v.Priority, Status: string(v.Status), Attempts: v.Attempts,
		CreatedAt: Timestamp(v.CreatedAt), UpdatedAt: Timestamp(v.UpdatedAt), MessengerMessageID: v.MessengerMessageID,
		LastErrorCode: v.LastErrorCode, LastErrorMessage: v.LastErrorMessage, Metadata: metadata,
		SendAt: OptionalTimestamp(v.SendAt), ExpiresAt: OptionalTimestamp(v.ExpiresAt),
		DeliveredAt: OptionalTimestamp(v.DeliveredAt), NextAttemptAt: OptionalTimestamp(v.NextAttemptAt),
	}
}
