package bot_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// platform is a simulated platform with one bot, whose token is token.
func platform(t *testing.T, token, username string) (*sim.Server, *httptest.Server) {
	t.Helper()
	s := sim.New(sim.Options{Token: token, BotUsername: username, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		_ = s.Close()
	})
	return s, srv
}

// receiver stands for Herald's webhook component: it records the path and the secret of every update the
// platform POSTs.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	calls []call
}

type call struct{ path, secret string }

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		rc.calls = append(rc.calls, call{r.URL.Path, r.Header.Get("X-Telegram-Bot-Api-Secret-Token")})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []call {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.calls)
}

func newKey(t *testing.T) *signing.Key {
	t.Helper()
	k, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func registrar(t *testing.T, apiURL string, key *signing.Key, publicURL string) *bot.Registrar {
	t.Helper()
	r, err := bot.NewRegistrar(apiURL, nil, key, publicURL)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Register checks the token with getMe, points the bot's webhook at HERALD_PUBLIC_URL/messenger/webhook/{id}
// with a secret of its own and the updates of §9, and returns what the store keeps: the token sealed (it
// opens for this bot only, under this key only), its digest and the secret's. The platform then sends the
// bot's updates there with that secret.
func TestRegisterChecksTheTokenAndSetsTheWebhook(t *testing.T) {
	const token = "4242:first-bot-token"
	p, api := platform(t, token, "acme_bot")
	hook := newReceiver(t)
	key := newKey(t)
	b, err := registrar(t, api.URL, key, hook.URL+"/").Register(t.Context(), token, bot.Settings{RateLimit: 100, PaidBroadcast: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != 4242 || b.Username != "acme_bot" || b.RateLimit != 100 || !b.PaidBroadcast || b.State != botstate.Ready ||
		b.WebhookURL != hook.URL+"/messenger/webhook/4242" ||
		b.TokenDigest != sha256.Sum256([]byte(token)) || len(b.WebhookSecretDigest) != 32 {
		t.Fatalf("registered %+v", b)
	}
	if strings.Contains(string(b.TokenSealed), "first-bot-token") {
		t.Error("the sealed token holds the token in clear")
	}
	if got, err := bot.OpenToken(key, 4242, b.TokenSealed); err != nil || got != token {
		t.Errorf("the sealed token opens to %q, %v", got, err)
	}
	if _, err := bot.OpenToken(key, 4243, b.TokenSealed); !errors.Is(err, bot.ErrTokenUnavailable) {
		t.Errorf("the token opens for another bot: %v", err)
	}
	if _, err := bot.OpenToken(newKey(t), 4242, b.TokenSealed); !errors.Is(err, bot.ErrTokenUnavailable) || strings.Contains(err.Error(), "CALLBACK") {
		t.Errorf("the token opens under another key, or says it is a callback secret: %v", err)
	}

	info := p.WebhookInfo()
	if info.URL != hook.URL+"/messenger/webhook/4242" || !slices.Equal(info.AllowedUpdates, []string{"message", "my_chat_member", "callback_query"}) {
		t.Fatalf("the webhook: %+v", info)
	}
	if _, err := p.EnsureUser(sim.User{ID: 7, FirstName: "Ann"}); err != nil {
		t.Fatal(err)
	}
	id, err := p.SendText(7, "hello")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p.WaitWebhook(ctx, id)
	calls := hook.received()
	if len(calls) != 1 || calls[0].path != "/messenger/webhook/4242" {
		t.Fatalf("the platform posted %+v", calls)
	}
	if sum := sha256.Sum256([]byte(calls[0].secret)); string(sum[:]) != string(b.WebhookSecretDigest) || len(calls[0].secret) < 32 {
		t.Errorf("the update came with a secret (%d characters) whose digest is not the one recorded", len(calls[0].secret))
	}

	// A second registration of the same bot (a new token, or a re-check) sets a new secret.
	again, err := registrar(t, api.URL, key, hook.URL).Register(t.Context(), token, bot.Settings{})
	if err != nil || string(again.WebhookSecretDigest) == string(b.WebhookSecretDigest) || again.RateLimit != 0 || again.PaidBroadcast {
		t.Errorf("registered again: %+v %v, want a new secret and the default settings", again, err)
	}
}

// Two bots on one platform are two registrations, each with its own webhook path and secret. (Each
// simulated platform plays one bot today; the same holds for one platform playing both.)
func TestTwoBotsHaveTheirOwnWebhooks(t *testing.T) {
	pa, apiA := platform(t, "5001:bot-a", "a_bot")
	pb, apiB := platform(t, "5002:bot-b", "b_bot")
	key := newKey(t)
	a, err := registrar(t, apiA.URL, key, "https://herald.example.com").Register(t.Context(), "5001:bot-a", bot.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := registrar(t, apiB.URL, key, "https://herald.example.com").Register(t.Context(), "5002:bot-b", bot.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if pa.WebhookInfo().URL != "https://herald.example.com/messenger/webhook/5001" || pb.WebhookInfo().URL != "https://herald.example.com/messenger/webhook/5002" {
		t.Errorf("webhooks %q and %q", pa.WebhookInfo().URL, pb.WebhookInfo().URL)
	}
	if string(a.WebhookSecretDigest) == string(b.WebhookSecretDigest) {
		t.Error("two bots share a webhook secret")
	}
}

// What Register refuses, classified: a token that is no token (no call is made), one the platform refuses,
// a webhook the platform refuses (the bot is named, for the operator's status), a platform that cannot be
// reached or asks to wait. No error quotes the token.
func TestRegisterClassifiesWhatGoesWrong(t *testing.T) {
	const token = "6001:good-token"
	p, api := platform(t, token, "good_bot")
	key := newKey(t)
	r := registrar(t, api.URL, key, "https://herald.example.com")
	for _, bad := range []string{"", "no-colon-here", "0:zero", "x:abc", "6001:", "6001:with space", "6001:with/slash", strings.Repeat("1", 300) + ":x"} {
		if _, err := r.Register(t.Context(), bad, bot.Settings{}); !errors.Is(err, bot.ErrTokenInvalid) {
			t.Errorf("token %q: %v, want ErrTokenInvalid", bad, err)
		}
	}
	if n := p.Stats().Unauthorized; n != 0 {
		t.Errorf("malformed tokens reached the platform (%d refused calls)", n)
	}
	_, err := r.Register(t.Context(), "6001:wrong-token", bot.Settings{})
	if !errors.Is(err, bot.ErrTokenInvalid) || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("a token the platform refuses: %v", err)
	}
	if _, err := r.Register(t.Context(), token, bot.Settings{RateLimit: 1001}); err == nil {
		t.Error("a rate of 1001 was accepted")
	}

	b, err := registrar(t, api.URL, key, "ftp://herald.example.com").Register(t.Context(), token, bot.Settings{})
	if !errors.Is(err, bot.ErrWebhookFailed) || b.ID != 6001 || b.Username != "good_bot" || strings.Contains(err.Error(), "good-token") {
		t.Errorf("a webhook the platform refuses: %+v %v, want ErrWebhookFailed naming bot 6001", b, err)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"ok":false,"error_code":502,"description":"Bad Gateway"}`))
	}))
	defer down.Close()
	if _, err := registrar(t, down.URL, key, "https://h.example.com").Register(t.Context(), token, bot.Settings{}); !errors.Is(err, bot.ErrTransient) {
		t.Errorf("a 502: %v, want ErrTransient", err)
	}
	down.Close()
	if _, err := registrar(t, down.URL, key, "https://h.example.com").Register(t.Context(), token, bot.Settings{}); !errors.Is(err, bot.ErrTransient) ||
		strings.Contains(err.Error(), "good-token") {
		t.Errorf("a platform that cannot be reached: %v, want ErrTransient without the token", err)
	}

	if _, err := bot.NewRegistrar(api.URL, nil, nil, ""); !errors.Is(err, bot.ErrNotConfigured) ||
		!strings.Contains(err.Error(), "HERALD_BOT_TOKEN_KEY") || !strings.Contains(err.Error(), "HERALD_PUBLIC_URL") {
		t.Errorf("without a key and a public URL: %v", err)
	}
}

// The registry holds the bots of the store: each with its settings, its state, a client with its own token
// (sends go to its own bot) and its webhook secret's digest. A bot recorded later is found on the first
// request for it; a change of state is seen at the next refresh; an id nobody recorded is unknown.
func TestTheRegistryServesTheStoresBots(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	ctx := t.Context()
	key := newKey(t)
	pa, apiA := platform(t, "7001:bot-a", "a_bot")
	_, apiB := platform(t, "7002:bot-b", "b_bot")
	a, err := registrar(t, apiA.URL, key, "https://herald.example.com").Register(ctx, "7001:bot-a", bot.Settings{RateLimit: 50, PaidBroadcast: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertBot(ctx, a); err != nil {
		t.Fatal(err)
	}
	shared := messenger.New(apiA.URL, "1:shared", nil)
	reg := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: key, APIURL: apiA.URL, Shared: shared, Logger: slog.New(slog.DiscardHandler)})
	if err := reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := reg.Get(ctx, 7001)
	if err != nil || got != (bot.Bot{ID: 7001, Username: "a_bot", RateLimit: 50, PaidBroadcast: true, State: botstate.Ready}) {
		t.Fatalf("bot 7001: %+v %v", got, err)
	}
	client, err := reg.Client(ctx, 7001)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pa.EnsureUser(sim.User{ID: 8, FirstName: "Bo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, messenger.SendMessageRequest{ChatID: 8, Text: "through bot 7001"}); err != nil {
		t.Fatalf("a send with bot 7001's client: %v", err)
	}
	if msgs := pa.Messages(8); len(msgs) != 1 || msgs[0].Text != "through bot 7001" {
		t.Errorf("bot 7001's platform received %+v", msgs)
	}
	if c, err := reg.Client(ctx, bot.Shared); err != nil || c != shared {
		t.Errorf("the shared bot's client: %v", err)
	}

	// The secret: only the one recorded passes (an unknown bot has none).
	if ok, err := reg.CheckSecret(ctx, 7001, "not the secret"); ok || err != nil {
		t.Errorf("a wrong secret passed: %v %v", ok, err)
	}
	if ok, err := reg.CheckSecret(ctx, 9999, ""); ok || err != nil {
		t.Errorf("an unknown bot's empty secret passed: %v %v", ok, err)
	}

	// Unknown now, recorded, then found (after the unknown answer's short memory).
	if _, err := reg.Get(ctx, 7002); !errors.Is(err, bot.ErrUnknownBot) {
		t.Fatalf("bot 7002 before it is recorded: %v", err)
	}
	b, err := registrar(t, apiB.URL, key, "https://herald.example.com").Register(ctx, "7002:bot-b", bot.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertBot(ctx, b); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := reg.Get(ctx, 7002)
		if err == nil {
			if got.Username != "b_bot" {
				t.Errorf("bot 7002: %+v", got)
			}
			break
		}
		if !errors.Is(err, bot.ErrUnknownBot) || time.Now().After(deadline) {
			t.Fatalf("bot 7002 after it was recorded: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := reg.Get(ctx, bot.Shared); !errors.Is(err, bot.ErrUnknownBot) {
		t.Errorf("the shared bot as an own one: %v", err)
	}

	// A worker met a 401: the next refresh says so.
	if _, err := st.SetBotState(ctx, 7001, botstate.TokenInvalid, "the platform refused the token"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := reg.Get(ctx, 7001); got.State != botstate.TokenInvalid || got.StateMessage != "the platform refused the token" {
		t.Errorf("after the refresh: %+v", got)
	}
	ids := []bot.ID{}
	for _, b := range reg.Bots() {
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []bot.ID{7001, 7002}) {
		t.Errorf("the registry lists %v", ids)
	}

	// Without the key, or under another one, no token opens: the webhook can still check secrets.
	for _, k := range []*signing.Key{nil, newKey(t)} {
		other := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: k, APIURL: apiA.URL, Logger: slog.New(slog.DiscardHandler)})
		if err := other.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Client(ctx, 7001); !errors.Is(err, bot.ErrTokenUnavailable) {
			t.Errorf("a client without the key that sealed the token: %v", err)
		}
		if _, err := other.Get(ctx, 7001); err != nil {
			t.Errorf("bot 7001 without the key: %v", err)
		}
	}
}

// Run keeps refreshing: a change made elsewhere is seen within a few intervals, without a request for it.
func TestTheRegistryRefreshesWhileItRuns(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	key := newKey(t)
	reg := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: key, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx, 20*time.Millisecond) }()
	token := "7101:bot-token"
	if err := st.UpsertBot(ctx, store.Bot{ID: 7101, Username: "c_bot", TokenSealed: bot.SealToken(key, 7101, token),
		TokenDigest: bot.TokenDigest(token), State: botstate.Ready}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(reg.Bots()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the registry did not see the new bot while running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestCheckTokenAndParseID(t *testing.T) {
	for _, s := range []string{"1", "123456", "9223372036854775807"} {
		if _, ok := bot.ParseID(s); !ok {
			t.Errorf("ParseID(%q) refused", s)
		}
	}
	for _, s := range []string{"", "0", "-1", "+1", "01", "1.0", "x", "9223372036854775808"} {
		if id, ok := bot.ParseID(s); ok {
			t.Errorf("ParseID(%q) = %d", s, id)
		}
	}
	if bot.WebhookPath(42) != "/messenger/webhook/42" {
		t.Errorf("WebhookPath(42) = %q", bot.WebhookPath(42))
	}
	if err := bot.CheckToken("123456:AAH-abc_DEF"); err != nil {
		t.Errorf("a platform token refused: %v", err)
	}
}

// The webhook route is public: a stream of made-up bot ids costs at most MissLookupsPerSecond queries a
// second. Past them an id the registry does not hold is answered unknown without asking PostgreSQL, even a
// bot recorded meanwhile; that one is found once the second has passed.
func TestMadeUpBotIdsCostABoundedNumberOfQueries(t *testing.T) {
	st, _ := pgtest.NewStore(t)
	ctx := t.Context()
	key := newKey(t)
	reg := bot.NewRegistry(bot.RegistryOptions{Store: st, Key: key, Logger: slog.New(slog.DiscardHandler)})
	if err := reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	token := "7201:bot-token"
	if err := st.UpsertBot(ctx, store.Bot{ID: 7201, Username: "d_bot", TokenSealed: bot.SealToken(key, 7201, token),
		TokenDigest: bot.TokenDigest(token), State: botstate.Ready}); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		start := time.Now()
		for i := range bot.MissLookupsPerSecond + 1 {
			if _, err := reg.Get(ctx, bot.ID(800000+try*1000+i)); !errors.Is(err, bot.ErrUnknownBot) {
				t.Fatalf("a made-up id: %v", err)
			}
		}
		_, err := reg.Get(ctx, 7201)
		if time.Since(start) > 500*time.Millisecond && try < 5 {
			continue // the second may have turned meanwhile: the budget is not shown exhausted; again
		}
		if !errors.Is(err, bot.ErrUnknownBot) {
			t.Fatalf("after %d lookups in a second, a bot the registry does not hold: %v, want unknown without a query", bot.MissLookupsPerSecond, err)
		}
		break
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := reg.Get(ctx, 7201); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("bot 7201 is still unknown once the second has passed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
