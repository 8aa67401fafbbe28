package updates_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/syncbuf"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/updates"
)

// Tenants' own bots (spec v1-extensions §11): each bot's webhook at /messenger/webhook/{bot_id} with its own
// secret, and everything of the shared route per bot.

const textLinkWrongBot = "This link is not for this bot. Please open the link the app gave you again: it opens the chat it is meant for."

// botsEnv is an env whose receiver knows the tenants' bots (a registry over its database), beside the
// simulated platform playing those bots.
type botsEnv struct {
	*env
	sim *sim.Server
	api string // the simulator's Bot API base URL
	key *signing.Key
	reg *bot.Registry
}

func newBotsEnv(t *testing.T) *botsEnv {
	t.Helper()
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler), GlobalRate: -1, PerChatRate: -1, WebhookBackoff: 10 * time.Millisecond})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.Close()
	})
	key, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	b := &botsEnv{sim: s, api: srv.URL, key: key}
	b.env = newEnv(t, func(st *store.Store, o *updates.Options) {
		b.reg = bot.NewRegistry(bot.RegistryOptions{Store: st, Key: key, APIURL: srv.URL, Logger: discardLogger()})
		o.Bots = b.reg
	})
	return b
}

// register makes a bot on the simulated platform and registers it as Herald does (getMe, then setWebhook
// at this env's /messenger/webhook/{id} with a secret of its own), recorded in the store; with a tenant,
// the tenant then sends through it. It returns the bot's handle on the platform and its id.
func (b *botsEnv) register(tenant, username string, cfg sim.BotConfig) (*sim.BotHandle, bot.ID) {
	b.t.Helper()
	cfg.Username = username
	info, err := b.sim.CreateBot(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	r, err := bot.NewRegistrar(b.api, nil, b.key, b.srv.URL)
	if err != nil {
		b.t.Fatal(err)
	}
	row, err := r.Register(context.Background(), info.Token, bot.Settings{})
	if err != nil {
		b.t.Fatal(err)
	}
	b.record(tenant, row)
	h, _ := b.sim.BotHandle(username)
	return h, row.ID
}

// ownBot records a bot whose webhook secret is secret (as a registration with it would), for tenant.
func (b *botsEnv) ownBot(tenant string, id bot.ID, username, secret string) {
	b.t.Helper()
	token := fmt.Sprintf("%d:token-of-%s", id, username)
	digest := sha256.Sum256([]byte(secret))
	b.record(tenant, store.Bot{ID: id, Username: username, TokenSealed: bot.SealToken(b.key, id, token), TokenDigest: bot.TokenDigest(token),
		WebhookURL: b.srv.URL + bot.WebhookPath(id), WebhookSecretDigest: digest[:], State: botstate.Ready})
}

func (b *botsEnv) record(tenant string, row store.Bot) {
	b.t.Helper()
	ctx := context.Background()
	if err := b.st.UpsertBot(ctx, row); err != nil {
		b.t.Fatal(err)
	}
	if tenant != "" {
		if _, err := b.st.SetTenantBot(ctx, tenant, row.ID); err != nil {
			b.t.Fatal(err)
		}
	}
	if err := b.reg.Refresh(ctx); err != nil {
		b.t.Fatal(err)
	}
}

// postBot posts an update to bot id's route with secret in the spec's header.
func (b *botsEnv) postBot(id bot.ID, secret string, update any) response {
	b.t.Helper()
	return b.postTo(bot.WebhookPath(id), update, updates.SecretHeader, secret)
}

type botLink struct {
	MessengerUserID, ChatID int64
	Bot                     bot.ID
}

// linkOf returns the link of a tenant's user with its bot, and whether there is one.
func (e *env) linkOf(tenantID, userID string) (botLink, bool) {
	e.t.Helper()
	l, ok := e.fx.LinkOf(e.t, tenantID, userID)
	return botLink{l.MessengerUserID, l.ChatID, bot.ID(l.Bot)}, ok
}

// expectReplyThrough asserts a reply as expectReply does, and the bot it goes through.
func expectReplyThrough(t *testing.T, r reply, through bot.ID, chatID int64, tenantID, body string, markup map[string]any) {
	t.Helper()
	if bot.ID(r.Bot) != through {
		t.Errorf("reply %q goes through bot %d, want %d", r.Body, r.Bot, through)
	}
	expectReply(t, r, chatID, tenantID, body, markup)
}

const (
	acmeBot    = bot.ID(4001)
	globexBot  = bot.ID(4002)
	acmeHook   = "acme-bot-webhook-secret_0123456789"
	globexHook = "globex-bot-webhook-secret_987654321"
)

// Each bot's route wants that bot's own secret: another bot's, the shared one, none or a wrong one are
// refused with the same 401 as an unknown or malformed bot id, before the body is read. The shared route
// takes no bot's secret. What is authorised is answered through the bot of the route.
func TestEachBotsWebhookWantsItsOwnSecret(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Dev")
	e.ownBot("acme", acmeBot, "acme_bot", acmeHook)
	e.ownBot("globex", globexBot, "globex_bot", globexHook)

	acme := bot.WebhookPath(acmeBot)
	cases := []struct {
		name    string
		path    string
		headers []string
		through bot.ID // 0 with ok false: refused
		ok      bool
	}{
		{"its secret", acme, []string{updates.SecretHeader, acmeHook}, acmeBot, true},
		{"its secret in the platform's header", acme, []string{updates.PlatformSecretHeader, acmeHook}, acmeBot, true},
		{"both headers right", acme, []string{updates.SecretHeader, acmeHook, updates.PlatformSecretHeader, acmeHook}, acmeBot, true},
		{"the other bot's route with its secret", bot.WebhookPath(globexBot), []string{updates.SecretHeader, globexHook}, globexBot, true},
		{"the other bot's secret", acme, []string{updates.SecretHeader, globexHook}, 0, false},
		{"the shared secret", acme, []string{updates.SecretHeader, secret}, 0, false},
		{"no secret", acme, []string{"X-Other", "x"}, 0, false},
		{"empty", acme, []string{updates.SecretHeader, ""}, 0, false},
		{"a prefix of its secret", acme, []string{updates.SecretHeader, acmeHook[:len(acmeHook)-1]}, 0, false},
		{"wrong next to right", acme, []string{updates.SecretHeader, acmeHook, updates.PlatformSecretHeader, globexHook}, 0, false},
		{"an unknown bot", bot.WebhookPath(4999), []string{updates.SecretHeader, acmeHook}, 0, false},
		{"a bot id with a leading zero", "/messenger/webhook/04001", []string{updates.SecretHeader, acmeHook}, 0, false},
		{"a bot id of zero", "/messenger/webhook/0", []string{updates.SecretHeader, secret}, 0, false},
		{"a negative bot id", "/messenger/webhook/-4001", []string{updates.SecretHeader, acmeHook}, 0, false},
		{"not a bot id", "/messenger/webhook/acme_bot", []string{updates.SecretHeader, acmeHook}, 0, false},
		{"the shared route with a bot's secret", updates.Path, []string{updates.SecretHeader, acmeHook}, 0, false},
	}
	var refusal string
	var want []bot.ID
	for _, c := range cases {
		r := e.postTo(c.path, textUpdate(e.updateID(), 42, "/start"), c.headers...)
		if c.ok {
			expectOK(t, r)
			want = append(want, c.through)
			continue
		}
		expectError(t, r, http.StatusUnauthorized, "unauthorized")
		// One refusal for all: nothing tells an unknown bot from a wrong secret.
		msg := strings.SplitN(string(r.body), `"request_id"`, 2)[0]
		if refusal == "" {
			refusal = msg
		} else if msg != refusal {
			t.Errorf("%s: refused with %s, the others with %s", c.name, msg, refusal)
		}
	}
	rs := e.wantReplies(len(want))
	for i, r := range rs {
		expectReplyThrough(t, r, want[i], 42, "", textStart, nil)
	}

	// Refused before the body is read, for a wrong secret and for an unknown bot alike.
	for _, c := range []struct{ path, secret string }{{acme, "wrong"}, {acme, globexHook}, {bot.WebhookPath(4999), acmeHook}} {
		req := httptest.NewRequest(http.MethodPost, c.path, tripwire{t})
		req.Header.Set(updates.SecretHeader, c.secret)
		w := httptest.NewRecorder()
		e.router.ServeHTTP(w, req)
		expectError(t, response{status: w.Code, body: w.Body.Bytes()}, http.StatusUnauthorized, "unauthorized")
	}
}

// The simulated platform delivers each registered bot's updates to its route with its own secret (the
// platform's header), and the shared bot's to the shared route: all are answered.
func TestThePlatformDeliversEachBotsUpdatesToItsRoute(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Dev")
	acme, acmeID := e.register("acme", "acme_bot", sim.BotConfig{})
	globex, globexID := e.register("globex", "globex_bot", sim.BotConfig{})
	if err := updates.SetWebhookURL(context.Background(), messenger.New(e.api, e.sim.Token(), nil), e.srv.URL+updates.Path, secret); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range []*sim.BotHandle{acme, globex, e.sim.DefaultBot()} {
		id, err := h.SendText(501, "hello")
		if err != nil {
			t.Fatal(err)
		}
		if out := h.WaitWebhook(ctx, id); out.State != "answered" || out.Status != http.StatusOK {
			t.Fatalf("@%s's update: %+v", h.Info().Username, out)
		}
	}
	rs := e.wantReplies(3)
	expectReplyThrough(t, rs[0], acmeID, 501, "", textUnknown, nil)
	expectReplyThrough(t, rs[1], globexID, 501, "", textUnknown, nil)
	expectReplyThrough(t, rs[2], bot.Shared, 501, "", textUnknown, nil)
}

// A user links through the tenant's own bot: the link is that bot's, the confirmation goes through it, and
// a notification for the user is accepted for that bot's chat.
func TestAUserLinksThroughTheTenantsOwnBot(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	acme, acmeID := e.register("acme", "acme_bot", sim.BotConfig{})

	tok := e.token("acme", "u1", "Acme Shop", "")
	id, err := acme.StartUser(501, tok)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out := acme.WaitWebhook(ctx, id); out.Status != http.StatusOK {
		t.Fatalf("the /start: %+v", out)
	}
	if l, ok := e.linkOf("acme", "u1"); !ok || l != (botLink{501, 501, acmeID}) {
		t.Fatalf("link = %+v (%v), want messenger user 501 in chat 501 of bot %d", l, ok, acmeID)
	}
	expectReplyThrough(t, e.onlyReply(), acmeID, 501, "acme", brand.Render("Acme Shop", textLinked), nil)

	// The phone verified through the same bot, a notification is accepted for that bot's chat.
	e.session("acme", "u1", "pending", nil)
	own := int64(501)
	if id, err = acme.ShareContact(501, "+15551230001", &own); err != nil {
		t.Fatal(err)
	}
	if out := acme.WaitWebhook(ctx, id); out.Status != http.StatusOK {
		t.Fatalf("the contact: %+v", out)
	}
	if v := e.verification("acme", "u1"); v.Status != "verified" {
		t.Fatalf("verification = %s after the contact shared through the tenant's bot", v.Status)
	}
	n := store.NewNotification{TrackingID: "0190a0a0-0000-7000-8000-000000000001", Kind: "tenant", TenantID: "acme", UserID: "u1",
		Priority: 5, Body: "A message from Acme Shop\nhello"}
	dest, err := e.st.InsertTenantNotifications(ctx, []store.NewNotification{n})
	if err != nil {
		t.Fatal(err)
	}
	if got := dest[n.TrackingID]; got != (store.Destination{Bot: acmeID, Chat: 501}) {
		t.Fatalf("accepted for %+v (%v), want chat 501 of bot %d", got, dest, acmeID)
	}
}

// A token redeemed in another bot than its tenant's links nothing: the user is told, branded, through the
// bot that received it, that the link is not for this bot, and the token stays valid for the right bot.
func TestALinkRedeemedInTheWrongBotLinksNothing(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")     // its own bot
	e.tenant("globex", "Globex Dev") // the shared bot
	e.tenant("initech", "Initech Dev")
	e.ownBot("acme", acmeBot, "acme_bot", acmeHook)
	e.ownBot("initech", globexBot, "initech_bot", globexHook)

	acmeTok := e.token("acme", "u1", "Acme Shop", "")
	globexTok := e.token("globex", "g1", "Globex", "")
	// acme's token in the shared bot, and in another tenant's bot.
	expectOK(t, e.post(textUpdate(e.updateID(), 501, "/start "+acmeTok)))
	expectOK(t, e.postBot(globexBot, globexHook, textUpdate(e.updateID(), 501, "/start "+acmeTok)))
	// The shared bot's tenant's token in acme's bot.
	expectOK(t, e.postBot(acmeBot, acmeHook, textUpdate(e.updateID(), 502, "/start "+globexTok)))
	if n := e.count(`SELECT count(*) FROM links`); n != 0 {
		t.Fatalf("%d links made through the wrong bots", n)
	}
	if n := e.count(`SELECT count(*) FROM link_tokens WHERE used_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d tokens used up in the wrong bots", n)
	}
	rs := e.wantReplies(3)
	expectReplyThrough(t, rs[0], bot.Shared, 501, "acme", brand.Render("Acme Shop", textLinkWrongBot), nil)
	expectReplyThrough(t, rs[1], globexBot, 501, "acme", brand.Render("Acme Shop", textLinkWrongBot), nil)
	expectReplyThrough(t, rs[2], acmeBot, 502, "globex", brand.Render("Globex", textLinkWrongBot), nil)
	if !strings.Contains(e.logs.String(), `"reason":"wrong_bot"`) {
		t.Error("the refusal was not logged with its reason")
	}

	// Each token still links through its own tenant's bot.
	expectOK(t, e.postBot(acmeBot, acmeHook, textUpdate(e.updateID(), 501, "/start "+acmeTok)))
	expectOK(t, e.post(textUpdate(e.updateID(), 502, "/start "+globexTok)))
	if l, _ := e.linkOf("acme", "u1"); l != (botLink{501, 501, acmeBot}) {
		t.Errorf("acme's link = %+v", l)
	}
	if l, _ := e.linkOf("globex", "g1"); l != (botLink{502, 502, bot.Shared}) {
		t.Errorf("globex's link = %+v", l)
	}
	rs = e.wantReplies(5)
	expectReplyThrough(t, rs[3], acmeBot, 501, "acme", brand.Render("Acme Shop", textLinked), nil)
	expectReplyThrough(t, rs[4], bot.Shared, 502, "globex", brand.Render("Globex", textLinked), nil)
}

// Update ids are the platform's per bot: the same update_id on two bots is two updates, each taking effect
// once; a repeat on one bot is a duplicate.
func TestUpdateIDsAreDeduplicatedPerBot(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Dev")
	e.ownBot("acme", acmeBot, "acme_bot", acmeHook)
	e.ownBot("globex", globexBot, "globex_bot", globexHook)
	acmeTok := e.token("acme", "u1", "Acme", "")
	globexTok := e.token("globex", "g1", "Globex", "")

	const id = 777
	expectOK(t, e.postBot(acmeBot, acmeHook, textUpdate(id, 501, "/start "+acmeTok)))
	expectOK(t, e.postBot(globexBot, globexHook, textUpdate(id, 502, "/start "+globexTok)))
	expectOK(t, e.post(textUpdate(id, 503, "/start")))
	// Repeats, each on its bot: nothing more.
	expectOK(t, e.postBot(acmeBot, acmeHook, textUpdate(id, 501, "/start "+acmeTok)))
	expectOK(t, e.postBot(globexBot, globexHook, textUpdate(id, 502, "hello")))
	expectOK(t, e.post(textUpdate(id, 503, "/start")))

	if _, ok := e.linkOf("acme", "u1"); !ok {
		t.Error("acme's user is not linked")
	}
	if _, ok := e.linkOf("globex", "g1"); !ok {
		t.Error("globex's user is not linked: the same update id on another bot was taken for a repeat")
	}
	rs := e.wantReplies(3)
	expectReplyThrough(t, rs[0], acmeBot, 501, "acme", brand.Render("Acme", textLinked), nil)
	expectReplyThrough(t, rs[1], globexBot, 502, "globex", brand.Render("Globex", textLinked), nil)
	expectReplyThrough(t, rs[2], bot.Shared, 503, "", textStart, nil)
	if n := e.count(`SELECT count(*) FROM processed_updates WHERE update_id = $1`, id); n != 3 {
		t.Errorf("%d processed updates, want one per bot", n)
	}
}

// A contact shared with a bot completes the sessions of the user's links made through that bot only, and
// the confirmations go through it.
func TestAContactCompletesTheSessionsOfItsBot(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Dev")
	e.ownBot("acme", acmeBot, "acme_bot", acmeHook)
	e.ownBot("", globexBot, "spare_bot", globexHook) // no tenant's
	expectOK(t, e.postBot(acmeBot, acmeHook, textUpdate(e.updateID(), 501, "/start "+e.token("acme", "u1", "Acme", ""))))
	expectOK(t, e.post(textUpdate(e.updateID(), 501, "/start "+e.token("globex", "g1", "Globex", ""))))
	e.session("acme", "u1", "pending", nil)
	e.session("globex", "g1", "pending", nil)
	e.wantReplies(2)

	// Through a bot no tenant uses: nothing waits there.
	expectOK(t, e.postBot(globexBot, globexHook, contactUpdate(e.updateID(), 501, "+1 555 123 0001", 501)))
	expectReplyThrough(t, e.wantReplies(3)[2], globexBot, 501, "", textNoSession, removeKeyboard)
	// Through acme's bot: acme's session only.
	expectOK(t, e.postBot(acmeBot, acmeHook, contactUpdate(e.updateID(), 501, "+1 555 123 0001", 501)))
	if v := e.verification("acme", "u1"); v.Status != "verified" {
		t.Errorf("acme's session is %s", v.Status)
	}
	if v := e.verification("globex", "g1"); v.Status != "pending" {
		t.Errorf("globex's session, of the shared bot, is %s after a contact shared with acme's bot", v.Status)
	}
	expectReplyThrough(t, e.wantReplies(4)[3], acmeBot, 501, "acme", brand.Render("Acme Dev", textVerified), removeKeyboard)
	// Through the shared bot: globex's.
	expectOK(t, e.post(contactUpdate(e.updateID(), 501, "+1 555 123 0001", 501)))
	if v := e.verification("globex", "g1"); v.Status != "verified" {
		t.Errorf("globex's session is %s", v.Status)
	}
	expectReplyThrough(t, e.wantReplies(5)[4], bot.Shared, 501, "globex", brand.Render("Globex Dev", textVerified), removeKeyboard)
}

// /dev_* commands answer about the tenants of the bot they were sent to: a developer of tenants of two bots
// sees each bot's in that bot; a bot none of their tenants uses answers as to anyone.
func TestDevCommandsAnswerAboutTheTenantsOfTheirBot(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev", devAcme)
	e.tenant("globex", "Globex Dev", devAcme)
	e.tenant("initech", "Initech Dev")
	e.ownBot("acme", acmeBot, "acme_bot", acmeHook)
	e.ownBot("", globexBot, "spare_bot", globexHook)

	ask := func(through bot.ID, from int64, text string) reply {
		t.Helper()
		before := len(e.replies())
		if through == bot.Shared {
			expectOK(t, e.post(textUpdate(e.updateID(), from, text)))
		} else {
			hook := map[bot.ID]string{acmeBot: acmeHook, globexBot: globexHook}[through]
			expectOK(t, e.postBot(through, hook, textUpdate(e.updateID(), from, text)))
		}
		rs := e.wantReplies(before + 1)
		r := rs[len(rs)-1]
		if bot.ID(r.Bot) != through || r.ChatID != from || r.TenantID != nil {
			t.Fatalf("%q through bot %d: answered through bot %d in chat %d for tenant %q", text, through, r.Bot, r.ChatID, deref(r.TenantID))
		}
		return r
	}
	if got := ask(acmeBot, devAcme, "/dev_whoami").Body; got != "Your messenger user id: 7001\nDeveloper of:\n- acme (Acme Dev)" {
		t.Errorf("/dev_whoami through acme's bot:\n%s", got)
	}
	if got := ask(bot.Shared, devAcme, "/dev_whoami").Body; got != "Your messenger user id: 7001\nDeveloper of:\n- globex (Globex Dev)" {
		t.Errorf("/dev_whoami through the shared bot:\n%s", got)
	}
	if got := ask(globexBot, devAcme, "/dev_help").Body; got != textUnknown {
		t.Errorf("/dev_help through a bot none of the developer's tenants uses:\n%s", got)
	}
	// An admin sees every tenant of the bot.
	stats := ask(acmeBot, adminID, "/dev_stats").Body
	if !strings.Contains(stats, "\nacme: ") || strings.Contains(stats, "globex") || strings.Contains(stats, "initech") {
		t.Errorf("an admin's /dev_stats through acme's bot:\n%s", stats)
	}
	stats = ask(bot.Shared, adminID, "/dev_stats").Body
	if strings.Contains(stats, "acme") || !strings.Contains(stats, "\nglobex: ") || !strings.Contains(stats, "\ninitech: ") {
		t.Errorf("an admin's /dev_stats through the shared bot:\n%s", stats)
	}
}

// Polling (no public URL): one getUpdates loop per bot — the shared one and every tenant's bot, also one
// registered while polling runs — each with its own offset (the bots' update ids overlap), each bot's
// webhook removed first; a bot given a new token is polled with it.
func TestPollingPollsEveryBot(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	e.tenant("globex", "Globex Dev")
	e.tenant("initech", "Initech Dev")
	// Every bot counts its update ids from the same first id.
	acme, acmeID := e.register("acme", "acme_bot", sim.BotConfig{FirstUpdateID: 100})
	shared := messenger.New(e.api, e.sim.Token(), nil).WithTimeout(5 * time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	regDone := make(chan error, 1)
	go func() { regDone <- e.reg.Run(ctx, 50*time.Millisecond) }()
	done := make(chan error, 1)
	go func() { done <- updates.PollBots(ctx, shared, e.reg, e.rc, discardLogger()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("PollBots returned %v", err)
		}
		<-regDone
	})
	wait.Until(t, 10*time.Second, "polling to remove acme's webhook", func() bool { return acme.WebhookInfo().URL == "" })

	if _, err := acme.StartUser(601, e.token("acme", "u1", "Acme", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.StartUser(602, e.token("globex", "g1", "Globex", "")); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling to link through acme's bot and the shared bot", func() bool {
		_, a := e.linkOf("acme", "u1")
		_, g := e.linkOf("globex", "g1")
		return a && g
	})
	if l, _ := e.linkOf("acme", "u1"); l.Bot != acmeID {
		t.Errorf("acme's link is bot %d's", l.Bot)
	}

	// A bot registered while polling runs is polled too, its update ids those of acme's.
	initech, initechID := e.register("initech", "initech_bot", sim.BotConfig{FirstUpdateID: 100})
	wait.Until(t, 10*time.Second, "polling to remove the new bot's webhook", func() bool { return initech.WebhookInfo().URL == "" })
	if _, err := initech.StartUser(603, e.token("initech", "i1", "Initech", "")); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling to link through a bot registered meanwhile", func() bool {
		l, ok := e.linkOf("initech", "i1")
		return ok && l.Bot == initechID
	})

	// A new token for acme's bot: the old one is refused, the bot is polled with the new one.
	info, err := e.sim.RevokeToken("acme_bot", "")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := bot.NewRegistrar(e.api, nil, e.key, e.srv.URL)
	row, err := r.Register(ctx, info.Token, bot.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	e.record("", row)
	// The registration set the webhook again: only a loop polling with the new token removes it.
	wait.Until(t, 10*time.Second, "polling with the new token to remove acme's webhook", func() bool { return acme.WebhookInfo().URL == "" })
	if _, err := acme.StartUser(604, e.token("acme", "u2", "Acme", "")); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling acme's bot with its new token", func() bool { _, ok := e.linkOf("acme", "u2"); return ok })

	for _, h := range []*sim.BotHandle{acme, initech, e.sim.DefaultBot()} {
		wait.Until(t, 10*time.Second, "every update of @"+h.Info().Username+" to be confirmed", func() bool { return len(h.PendingUpdates()) == 0 })
	}
	rs := e.wantReplies(4)
	through := map[bot.ID]int{}
	for _, r := range rs {
		through[bot.ID(r.Bot)]++
	}
	if through[acmeID] != 2 || through[initechID] != 1 || through[bot.Shared] != 1 {
		t.Errorf("replies through the bots: %v", through)
	}
}

// A bot whose token the platform refused (a worker's 401 marks it token_invalid) is not polled, and says
// so once; registered anew, it is polled again.
func TestPollingLeavesABotWhoseTokenWasRefused(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	acme, acmeID := e.register("acme", "acme_bot", sim.BotConfig{})
	shared := messenger.New(e.api, e.sim.Token(), nil).WithTimeout(5 * time.Second)
	logs := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- updates.PollBots(ctx, shared, e.reg, e.rc, slog.New(slog.NewJSONHandler(logs, nil))) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wait.Until(t, 10*time.Second, "polling to remove acme's webhook", func() bool { return acme.WebhookInfo().URL == "" })

	if _, err := e.st.SetBotState(ctx, acmeID, botstate.TokenInvalid, "401 Unauthorized"); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	const notPolled = `"msg":"a bot's updates are not polled"`
	wait.Until(t, 10*time.Second, "polling to leave the bot", func() bool { return strings.Contains(logs.String(), notPolled) })

	// Registered anew (the operator, once the tenant gave a working token): polled again.
	r, _ := bot.NewRegistrar(e.api, nil, e.key, e.srv.URL)
	row, err := r.Register(ctx, acme.Token(), bot.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	e.record("", row)
	wait.Until(t, 10*time.Second, "polling to take the bot again", func() bool { return acme.WebhookInfo().URL == "" })
	if _, err := acme.StartUser(601, e.token("acme", "u1", "Acme", "")); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling to link", func() bool { _, ok := e.linkOf("acme", "u1"); return ok })
	if n := strings.Count(logs.String(), notPolled); n != 1 {
		t.Errorf("the bot left was logged %d times, want once", n)
	}
}

// A bot whose webhook is set again while it is polled (registered again by the operator) keeps being
// polled: the platform's 409 to getUpdates makes the loop remove the webhook again.
func TestPollingRemovesAWebhookSetAgain(t *testing.T) {
	t.Parallel()
	e := newBotsEnv(t)
	e.tenant("acme", "Acme Dev")
	acme, _ := e.register("acme", "acme_bot", sim.BotConfig{})
	shared := messenger.New(e.api, e.sim.Token(), nil).WithTimeout(5 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- updates.PollBots(ctx, shared, e.reg, e.rc, discardLogger()) }()
	// A webhook that never answers: the platform holds the update there until it is removed.
	release := make(chan struct{})
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		cancel()
		<-done
		close(release)
		elsewhere.Close()
	})
	wait.Until(t, 10*time.Second, "polling to remove acme's webhook", func() bool { return acme.WebhookInfo().URL == "" })
	if err := messenger.New(e.api, acme.Token(), nil).SetWebhook(ctx, elsewhere.URL, "s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.StartUser(601, e.token("acme", "u1", "Acme", "")); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "polling to remove the webhook set again", func() bool { return acme.WebhookInfo().URL == "" })
	wait.Until(t, 10*time.Second, "polling to link", func() bool { _, ok := e.linkOf("acme", "u1"); return ok })
}

// The registry is optional: without it every bot's route is refused like an unknown bot.
func TestBotRoutesWithoutARegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.postTo(bot.WebhookPath(acmeBot), textUpdate(e.updateID(), 42, "/start"), updates.SecretHeader, secret)
	expectError(t, r, http.StatusUnauthorized, "unauthorized")
}
