package bot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
)

// Registrar registers tenants' bots with the platform: the operator and the admin CLI each make one from
// their configuration.
type Registrar struct {
	// NewClient returns a Bot API client for a token (messenger.New with the installation's
	// HERALD_MESSENGER_API_URL).
	NewClient func(token string) *messenger.Client
	// Key seals the tokens (HERALD_BOT_TOKEN_KEY).
	Key *signing.Key
	// PublicURL is where the platform reaches the webhook component (HERALD_PUBLIC_URL), https.
	PublicURL string
}

// NewRegistrar makes a Registrar calling the Bot API at apiURL (through httpClient; nil: a client of its
// own). ErrNotConfigured when the key or the public URL is missing.
func NewRegistrar(apiURL string, httpClient *http.Client, key *signing.Key, publicURL string) (*Registrar, error) {
	var missing []string
	if key == nil {
		missing = append(missing, "HERALD_BOT_TOKEN_KEY")
	}
	if publicURL == "" {
		missing = append(missing, "HERALD_PUBLIC_URL")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: set %s", ErrNotConfigured, strings.Join(missing, " and "))
	}
	if httpClient == nil {
		httpClient = &http.Client{Transport: messenger.NewTransport()}
	}
	return &Registrar{
		NewClient: func(token string) *messenger.Client { return messenger.New(apiURL, token, httpClient) },
		Key:       key,
		PublicURL: strings.TrimRight(publicURL, "/"),
	}, nil
}

// Settings are what a tenant chooses for its bot besides the token.
type Settings struct {
	// RateLimit is the bot's messages per second, 1..store.MaxBotRateLimit; 0: the workers'
	// HERALD_MESSENGER_RATE_LIMIT.
	RateLimit int
	// PaidBroadcast: sends past FreeRate carry allow_paid_broadcast, up to RateLimit.
	PaidBroadcast bool
}

// WebhookSecretSize is the number of random bytes of a bot's webhook secret: 43 characters once encoded,
// of the A-Za-z0-9_- the platform allows in a secret_token.
const WebhookSecretSize = 32

// Register checks token with getMe, points the bot's webhook at PublicURL + WebhookPath(id) with a fresh
// random secret and the updates of AllowedUpdates, and returns what the store keeps of it (store.UpsertBot):
// the token sealed, its digest and the secret's, the settings, state ready. The caller records it, then
// makes the tenant send through it (store.SetTenantBot).
//
// Errors wrap ErrTokenInvalid (the tenant must give another token), ErrWebhookFailed (the platform refused
// the webhook: the returned Bot has the bot's id and username, for the operator's status) or ErrTransient
// (try again later). Neither the token nor the secret is in any error.
func (r *Registrar) Register(ctx context.Context, token string, s Settings) (store.Bot, error) {
	if err := CheckToken(token); err != nil {
		return store.Bot{}, err
	}
	if s.RateLimit < 0 || s.RateLimit > store.MaxBotRateLimit {
		return store.Bot{}, fmt.Errorf("a bot's rate limit is 1..%d messages per second, or 0 for the default", store.MaxBotRateLimit)
	}
	api := r.NewClient(token)
	me, err := api.GetMe(ctx)
	if err != nil {
		return store.Bot{}, classify("getMe", err, ErrTokenInvalid)
	}
	if me.ID <= 0 || !me.IsBot || me.Username == "" {
		return store.Bot{}, fmt.Errorf("%w: the token is not a bot's (getMe answered user %d, bot %v, username %q)", ErrTokenInvalid, me.ID, me.IsBot, me.Username)
	}
	b := store.Bot{ID: ID(me.ID), Username: me.Username}
	secret := newWebhookSecret()
	hook := r.PublicURL + WebhookPath(b.ID)
	if err := api.SetWebhook(ctx, hook, secret, AllowedUpdates); err != nil {
		return b, classify("setWebhook", err, ErrWebhookFailed)
	}
	secretDigest := sha256.Sum256([]byte(secret))
	b.TokenSealed = SealToken(r.Key, b.ID, token)
	b.TokenDigest = TokenDigest(token)
	b.WebhookURL, b.WebhookSecretDigest = hook, secretDigest[:]
	b.RateLimit, b.PaidBroadcast = s.RateLimit, s.PaidBroadcast
	b.State = botstate.Ready
	return b, nil
}

// classify wraps the error of a Bot API call: a 401 or 404 is the token's (the platform answers both for a
// token it does not know), 429, 5xx and every failure to get an answer are transient, and any other refusal
// is refused's.
func classify(method string, err error, refused error) error {
	var apiErr *messenger.APIError
	switch {
	case !errors.As(err, &apiErr), apiErr.Code == http.StatusTooManyRequests, apiErr.Code >= 500:
		return fmt.Errorf("%w: %w", ErrTransient, err)
	case apiErr.Code == http.StatusUnauthorized, apiErr.Code == http.StatusNotFound:
		return fmt.Errorf("%w: %s answered %d %s", ErrTokenInvalid, method, apiErr.Code, apiErr.Description)
	}
	return fmt.Errorf("%w: %s answered %d %s", refused, method, apiErr.Code, apiErr.Description)
}

// newWebhookSecret is a fresh secret_token for setWebhook.
func newWebhookSecret() string {
	b := make([]byte, WebhookSecretSize)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
