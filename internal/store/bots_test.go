package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/botstate"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// ownBot records bot id (its token sealed with a stand-in: the store neither seals nor opens) and returns
// it.
func ownBot(t *testing.T, s *store.Store, id notification.BotID) notification.BotID {
	t.Helper()
	token := strconv.FormatInt(int64(id), 10) + ":secret"
	if err := s.UpsertBot(context.Background(), store.Bot{ID: id, Username: "bot" + strconv.FormatInt(int64(id), 10) + "_bot",
		TokenSealed: []byte("sealed " + token), TokenDigest: sha256.Sum256([]byte(token)), State: botstate.Ready}); err != nil {
		t.Fatal(err)
	}
	return id
}

// link links a tenant's user through bot to chat, as a /start with a link token does, and verifies the
// user's phone.
func link(t *testing.T, s *store.Store, tenant, user string, bot notification.BotID, chat int64) {
	t.Helper()
	res := redeem(t, s, tenant, user, bot, chat)
	if res.Outcome != store.LinkLinked {
		t.Fatalf("linking %s/%s through bot %d: %+v", tenant, user, bot, res)
	}
	exec(t, s, `INSERT INTO phone_verifications (tenant_id, user_id, status) VALUES ($1, $2, 'verified')
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET status = 'verified'`, tenant, user)
}

var updateIDs int64

// redeem makes a link token for the user and redeems it in bot, from chat.
func redeem(t *testing.T, s *store.Store, tenant, user string, bot notification.BotID, chat int64) *store.LinkResult {
	t.Helper()
	ctx := context.Background()
	updateIDs++
	digest := sha256.Sum256([]byte(tenant + "/" + user + "/" + strconv.FormatInt(updateIDs, 10)))
	if _, err := s.CreateLinkToken(ctx, tenant, user, digest, "Label"); err != nil {
		t.Fatal(err)
	}
	return redeemDigest(t, s, digest, bot, chat)
}

func redeemDigest(t *testing.T, s *store.Store, digest [32]byte, bot notification.BotID, chat int64) *store.LinkResult {
	t.Helper()
	updateIDs++
	eff, res := store.RedeemLinkToken(updateIDs, store.Redemption{Digest: digest, MessengerUserID: chat, ChatID: chat, Bot: bot},
		func(store.LinkResult) store.NewNotification {
			return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: chat, Bot: bot, Priority: 9, Body: "reply"}
		})
	eff.Bot = bot
	apply(t, s, eff)
	return res
}

