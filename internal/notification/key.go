package notification

import (
	"strconv"
	"strings"
)

// ChatKey is the partition key of a notification's envelope: the chat it goes to ("chat/<id>"), so that all
// of one chat's messages — a tenant's notifications, another tenant's to the same messenger user, and
// Herald's own system messages — share a partition and so one worker, which keeps them in order and paces
// the chat alone (internal/queue.NewOutgoing builds the envelopes; the worker's lanes read the chat back).
func ChatKey(chatID int64) string { return chatPrefix + strconv.FormatInt(chatID, 10) }

const chatPrefix = "chat/"

// ParseChatKey returns the chat a ChatKey names, or false for any other key.
func ParseChatKey(key string) (int64, bool) {
	id, ok := strings.CutPrefix(key, chatPrefix)
	if !ok {
		return 0, false
	}
	chat, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0, false
	}
	return chat, true
}
