package notification

import (
	"strconv"
	"strings"
)

// BotID names the bot a chat, a link or a notification belongs to: a bot's numeric id on the platform
// (getMe's id) for a tenant's own bot, or SharedBot. In PostgreSQL the shared bot is NULL (bot_id columns),
// in Go it is SharedBot; internal/bot calls the same type bot.ID.
type BotID int64

// SharedBot is the bot of HERALD_MESSENGER_BOT_TOKEN, the bot of every tenant without one of its own.
const SharedBot BotID = 0

// ChatKey is the partition key of a notification's envelope: the chat it goes to, of the bot it goes
// through ("chat/<id>" for the shared bot, "bot/<bot>/chat/<id>" for a tenant's own bot), so that all of one
// chat's messages — a tenant's notifications, another tenant's to the same messenger user through the same
// bot, and Herald's own system messages — share a partition and so one worker, which keeps them in order and
// paces the chat alone (internal/queue.NewOutgoing builds the envelopes; the worker's lanes read the chat
// back). A private chat's id is its user's id whatever the bot, so the bot is part of the key: the chats of
// one user with two bots are two chats, paced apart. The shared bot's keys are the keys of every envelope
// published before bots existed, so those keep their partition across an upgrade.
func ChatKey(bot BotID, chatID int64) string {
	chat := chatPrefix + strconv.FormatInt(chatID, 10)
	if bot == SharedBot {
		return chat
	}
	return botPrefix + strconv.FormatInt(int64(bot), 10) + "/" + chat
}

const (
	chatPrefix = "chat/"
	botPrefix  = "bot/"
)

// ParseChatKey returns the bot and the chat a ChatKey names, or false for any other key.
func ParseChatKey(key string) (BotID, int64, bool) {
	bot := SharedBot
	if rest, ok := strings.CutPrefix(key, botPrefix); ok {
		id, chat, ok := strings.Cut(rest, "/")
		if !ok {
			return 0, 0, false
		}
		n, err := strconv.ParseInt(id, 10, 64)
		// A bot's id is positive; 0 is the shared bot, whose key has no bot part.
		if err != nil || n <= 0 || strconv.FormatInt(n, 10) != id {
			return 0, 0, false
		}
		bot, key = BotID(n), chat
	}
	id, ok := strings.CutPrefix(key, chatPrefix)
	if !ok {
		return 0, 0, false
	}
	chat, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return bot, chat, true
}