// The bots table: a registration is recorded, read back, re-recorded with a new token, listed by change
// for the caches, and its state set once.
func TestBotsAreRecordedReadAndListedByChange(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if _, err := s.GetBot(ctx, 42); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown bot: %v, want ErrNotFound", err)
	}
	secret := sha256.Sum256([]byte("webhook secret"))
	b := store.Bot{ID: 42, Username: "acme_bot", TokenSealed: []byte("sealed-1"), TokenDigest: sha256.Sum256([]byte("42:one")),
		WebhookURL: "https://h.example.com/messenger/webhook/42", WebhookSecretDigest: secret[:], RateLimit: 100, PaidBroadcast: true,
		State: botstate.Ready}
	before := time.Now().Add(-time.Minute)
	if err := s.UpsertBot(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetBot(ctx, 42)
	if err != nil {
		t.Fatal(err)
	}
	b.UpdatedAt = got.UpdatedAt
	if !botsEqual(got, b) {
		t.Fatalf("read %+v, want %+v", got, b)
	}

	// A new token for the same bot, without a new webhook: the webhook recorded stays; the rate goes back to
	// the default.
	b.TokenSealed, b.TokenDigest, b.WebhookURL, b.WebhookSecretDigest, b.RateLimit, b.PaidBroadcast = []byte("sealed-2"), sha256.Sum256([]byte("42:two")), "", nil, 0, false
	if err := s.UpsertBot(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetBot(ctx, 42)
	if string(got.TokenSealed) != "sealed-2" || got.TokenDigest != b.TokenDigest || string(got.WebhookSecretDigest) != string(secret[:]) ||
		got.WebhookURL != "https://h.example.com/messenger/webhook/42" ||
		got.RateLimit != 0 || got.PaidBroadcast || !got.UpdatedAt.After(before) {
		t.Errorf("after a new token: %+v", got)
	}
	for _, bad := range []store.Bot{{ID: 0, Username: "x", State: botstate.Ready}, {ID: 43, Username: "x", State: botstate.Ready, RateLimit: 1001},
		{ID: 43, Username: "x", State: "sleepy"}} {
		if err := s.UpsertBot(ctx, bad); err == nil {
			t.Errorf("recorded %+v", bad)
		}
	}

	// The caches' read: what changed at or after a time, oldest first.
	ownBot(t, s, 43)
	all, err := s.BotsChangedSince(ctx, time.Time{})
	if err != nil || len(all) != 2 || all[0].ID != 42 || all[1].ID != 43 {
		t.Fatalf("every bot: %v %+v", err, all)
	}
	later, err := s.BotsChangedSince(ctx, all[1].UpdatedAt)
	if err != nil || len(later) != 1 || later[0].ID != 43 {
		t.Errorf("changed since the second: %v %+v", err, later)
	}

	// A worker's 401: the state changes once, however many sends meet it.
	for i, want := range []bool{true, false} {
		changed, err := s.SetBotState(ctx, 42, botstate.TokenInvalid, "the platform refused the token")
		if err != nil || changed != want {
			t.Errorf("marking the token refused (%d): %v %v, want changed %v", i, changed, err, want)
		}
	}
	if got, _ := s.GetBot(ctx, 42); got.State != botstate.TokenInvalid || got.StateMessage != "the platform refused the token" {
		t.Errorf("state %q %q", got.State, got.StateMessage)
	}
	if changed, err := s.SetBotState(ctx, 42, botstate.Ready, ""); err != nil || !changed {
		t.Errorf("back to ready: %v %v", changed, err)
	}
	if _, err := s.SetBotState(ctx, 44, botstate.Ready, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the state of an unknown bot: %v, want ErrNotFound", err)
	}
}

func botsEqual(a, b store.Bot) bool {
	return a.ID == b.ID && a.Username == b.Username && string(a.TokenSealed) == string(b.TokenSealed) && a.TokenDigest == b.TokenDigest &&
		a.WebhookURL == b.WebhookURL && string(a.WebhookSecretDigest) == string(b.WebhookSecretDigest) && a.RateLimit == b.RateLimit && a.PaidBroadcast == b.PaidBroadcast &&
		a.State == b.State && a.StateMessage == b.StateMessage && a.UpdatedAt.Equal(b.UpdatedAt)
}

// The gate records the bot of the user's link on the notification, with the chat, and returns both; the
// claim returns the bot to send through, and whether its token was refused. A tenant without a bot records
// no bot (NULL: the shared one), as before.
func TestTheGateRecordsTheBotOfTheLink(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	bot := ownBot(t, s, 700)
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetTenantBot(ctx, "globex", bot); err != nil {
		t.Fatal(err)
	}
	link(t, s, "globex", "g1", bot, 55)
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'globex' AND user_id = 'g1' AND bot_id = 700 AND chat_id = 55`); n != 1 {
		t.Fatal("the link does not record the bot it was made through")
	}

	own := tenantNotification("g1")
	own.TenantID = "globex"
	shared := tenantNotification("ok")
	got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{own, shared})
	if err != nil {
		t.Fatal(err)
	}
	if got[own.TrackingID] != (store.Destination{Bot: bot, Chat: 55}) || got[shared.TrackingID] != (store.Destination{Bot: notification.SharedBot, Chat: 1}) {
		t.Fatalf("accepted %+v, want globex's through bot 700 to chat 55, acme's through the shared bot to chat 1", got)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND bot_id = 700 AND chat_id = 55`, own.TrackingID); n != 1 {
		t.Error("the row does not record the link's bot")
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND bot_id IS NULL`, shared.TrackingID); n != 1 {
		t.Error("a notification of a tenant without a bot records a bot")
	}

	d, err := s.ClaimDelivery(ctx, own.TrackingID, time.Minute)
	if err != nil || d.Bot != bot || d.ChatID != 55 || d.Relinked || d.BotTokenRefused {
		t.Fatalf("claim: %+v %v, want bot 700, chat 55", d, err)
	}
	if d, err := s.ClaimDelivery(ctx, shared.TrackingID, time.Minute); err != nil || d.Bot != notification.SharedBot || d.ChatID != 1 {
		t.Fatalf("claim of the shared bot's: %+v %v", d, err)
	}

	// Once the platform refused the bot's token, a claim says so (the worker sends nothing through it).
	if _, err := s.SetBotState(ctx, bot, botstate.TokenInvalid, "401"); err != nil {
		t.Fatal(err)
	}
	later := tenantNotification("g1")
	later.TenantID = "globex"
	if _, err := s.InsertTenantNotifications(ctx, []store.NewNotification{later}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.ClaimDelivery(ctx, later.TrackingID, time.Minute); err != nil || d.Bot != bot || !d.BotTokenRefused {
		t.Errorf("claim after the token was refused: %+v %v, want BotTokenRefused", d, err)
	}

	// What is published again keys by the same bot and chat.
	exec(t, s, `UPDATE notifications SET status = 'retrying', next_attempt_at = now() - interval '1s', published_at = NULL WHERE kind = 'tenant'`)
	var pending []store.Pending
	if _, err := s.RepublishDueRetries(ctx, 10, time.Minute, func(_ context.Context, batch []store.Pending) []string {
		pending = batch
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		want := store.Destination{Bot: notification.SharedBot, Chat: 1}
		if p.TenantID == "globex" {
			want = store.Destination{Bot: bot, Chat: 55}
		}
		if (store.Destination{Bot: p.Bot, Chat: p.ChatID}) != want {
			t.Errorf("republished %s/%s to bot %d chat %d, want %+v", p.TenantID, p.TrackingID, p.Bot, p.ChatID, want)
		}
	}
	if len(pending) != 3 {
		t.Errorf("republished %d, want 3", len(pending))
	}
}

// A system message carries the bot it goes through, and the claim returns it; a verification prompt goes
// through the bot of the user's link.
func TestSystemMessagesCarryTheirBot(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	bot := ownBot(t, s, 701)
	reply := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 9, Bot: bot, Priority: 9, Body: "hi"}
	if err := s.InsertSystemMessage(ctx, reply); err != nil {
		t.Fatal(err)
	}
	if d, err := s.ClaimDelivery(ctx, reply.TrackingID, time.Minute); err != nil || d.Bot != bot || d.ChatID != 9 {
		t.Errorf("claim of a system message through bot 701: %+v %v", d, err)
	}

	if _, err := s.SetTenantBot(ctx, "acme", bot); err != nil {
		t.Fatal(err)
	}
	link(t, s, "acme", "v", bot, 31)
	_, prompt, err := s.StartVerification(ctx, "acme", "v", "Acme", func(chat int64) store.NewNotification {
		return store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: chat, Priority: 9, Body: "share"}
	})
	if err != nil || prompt.Bot != bot || prompt.ChatID != 31 {
		t.Fatalf("the prompt: %+v %v, want chat 31 through bot 701", prompt, err)
	}
	if d, err := s.ClaimDelivery(ctx, prompt.TrackingID, time.Minute); err != nil || d.Bot != bot {
		t.Errorf("claim of the prompt: %+v %v", d, err)
	}

	// The contact shared with another bot completes nothing: the session is of bot 701's chat.
	share := func(b notification.BotID) *store.VerificationResult {
		updateIDs++
		eff, res := store.CompleteVerifications(updateIDs, store.ContactShare{MessengerUserID: 31, PhoneLast4: "1234", Bot: b},
			func(store.VerificationResult) []store.NewNotification { return nil })
		eff.Bot = b
		if err := s.ApplyUpdates(context.Background(), []*store.Effect{eff}); err != nil {
			t.Fatal(err)
		}
		return res
	}
	exec(t, s, `UPDATE phone_verifications SET status = 'pending', session_expires_at = now() + interval '5 minutes' WHERE user_id = 'v'`)
	if res := share(notification.SharedBot); len(res.Verified) != 0 {
		t.Errorf("a contact shared with the shared bot verified %+v", res.Verified)
	}
	if res := share(bot); len(res.Verified) != 1 || res.Verified[0].UserID != "v" {
		t.Errorf("a contact shared with bot 701 verified %+v, want v", res.Verified)
	}
}

// A link token links only through its tenant's bot: redeemed in another bot it links nothing and stays
// valid; in the tenant's bot it links, and the link belongs to that bot.
func TestALinkTokenLinksOnlyThroughItsTenantsBot(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	bot := ownBot(t, s, 702)
	other := ownBot(t, s, 703)
	if _, err := s.SetTenantBot(ctx, "acme", bot); err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("carol's token"))
	if _, err := s.CreateLinkToken(ctx, "acme", "carol", digest, "Acme"); err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []notification.BotID{notification.SharedBot, other} {
		if res := redeemDigest(t, s, digest, wrong, 77); res.Outcome != store.LinkWrongBot || res.TenantID != "acme" || res.Label != "Acme" {
			t.Errorf("redeemed in bot %d: %+v, want wrong_bot with the tenant's label", wrong, res)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE user_id = 'carol'`); n != 0 {
		t.Fatal("a token redeemed in the wrong bot linked")
	}
	if res := redeemDigest(t, s, digest, bot, 77); res.Outcome != store.LinkLinked || res.UserID != "carol" {
		t.Fatalf("redeemed in the tenant's bot: %+v", res)
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE user_id = 'carol' AND bot_id = 702 AND chat_id = 77`); n != 1 {
		t.Error("the link does not belong to bot 702")
	}
	if res := redeemDigest(t, s, digest, bot, 77); res.Outcome != store.LinkUsed {
		t.Errorf("redeemed again: %+v, want used", res)
	}
	exec(t, s, `UPDATE link_tokens SET used_at = NULL, expires_at = now() - interval '1s'`)
	if res := redeemDigest(t, s, digest, other, 77); res.Outcome != store.LinkExpired {
		t.Errorf("an expired token redeemed in the wrong bot: %+v, want expired", res)
	}
}

// One person's chats with two bots have the same id: a notification accepted for the chat of one bot is
// not for the same chat of another. A relink through another bot ends what waits for the old bot's chat,
// and a claim after it is Relinked; the platform's "chat not found" through one bot removes that bot's link
// only.
func TestTheSameChatOfAnotherBotIsAnotherChat(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	bot := ownBot(t, s, 704)
	waiting, running := queued(t, s), queued(t, s) // user "ok": chat 1 of the shared bot
	d, err := s.ClaimDelivery(ctx, running, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's links are of the shared bot; a link token of a tenant with a bot is redeemed in it. Here
	// the row is moved by hand to stand for a relink of the same chat through bot 704.
	exec(t, s, `UPDATE tenants SET bot_id = 704 WHERE id = 'acme'`)
	res := redeem(t, s, "acme", "ok", bot, 1)
	if res.Outcome != store.LinkLinked {
		t.Fatalf("relink through bot 704 to the same chat id: %+v, want linked", res)
	}
	if st := statusOf(t, s, waiting); st != notification.Unlinked {
		t.Errorf("the waiting notification is %s, want unlinked", st)
	}
	// The attempt that was running fails transiently; its retry must not go to bot 704's chat.
	if ok, err := s.FinishDelivery(ctx, d, notification.DeliveryResult{Status: notification.Retrying, ErrorCode: 500, ErrorMessage: "x"}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	exec(t, s, `UPDATE notifications SET next_attempt_at = now() - interval '1s' WHERE tracking_id = $1`, running)
	if d, err := s.ClaimDelivery(ctx, running, time.Minute); err != nil || !d.Relinked || d.ChatID != 0 || d.Bot != notification.SharedBot {
		t.Errorf("the retry: %+v %v, want Relinked, no chat, the shared bot it was accepted for", d, err)
	}

	// "chat not found" through the shared bot: bot 704's link to the same chat id stays.
	sys := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, TenantID: "acme", ChatID: 1, Priority: 9, Body: "x"}
	if err := s.InsertSystemMessage(ctx, sys); err != nil {
		t.Fatal(err)
	}
	d, err = s.ClaimDelivery(ctx, sys.TrackingID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.FinishDelivery(ctx, d, notification.DeliveryResult{Status: notification.Unlinked, ErrorCode: 400, ErrorMessage: "chat not found", RemoveLink: true}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'acme' AND user_id = 'ok' AND bot_id = 704`); n != 1 {
		t.Error("the shared bot's 'chat not found' removed bot 704's link")
	}
}

