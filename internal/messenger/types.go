// Package messenger is Herald's client for the messaging platform, the Telegram Bot API: the types of the
// parts Herald uses, a lean HTTP client, and the classification of delivery errors into the outcomes of the
// notification state machine.
//
// Field names are the Bot API's own (https://core.telegram.org/bots/api); only the fields Herald reads or
// writes are modelled.
package messenger

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Update kinds, as named by the Bot API (also the values of allowed_updates).
const (
	KindMessage       = "message"
	KindEditedMessage = "edited_message"
	KindCallbackQuery = "callback_query"
	KindMyChatMember  = "my_chat_member"
	KindChatMember    = "chat_member"
	// KindUnknown is reported for an update that carries no payload besides update_id.
	KindUnknown = "unknown"
)

// Chat types.
const (
	ChatPrivate    = "private"
	ChatGroup      = "group"
	ChatSupergroup = "supergroup"
	ChatChannel    = "channel"
)

// Update is one incoming update. At most one of the optional payloads is present; Kind tells which one, also
// for the kinds Herald does not model (so they can be acknowledged and ignored rather than mistaken for an
// empty message).
type Update struct {
	UpdateID      int64           `json:"update_id"`
	Message       *Message        `json:"message,omitempty"`
	EditedMessage *Message        `json:"edited_message,omitempty"`
	CallbackQuery json.RawMessage `json:"callback_query,omitempty"`
	MyChatMember  json.RawMessage `json:"my_chat_member,omitempty"`
	ChatMember    json.RawMessage `json:"chat_member,omitempty"`

	// kind is the name of the payload field found when the update was decoded.
	kind string
}

// Kind is the update's kind: "message", "edited_message", "my_chat_member", … (the Bot API field name of
// its payload), or KindUnknown when it carries none. For updates built in Go rather than decoded it is
// derived from the populated fields.
func (u *Update) Kind() string {
	if u.kind != "" {
		return u.kind
	}
	switch {
	case u.Message != nil:
		return KindMessage
	case u.EditedMessage != nil:
		return KindEditedMessage
	case u.CallbackQuery != nil:
		return KindCallbackQuery
	case u.MyChatMember != nil:
		return KindMyChatMember
	case u.ChatMember != nil:
		return KindChatMember
	}
	return KindUnknown
}

// ErrInvalidUpdate is wrapped by UnmarshalJSON when the body is not an object with an integer update_id.
var ErrInvalidUpdate = errors.New("invalid update")

// UnmarshalJSON decodes an update and records its kind. The body must be a JSON object with an integer
// update_id; anything else wraps ErrInvalidUpdate, so a webhook can answer 400 without further checks.
func (u *Update) UnmarshalJSON(b []byte) error {
	// One pass into raw fields finds the kind, including kinds without a field here; only the payloads
	// Herald models are decoded further.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidUpdate)
	}
	rawID, ok := fields["update_id"]
	if !ok {
		return fmt.Errorf("%w: missing update_id", ErrInvalidUpdate)
	}
	var id int64
	if err := json.Unmarshal(rawID, &id); err != nil || string(rawID) == "null" {
		return fmt.Errorf("%w: update_id is not an integer", ErrInvalidUpdate)
	}
	*u = Update{UpdateID: id}
	kinds := make([]string, 0, 1)
	for name, raw := range fields {
		if name == "update_id" || string(raw) == "null" {
			continue
		}
		kinds = append(kinds, name)
		var err error
		switch name {
		case KindMessage:
			err = json.Unmarshal(raw, &u.Message)
		case KindEditedMessage:
			err = json.Unmarshal(raw, &u.EditedMessage)
		case KindCallbackQuery:
			u.CallbackQuery = raw
		case KindMyChatMember:
			u.MyChatMember = raw
		case KindChatMember:
			u.ChatMember = raw
		}
		if err != nil {
			return fmt.Errorf("%w: field %s: %w", ErrInvalidUpdate, name, err)
		}
	}
	u.kind = KindUnknown
	if len(kinds) > 0 {
		// The platform sends exactly one payload; sorting keeps the choice stable if a forger sends more.
		slices.Sort(kinds)
		u.kind = kinds[0]
		if slices.Contains(kinds, KindMessage) {
			u.kind = KindMessage
		}
	}
	return nil
}

// ParseUpdate decodes one update, as a webhook receives it. Errors wrap ErrInvalidUpdate.
func ParseUpdate(body []byte) (Update, error) {
	var u Update
	if err := json.Unmarshal(body, &u); err != nil {
		if errors.Is(err, ErrInvalidUpdate) {
			return Update{}, err
		}
		return Update{}, fmt.Errorf("%w: %w", ErrInvalidUpdate, err)
	}
	return u, nil
}

// Message is an incoming or sent message.
type Message struct {
	MessageID int64           `json:"message_id"`
	From      *User           `json:"from,omitempty"`
	Chat      Chat            `json:"chat"`
	Date      int64           `json:"date"` // Unix seconds
	Text      string          `json:"text,omitempty"`
	Entities  []MessageEntity `json:"entities,omitempty"`
	Contact   *Contact        `json:"contact,omitempty"`
}

// MessageEntity marks a span of a message's text, e.g. a bot_command. Offsets are in UTF-16 code units.
type MessageEntity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

// User is a platform user or bot.
type User struct {
	ID           int64  `json:"id"`
	IsBot        bool   `json:"is_bot"`
	FirstName    string `json:"first_name"`
	LastName     string `json:"last_name,omitempty"`
	Username     string `json:"username,omitempty"`
	LanguageCode string `json:"language_code,omitempty"`
}

// Chat is the conversation a message belongs to. For a private chat, ID equals the other user's id.
type Chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"` // ChatPrivate, ChatGroup, ChatSupergroup or ChatChannel
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
}

