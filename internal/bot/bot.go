// Package bot is a tenant's own bot (spec v1-extensions §11): its registration with the platform (Register:
// getMe, then setWebhook with a secret of its own), its token sealed at rest under HERALD_BOT_TOKEN_KEY, and
// the Registry the webhook and the workers read the bots from (a cache of PostgreSQL's bots table, with a
// Bot API client per bot). The operator and the admin CLI register; store.SetTenantBot then makes a tenant
// send through the bot.
//
// The shared bot (HERALD_MESSENGER_BOT_TOKEN) is Shared, the bot of every tenant without one of its own: it
// has no row, and its token and webhook secret stay in the configuration.
package bot

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/signing"
)

// ID is a bot's numeric id on the platform (getMe's id), or Shared. It is notification.BotID: the lifecycle,
// the store and the partition key name bots by it too.
type ID = notification.BotID

// Shared is the shared bot.
const Shared = notification.SharedBot

// ParseID reads a bot id as a webhook path carries it: a positive decimal number, written without a sign or
// leading zeros (so that each bot has one path).
func ParseID(s string) (ID, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return ID(n), true
}

// WebhookPathPrefix is the path of a bot's webhook route without the bot's id: the platform POSTs a bot's
// updates to HERALD_PUBLIC_URL + WebhookPath(id). The shared bot keeps /messenger/webhook.
const WebhookPathPrefix = "/messenger/webhook/"

// WebhookPath is the path of bot id's webhook route.
func WebhookPath(id ID) string { return WebhookPathPrefix + strconv.FormatInt(int64(id), 10) }

// AllowedUpdates are the update kinds a bot's webhook is registered for (§9, §11).
var AllowedUpdates = []string{messenger.KindMessage, messenger.KindMyChatMember, messenger.KindCallbackQuery}

// Bot is a tenant's own bot as the webhook and the workers see it (Registry): never its token or secret.
type Bot struct {
	ID       ID
	Username string
	// RateLimit is the bot's messages per second; 0: the workers' HERALD_MESSENGER_RATE_LIMIT.
	RateLimit int
	// PaidBroadcast: sends past the platform's free rate (FreeRate) carry allow_paid_broadcast, up to
	// RateLimit.
	PaidBroadcast bool
	State         botstate.State
	StateMessage  string
}

// FreeRate is what a bot may send per second without paying (the platform's limit): past it, only sends
// with allow_paid_broadcast of a bot allowed it go through.
const FreeRate = 30

// Errors of Register and of the tokens. Each is wrapped with what happened, never with the token.
var (
	// ErrTokenInvalid: the platform refused the token (getMe answered 401 or 404), or it is not a bot token
	// at all. The tenant must give another.
	ErrTokenInvalid = errors.New("the messaging platform refused the bot token")
	// ErrWebhookFailed: the platform refused setWebhook (HERALD_PUBLIC_URL is not a URL it accepts).
	ErrWebhookFailed = errors.New("the messaging platform refused the bot's webhook")
	// ErrTransient: the platform could not be reached, or asked to wait (timeout, network, 429, 5xx):
	// registering again later may succeed.
	ErrTransient = errors.New("the messaging platform could not be reached")
	// ErrNotConfigured: HERALD_BOT_TOKEN_KEY or HERALD_PUBLIC_URL is not set, so no bot can be registered.
	ErrNotConfigured = errors.New("tenants' own bots are not configured")
	// ErrTokenUnavailable: a bot's sealed token does not open under HERALD_BOT_TOKEN_KEY (sealed under a key
	// that is no longer listed, or altered).
	ErrTokenUnavailable = errors.New("the bot's token does not open under HERALD_BOT_TOKEN_KEY")
)

// MaxTokenLength bounds a token: the platform's are about 46 characters.
const MaxTokenLength = 256

// CheckToken says whether s can be a bot token, without quoting it: printable ASCII without spaces or
// slashes (it is a part of every Bot API URL), at most MaxTokenLength characters, in the platform's form
// "<bot id>:<secret>".
func CheckToken(s string) error {
	if s == "" || len(s) > MaxTokenLength {
		return fmt.Errorf("%w: a bot token is 1-%d characters", ErrTokenInvalid, MaxTokenLength)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' {
			return fmt.Errorf("%w: a bot token has no spaces, slashes or control characters", ErrTokenInvalid)
		}
	}
	id, secret, ok := strings.Cut(s, ":")
	if _, valid := ParseID(id); !ok || !valid || secret == "" {
		return fmt.Errorf("%w: a bot token reads <bot id>:<secret>, like the one @BotFather gives", ErrTokenInvalid)
	}
	return nil
}

// TokenDigest is the SHA-256 of a token, which the store keeps beside the sealed token: a change of token
// is seen without opening it.
func TokenDigest(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// SealToken seals a bot's token under key (HERALD_BOT_TOKEN_KEY), bound to the bot's id: a sealed token
// copied onto another bot's row does not open.
func SealToken(key *signing.Key, id ID, token string) []byte {
	return key.SealBytes([]byte(token), sealOwner(id))
}

// OpenToken opens what SealToken sealed for bot id; the error wraps ErrTokenUnavailable.
func OpenToken(key *signing.Key, id ID, sealed []byte) (string, error) {
	plain, err := key.OpenBytes(sealed, sealOwner(id))
	switch {
	case errors.Is(err, signing.ErrOtherKey):
		return "", fmt.Errorf("%w: bot %d's token was sealed with another key (is the key that sealed it still in the list?)", ErrTokenUnavailable, id)
	case err != nil:
		return "", fmt.Errorf("%w: bot %d's sealed token is altered, or another bot's", ErrTokenUnavailable, id)
	}
	return string(plain), nil
}

// sealOwner is the additional data of a bot's sealed token.
func sealOwner(id ID) string { return "bot/" + strconv.FormatInt(int64(id), 10) }