// §11 "Changing the bot", in one transaction: a new token for the same bot keeps everything; another bot,
// or none, ends the links made through the old one, resets those users' verifications, and ends their
// waiting notifications unlinked (1103) with their notification.unlinked events. A notification being
// delivered, a finished one, another tenant's (even of the same bot) and a user linked through another bot
// are left alone.
func TestChangingTheBot(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	first, second := ownBot(t, s, 705), ownBot(t, s, 706)
	ep := endpoint(t, s, "acme", "notification.unlinked")
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if c, err := s.SetTenantBot(ctx, tenant, first); err != nil || !c.Changed || c.Previous != notification.SharedBot {
			t.Fatalf("%s to its own bot: %+v %v", tenant, c, err)
		}
	}
	// The fixture's links were made through the shared bot: the move to bot 705 ended them.
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'acme'`); n != 0 {
		t.Fatalf("%d links of the shared bot left after the move to bot 705", n)
	}
	link(t, s, "acme", "a1", first, 11)
	link(t, s, "acme", "a2", first, 12)
	link(t, s, "globex", "g1", first, 11)
	insertFor := func(tenant, user string) string {
		n := tenantNotification(user)
		n.TenantID = tenant
		if got, err := s.InsertTenantNotifications(ctx, []store.NewNotification{n}); err != nil || len(got) != 1 {
			t.Fatalf("insert for %s/%s: %v %v", tenant, user, got, err)
		}
		return n.TrackingID
	}
	waiting := []string{insertFor("acme", "a1"), insertFor("acme", "a2"), insertFor("acme", "a2")}
	exec(t, s, `UPDATE notifications SET status = 'scheduled', send_at = now() + interval '1 hour', published_at = NULL WHERE tracking_id = $1`, waiting[1])
	exec(t, s, `UPDATE notifications SET status = 'retrying', next_attempt_at = now() + interval '1 hour' WHERE tracking_id = $1`, waiting[2])
	running, done, globex := insertFor("acme", "a1"), insertFor("acme", "a1"), insertFor("globex", "g1")
	if _, err := s.ClaimDelivery(ctx, running, time.Minute); err != nil {
		t.Fatal(err)
	}
	finish(t, s, done, notification.DeliveryResult{Status: notification.Delivered, MessengerMessageID: "1"})
	before := statuses(t, s)

	// A new token for the same bot: nothing changes.
	if c, err := s.SetTenantBot(ctx, "acme", first); err != nil || c.Changed || c.LinksEnded != 0 || c.Unlinked != 0 || c.Previous != first {
		t.Fatalf("the same bot again: %+v %v", c, err)
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'acme'`); n != 2 {
		t.Fatalf("the same bot again left %d links, want 2", n)
	}

	// Another bot.
	c, err := s.SetTenantBot(ctx, "acme", second)
	if err != nil || !c.Changed || c.Previous != first || c.LinksEnded != 2 || c.Unlinked != 3 {
		t.Fatalf("acme to bot 706: %+v %v, want 2 links and 3 notifications ended", c, err)
	}
	var tenantBot int64
	if err := s.Pool().QueryRow(ctx, `SELECT bot_id FROM tenants WHERE id = 'acme'`).Scan(&tenantBot); err != nil || tenantBot != 706 {
		t.Errorf("acme's bot %d %v, want 706", tenantBot, err)
	}
	after := statuses(t, s)
	for _, id := range waiting {
		if after[id] != notification.Unlinked {
			t.Errorf("a waiting notification (%s) is %s, want unlinked", before[id], after[id])
		}
		var code int
		var msg string
		if err := s.Pool().QueryRow(ctx, `SELECT last_error_code, last_error_message FROM notifications WHERE tracking_id = $1`, id).Scan(&code, &msg); err != nil ||
			code != notification.CodeBotChanged || msg != notification.BotChangedMessage {
			t.Errorf("unlinked with %d %q %v, want %d %q", code, msg, err, notification.CodeBotChanged, notification.BotChangedMessage)
		}
	}
	for _, id := range []string{running, done, globex} {
		if after[id] != before[id] {
			t.Errorf("a notification that was %s is %s", before[id], after[id])
		}
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'acme'`); n != 0 {
		t.Errorf("%d of acme's links of bot 705 left", n)
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE tenant_id = 'globex' AND bot_id = 705`); n != 1 {
		t.Error("globex's link through the same bot ended")
	}
	if n := count(t, s, `SELECT count(*) FROM phone_verifications WHERE tenant_id = 'acme' AND user_id IN ('a1', 'a2') AND status = 'unverified'
		AND phone_hash IS NULL AND verified_at IS NULL`); n != 2 {
		t.Errorf("%d of the 2 users' verifications reset", n)
	}
	var unlinked []string
	for _, e := range events(t, s) {
		if e.EndpointID == ep && e.Type == "notification.unlinked" {
			unlinked = append(unlinked, e.TrackingID)
		}
	}
	slices.Sort(unlinked)
	want := slices.Sorted(slices.Values(waiting))
	if !slices.Equal(unlinked, want) {
		t.Errorf("notification.unlinked events for %v, want %v", unlinked, want)
	}
	// The users link again, through the new bot, and are sent to.
	link(t, s, "acme", "a1", second, 11)
	if id := insertFor("acme", "a1"); count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = $1 AND bot_id = 706`, id) != 1 {
		t.Error("a send after the relink does not go through bot 706")
	}

	// Back to the shared bot: bot 706's links end in turn.
	if c, err := s.SetTenantBot(ctx, "acme", notification.SharedBot); err != nil || !c.Changed || c.Previous != second || c.LinksEnded != 1 || c.Unlinked != 1 {
		t.Errorf("acme back to the shared bot: %+v %v", c, err)
	}
	if err := s.Pool().QueryRow(ctx, `SELECT COALESCE(bot_id, 0) FROM tenants WHERE id = 'acme'`).Scan(&tenantBot); err != nil || tenantBot != 0 {
		t.Errorf("acme's bot %d %v, want none", tenantBot, err)
	}

	if _, err := s.SetTenantBot(ctx, "nobody", first); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown tenant: %v, want ErrNotFound", err)
	}
	if _, err := s.SetTenantBot(ctx, "acme", 999); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an unknown bot: %v, want ErrConflict", err)
	}
}

// A link token redeemed while the tenant changes its bot: the change waits for the link and then ends
// it, or the redemption waits for the change and then finds the token is for another bot. Never a link of
// the old bot left after the change.
func TestAChangeOfBotAndARedemptionSerialise(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	first, second := ownBot(t, s, 707), ownBot(t, s, 708)
	if _, err := s.SetTenantBot(ctx, "acme", first); err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("racing token"))
	if _, err := s.CreateLinkToken(ctx, "acme", "racer", digest, "Acme"); err != nil {
		t.Fatal(err)
	}
	// The change has taken the tenant's bot lock and moved the tenant when the redemption starts.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := store.LockTenantBotForTest(ctx, tx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE tenants SET bot_id = 708 WHERE id = 'acme'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan *store.LinkResult, 1)
	go func() { done <- redeemDigest(t, s, digest, first, 91) }()
	select {
	case res := <-done:
		t.Fatalf("the redemption did not wait for the change of bot: %+v", res)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Outcome != store.LinkWrongBot {
		t.Errorf("the redemption after the change: %+v, want wrong_bot", res)
	}
	if n := count(t, s, `SELECT count(*) FROM links WHERE user_id = 'racer'`); n != 0 {
		t.Error("a link of the old bot was made after the change")
	}

	// The other way round: a redemption through bot 708 holds the lock shared and links; the change back to
	// bot 707 waits for it, then ends that link.
	tx, err = s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := store.LockTenantBotSharedForTest(ctx, tx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO links (tenant_id, user_id, messenger_user_id, chat_id, bot_id) VALUES ('acme', 'racer', 91, 91, 708)`); err != nil {
		t.Fatal(err)
	}
	changed := make(chan store.BotChange, 1)
	go func() {
		c, err := s.SetTenantBot(ctx, "acme", first)
		if err != nil {
			t.Error(err)
		}
		changed <- c
	}()
	select {
	case c := <-changed:
		t.Fatalf("the change of bot did not wait for the redemption: %+v", c)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c := <-changed; c.LinksEnded != 1 {
		t.Errorf("the change after the redemption ended %d links, want the new one", c.LinksEnded)
	}
	_ = second
}