// Contact is a shared phone contact. UserID is the platform user the contact belongs to, 0 when the
// platform does not know it (a contact typed in by hand). Only a contact whose UserID equals the sender's id
// proves the sender's own number.
type Contact struct {
	PhoneNumber string `json:"phone_number"`
	FirstName   string `json:"first_name"`
	LastName    string `json:"last_name,omitempty"`
	UserID      int64  `json:"user_id,omitempty"`
}

// KeyboardButton is one button of a reply keyboard. With RequestContact the client shares the user's own
// phone number when pressed (private chats only).
type KeyboardButton struct {
	Text           string `json:"text"`
	RequestContact bool   `json:"request_contact,omitempty"`
}

// ReplyKeyboardMarkup replaces the user's keyboard with custom buttons.
type ReplyKeyboardMarkup struct {
	Keyboard              [][]KeyboardButton `json:"keyboard"`
	IsPersistent          bool               `json:"is_persistent,omitempty"`
	ResizeKeyboard        bool               `json:"resize_keyboard,omitempty"`
	OneTimeKeyboard       bool               `json:"one_time_keyboard,omitempty"`
	InputFieldPlaceholder string             `json:"input_field_placeholder,omitempty"`
}

// ReplyKeyboardRemove removes a custom keyboard. RemoveKeyboard must be true.
type ReplyKeyboardRemove struct {
	RemoveKeyboard bool `json:"remove_keyboard"`
}

// ContactRequestKeyboard is the reply_markup of a verification prompt: a single button that shares the
// user's own contact.
func ContactRequestKeyboard(buttonText string) json.RawMessage {
	return mustJSON(ReplyKeyboardMarkup{
		Keyboard:        [][]KeyboardButton{{{Text: buttonText, RequestContact: true}}},
		ResizeKeyboard:  true,
		OneTimeKeyboard: true,
	})
}

// RemoveKeyboard is the reply_markup that removes a custom keyboard, e.g. after verification.
func RemoveKeyboard() json.RawMessage {
	return mustJSON(ReplyKeyboardRemove{RemoveKeyboard: true})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with fixed, marshalable types
	}
	return b
}

// ResponseParameters explains some failed requests.
type ResponseParameters struct {
	MigrateToChatID int64 `json:"migrate_to_chat_id,omitempty"`
	RetryAfter      int   `json:"retry_after,omitempty"` // seconds
}

// Response is the envelope of every Bot API answer.
type Response struct {
	OK          bool                `json:"ok"`
	Result      json.RawMessage     `json:"result,omitempty"`
	ErrorCode   int                 `json:"error_code,omitempty"`
	Description string              `json:"description,omitempty"`
	Parameters  *ResponseParameters `json:"parameters,omitempty"`
}

// SendMessageRequest is the part of sendMessage Herald uses. Text is sent without parse_mode, so tenant
// text is never interpreted as markup: a formatted message (spec v1-extensions §10) comes as Text and its
// Entities, parsed and validated at the door (internal/richtext), offsets in UTF-16 code units.
// ReplyMarkup is one of the markup types above (an inline keyboard, a reply keyboard), already encoded.
type SendMessageRequest struct {
	ChatID      int64           `json:"chat_id"`
	Text        string          `json:"text"`
	Entities    json.RawMessage `json:"entities,omitempty"`
	ReplyMarkup json.RawMessage `json:"reply_markup,omitempty"`
	// DisableNotification: delivered without a sound (a send's silent); ProtectContent: the recipient
	// cannot forward or save it; LinkPreviewOptions (nil: the platform's default, a preview) turns the
	// link preview off (a send's link_preview false).
	DisableNotification bool                `json:"disable_notification,omitempty"`
	ProtectContent      bool                `json:"protect_content,omitempty"`
	LinkPreviewOptions  *LinkPreviewOptions `json:"link_preview_options,omitempty"`
	// AllowPaidBroadcast lets the send past the platform's free 30 messages a second, paid for by the bot's
	// owner (spec §11: a tenant's bot with paidBroadcast, on its sends past that rate).
	AllowPaidBroadcast bool `json:"allow_paid_broadcast,omitempty"`
}

// SetWebhookRequest is the body of setWebhook.
type SetWebhookRequest struct {
	URL                string   `json:"url"`
	SecretToken        string   `json:"secret_token,omitempty"`
	AllowedUpdates     []string `json:"allowed_updates,omitempty"`
	DropPendingUpdates bool     `json:"drop_pending_updates,omitempty"`
	MaxConnections     int      `json:"max_connections,omitempty"`
}

// DeleteWebhookRequest is the body of deleteWebhook.
type DeleteWebhookRequest struct {
	DropPendingUpdates bool `json:"drop_pending_updates,omitempty"`
}

// GetUpdatesRequest is the body of getUpdates.
type GetUpdatesRequest struct {
	Offset         int64    `json:"offset,omitempty"`
	Limit          int      `json:"limit,omitempty"`
	Timeout        int      `json:"timeout,omitempty"` // seconds of long polling
	AllowedUpdates []string `json:"allowed_updates,omitempty"`
}

// WebhookInfo is the result of getWebhookInfo.
type WebhookInfo struct {
	URL                string   `json:"url"`
	HasCustomCert      bool     `json:"has_custom_certificate"`
	PendingUpdateCount int      `json:"pending_update_count"`
	LastErrorDate      int64    `json:"last_error_date,omitempty"`
	LastErrorMessage   string   `json:"last_error_message,omitempty"`
	MaxConnections     int      `json:"max_connections,omitempty"`
	AllowedUpdates     []string `json:"allowed_updates,omitempty"`
}
