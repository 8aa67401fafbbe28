package messenger

import (
	"context"
	"encoding/json"
)

// The parts of the Bot API behind /stop and /resume (spec v1-extensions §9): a user's block of the bot
// (my_chat_member), inline keyboards with callback buttons, the tap (callback_query), its answer and the
// edit of the message the keyboard was on.

// Chat member statuses Herald reads in a my_chat_member update of a private chat.
const (
	MemberKicked = "kicked" // the user blocked the bot
	MemberMember = "member" // the user (re)started or unblocked the bot
)

// ChatMemberUpdated is the payload of a my_chat_member update: the bot's membership of a chat changed (in a
// private chat: the user blocked or unblocked the bot).
type ChatMemberUpdated struct {
	Chat          Chat       `json:"chat"`
	From          User       `json:"from"`
	Date          int64      `json:"date"`
	OldChatMember ChatMember `json:"old_chat_member"`
	NewChatMember ChatMember `json:"new_chat_member"`
}

// ChatMember is one member's status in a chat (for my_chat_member: the bot's).
type ChatMember struct {
	Status string `json:"status"`
	User   User   `json:"user"`
}

// The keyboard types (InlineKeyboardButton, InlineKeyboardMarkup) are in keyboard.go: /stop's callback
// buttons and the tenants' URL buttons are the same platform type.

// MaxCallbackData is the platform's limit of a button's callback_data, in bytes.
const MaxCallbackData = 64

// CallbackQuery is the payload of a callback_query update: a user tapped a callback button. Message is the
// bot's message the button is on (absent when the platform no longer has it).
type CallbackQuery struct {
	ID      string   `json:"id"`
	From    User     `json:"from"`
	Message *Message `json:"message,omitempty"`
	Data    string   `json:"data,omitempty"`
}

// AnswerCallbackQueryRequest is the body of answerCallbackQuery: the notice the user sees after a tap.
type AnswerCallbackQueryRequest struct {
	CallbackQueryID string `json:"callback_query_id"`
	Text            string `json:"text,omitempty"`
	ShowAlert       bool   `json:"show_alert,omitempty"`
}

// EditMessageTextRequest is the body of editMessageText for a message the bot sent to a chat: the new
// text, its entities, inline keyboard (an InlineKeyboardMarkup as JSON) and link preview. A ReplyMarkup
// left out takes the message's inline keyboard away.
type EditMessageTextRequest struct {
	ChatID             int64               `json:"chat_id"`
	MessageID          int64               `json:"message_id"`
	Text               string              `json:"text"`
	Entities           json.RawMessage     `json:"entities,omitempty"`
	ReplyMarkup        json.RawMessage     `json:"reply_markup,omitempty"`
	LinkPreviewOptions *LinkPreviewOptions `json:"link_preview_options,omitempty"`
}

// DeleteMessageRequest is the body of deleteMessage.
type DeleteMessageRequest struct {
	ChatID    int64 `json:"chat_id"`
	MessageID int64 `json:"message_id"`
}

// AnswerCallbackQuery answers a tap, once; the platform expects it within seconds.
func (c *Client) AnswerCallbackQuery(ctx context.Context, req AnswerCallbackQueryRequest) error {
	var ok bool
	return c.call(ctx, "answerCallbackQuery", req, &ok, 0)
}

// EditMessageText replaces the text (and the inline keyboard) of a message the bot sent.
func (c *Client) EditMessageText(ctx context.Context, req EditMessageTextRequest) error {
	var m struct {
		MessageID int64 `json:"message_id"`
	}
	return c.call(ctx, "editMessageText", req, &m, 0)
}

// DeleteMessage deletes a message the bot sent (spec v1-extensions §13); the platform lets a bot do so for
// 48 hours.
func (c *Client) DeleteMessage(ctx context.Context, req DeleteMessageRequest) error {
	var ok bool
	return c.call(ctx, "deleteMessage", req, &ok, 0)
}
