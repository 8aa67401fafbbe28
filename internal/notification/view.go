package notification

import (
	"cmp"
	"time"
)

// View is the tenant-visible metadata of a notification (never the body), as the store reads it.
type View struct {
	TrackingID         string
	UserID             string
	Priority           int
	Status             Status
	Attempts           int
	CreatedAt          time.Time
	UpdatedAt          time.Time
	MessengerMessageID *string
	LastErrorCode      int
	LastErrorMessage   *string
	Metadata           map[string]string // never nil: empty when none
	SendAt             *time.Time
	ExpiresAt          *time.Time
	DeliveredAt        *time.Time
	NextAttemptAt      *time.Time   // when a retry is due; set only while retrying
	Category           *string      // the send's category (§9); nil when it named none
	Format             string       // FormatText or FormatHTML (§10); "" reads as FormatText
	Template           *TemplateRef // the template it was rendered from (§12); nil when sent without one
	ReplaceKey         *string      // the send's replace_key (§13); nil when none
	DeliveredAs        *string      // DeliveredSent or DeliveredEdited once delivered, nil before
	MessageDeletedAt   *time.Time   // when its message was deleted (DELETE …/message, §13); nil when not
	DigestKey          *string      // the send's digest key (§14); nil when it named none
	DigestSize         *int         // the items of the digest's message it went in (§14); nil until gathered
}

// TemplateRef names what a templated notification was rendered from (§12): the template's name, the
// version and the locale chosen at acceptance.
type TemplateRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Locale  string `json:"locale"`
}

// Resource is the contract's Notification resource, rendered once for every place that shows it: the /v1
// answers (internal/ingress) and the payloads of status callbacks (internal/callback). A field added here
// appears in both. The spec's fields, then the v1 extensions' (§2, §9, §10, §12, §13, §14); never the body.
type Resource struct {
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
	Category           *string           `json:"category"`
	Format             string            `json:"format"`
	Template           *TemplateRef      `json:"template"`
	ReplaceKey         *string           `json:"replace_key"`
	DeliveredAs        *string           `json:"delivered_as"`
	MessageDeletedAt   *string           `json:"message_deleted_at"`
	DigestKey          *string           `json:"digest_key"`
	DigestSize         *int              `json:"digest_size"`
}

// Resource renders the view as the resource.
func (v View) Resource() Resource {
	metadata := v.Metadata
	if metadata == nil {
		metadata = map[string]string{} // {} when none, never null
	}
	return Resource{
		TrackingID: v.TrackingID, UserID: v.UserID, Priority: v.Priority, Status: string(v.Status), Attempts: v.Attempts,
		CreatedAt: Timestamp(v.CreatedAt), UpdatedAt: Timestamp(v.UpdatedAt), MessengerMessageID: v.MessengerMessageID,
		LastErrorCode: v.LastErrorCode, LastErrorMessage: v.LastErrorMessage, Metadata: metadata,
		SendAt: OptionalTimestamp(v.SendAt), ExpiresAt: OptionalTimestamp(v.ExpiresAt),
		DeliveredAt: OptionalTimestamp(v.DeliveredAt), NextAttemptAt: OptionalTimestamp(v.NextAttemptAt),
		Category: v.Category, Format: cmp.Or(v.Format, FormatText), Template: v.Template,
		ReplaceKey: v.ReplaceKey, DeliveredAs: v.DeliveredAs, MessageDeletedAt: OptionalTimestamp(v.MessageDeletedAt),
		DigestKey: v.DigestKey, DigestSize: v.DigestSize,
	}
}

// Timestamp renders a time as RFC 3339 in UTC with millisecond precision, the form of every timestamp
// Herald shows (the resource's, and those of the other answers and of the dev console).
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// OptionalTimestamp is Timestamp for a time that may be absent (null).
func OptionalTimestamp(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Timestamp(*t)
	return &s
}