// Update ids are per bot: the same update id of two bots takes effect twice, once per bot; a repeat of one
// bot's is a repeat. The purge of old ones removes exactly those.
func TestProcessedUpdatesArePerBot(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	apply := func(bot notification.BotID, id int64) error {
		eff := store.ReplyEffect(id, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 5, Bot: bot, Priority: 9, Body: "r"})
		eff.Bot = bot
		if err := s.ApplyUpdates(ctx, []*store.Effect{eff}); err != nil {
			t.Fatal(err)
		}
		return eff.Err
	}
	for _, bot := range []notification.BotID{notification.SharedBot, 709, 710} {
		if err := apply(bot, 1000); err != nil {
			t.Errorf("update 1000 of bot %d: %v, want applied", bot, err)
		}
	}
	if err := apply(709, 1000); !errors.Is(err, store.ErrUpdateProcessed) {
		t.Errorf("update 1000 of bot 709 again: %v, want a repeat", err)
	}
	// Two copies in one batch, and one of another bot beside them.
	effs := []*store.Effect{store.ReplyEffect(2000, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 5, Priority: 9, Body: "r"}),
		store.ReplyEffect(2000, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 5, Priority: 9, Body: "r"}),
		store.ReplyEffect(2000, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 5, Bot: 709, Priority: 9, Body: "r"})}
	effs[0].Bot, effs[1].Bot, effs[2].Bot = 710, 710, 709
	if err := s.ApplyUpdates(ctx, effs); err != nil {
		t.Fatal(err)
	}
	if effs[0].Err != nil || !errors.Is(effs[1].Err, store.ErrUpdateProcessed) || effs[2].Err != nil {
		t.Errorf("a batch: %v %v %v, want applied, repeat, applied", effs[0].Err, effs[1].Err, effs[2].Err)
	}

	// Bot 709's update 1000 is old, the others are not: the purge takes it alone.
	exec(t, s, `UPDATE processed_updates SET processed_at = now() - interval '3 days' WHERE bot_id = 709 AND update_id = 1000`)
	n, err := s.Purge(ctx, store.PurgeProcessedUpdates, store.RetentionPolicy{}, 100)
	if err != nil || n != 1 {
		t.Fatalf("purge: %d %v, want 1", n, err)
	}
	if n := count(t, s, `SELECT count(*) FROM processed_updates WHERE update_id = 1000`); n != 2 {
		t.Errorf("%d of the other bots' update 1000 left, want 2", n)
	}
}
