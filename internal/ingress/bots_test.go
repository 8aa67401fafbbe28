package ingress_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// A tenant with its own bot (spec §11): its link tokens deep-link to that bot's username, at once after a
// change of bot; the verification prompt and the notifications of a user linked through it go through it.
// A tenant of the shared bot sees no change.
func TestATenantsOwnBotNamesItsDeepLinksAndCarriesItsMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acme := e.tenant("acme", "Acme Dev", ptr("Acme"))
	globex := e.tenant("globex", "Globex Dev", nil)
	const acmeBot = notification.BotID(4001)
	token := "4001:acme-bot-token"
	if err := e.st.UpsertBot(ctx, store.Bot{ID: acmeBot, Username: "acme_bot", TokenSealed: []byte("sealed elsewhere"),
		TokenDigest: sha256.Sum256([]byte(token)), State: botstate.Ready}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.SetTenantBot(ctx, "acme", acmeBot); err != nil {
		t.Fatal(err)
	}

	linkToken := func(key, user string) (token, deepLink string) {
		t.Helper()
		r := e.do("POST", "/v1/link-token", key, map[string]any{"user_id": user})
		if r.status != http.StatusCreated {
			t.Fatalf("link-token: %d %s", r.status, r.body)
		}
		m := r.json(t)
		return m["token"].(string), m["deep_link"].(string)
	}
	tok, link := linkToken(acme, "u1")
	if link != "https://t.me/acme_bot?start="+tok {
		t.Errorf("acme's deep link = %s, want its own bot's", link)
	}
	if tok, link := linkToken(globex, "g1"); link != "https://t.me/herald_test_bot?start="+tok {
		t.Errorf("globex's deep link = %s, want the shared bot's", link)
	}

	// The user opens it in acme's bot (what the webhook of that bot does with the /start).
	eff, res := store.RedeemLinkToken(1, store.Redemption{Digest: sha256.Sum256([]byte(tok)), MessengerUserID: 501, ChatID: 501, Bot: acmeBot},
		func(store.LinkResult) store.NewNotification {
			return store.NewNotification{TrackingID: "0190a0a0-0000-7000-8000-0000000000a1", Kind: notification.KindSystem, ChatID: 501,
				Bot: acmeBot, Priority: 9, Body: "linked"}
		})
	eff.Bot = acmeBot
	if err := e.st.ApplyUpdates(ctx, []*store.Effect{eff}); err != nil || res.Outcome != store.LinkLinked {
		t.Fatalf("linking through acme's bot: %v %+v", err, res)
	}

	// The verification prompt goes to the user's chat with acme's bot.
	if r := e.do("POST", "/v1/phone-verification/start", acme, map[string]any{"user_id": "u1"}); r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	var chat, bot int64
	var prompts int
	for _, row := range e.fx.NotificationRows(t) {
		if row.Kind == notification.KindSystem && strings.Contains(row.Body, "Acme") && row.ChatID != nil {
			chat, bot = *row.ChatID, int64(row.Bot)
			prompts++
		}
	}
	if prompts == 0 {
		t.Fatal("no prompt stored")
	}
	if chat != 501 || notification.BotID(bot) != acmeBot {
		t.Errorf("the prompt goes to chat %d of bot %d, want chat 501 of bot %d", chat, bot, acmeBot)
	}

	// Once verified, a send is accepted for that chat of that bot.
	e.fx.User(t, "acme", "u1", fixture.Verified())
	r := e.do("POST", "/v1/send", acme, map[string]any{"user_id": "u1", "message": "hello"})
	if r.status != http.StatusAccepted {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	id := r.json(t)["tracking_id"].(string)
	row := e.fx.NotificationRow(t, id)
	chat, bot = 0, int64(row.Bot)
	if row.ChatID != nil {
		chat = *row.ChatID
	}
	if chat != 501 || notification.BotID(bot) != acmeBot {
		t.Errorf("the notification goes to chat %d of bot %d, want chat 501 of bot %d", chat, bot, acmeBot)
	}

	// Back to the shared bot: the next deep link names it.
	if _, err := e.st.SetTenantBot(ctx, "acme", notification.SharedBot); err != nil {
		t.Fatal(err)
	}
	if tok, link := linkToken(acme, "u2"); !strings.HasPrefix(link, "https://t.me/herald_test_bot?start=") || !strings.HasSuffix(link, tok) {
		t.Errorf("acme's deep link after its move to the shared bot = %s", link)
	}
}
