package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

// userEvent is a user.* event in the outbox, with its data.
type userEvent struct {
	Type, UserID string
	Data         map[string]any
}

// userEventsOf dispatches the inbox and lists tenant's user.* events of the given types, oldest first.
func userEventsOf(t *testing.T, s *store.Store, tenant string, types ...string) []userEvent {
	t.Helper()
	events(t, s) // dispatch
	rows, err := s.Pool().Query(context.Background(), `
		SELECT e.type, COALESCE(e.user_id, ''), e.data FROM callback_events e JOIN callback_endpoints ep ON ep.id = e.endpoint_id
		WHERE ep.tenant_id = $1 AND e.type = ANY ($2) ORDER BY e.id`, tenant, types)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []userEvent
	for rows.Next() {
		var e userEvent
		var data []byte
		if err := rows.Scan(&e.Type, &e.UserID, &data); err != nil {
			t.Fatal(err)
		}
		if data != nil {
			if err := json.Unmarshal(data, &e.Data); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, e)
	}
	return out
}

// categorised is a notification of user "ok" in category (none when empty).
func categorised(category string) store.NewNotification {
	n := tenantNotification("ok")
	n.Category = category
	return n
}

// lastError reads a notification's state and last error.
func lastError(t *testing.T, s *store.Store, id string) (notification.Status, int, string) {
	t.Helper()
	var st notification.Status
	var code int
	var msg *string
	if err := s.Pool().QueryRow(context.Background(), `SELECT status, last_error_code, last_error_message FROM notifications WHERE tracking_id = $1`, id).
		Scan(&st, &code, &msg); err != nil {
		t.Fatal(err)
	}
	if msg == nil {
		return st, code, ""
	}
	return st, code, *msg
}

// §9: an opt-out ends, in its own transaction, the user's notifications still scheduled, queued or retrying
// that it covers — blocked, "opted out" — each with its notification.blocked event, and records
// user.opted_out with its category and who made it. A category covers only its own; the whole tenant covers
// every one. One being delivered is its attempt's; a terminal one stays as it is.
func TestAnOptOutEndsTheWaitingNotificationsItCovers(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	endpoint(t, s, "acme")
	promo := insert(t, s, categorised("promo"))
	scheduledPromo := categorised("promo")
	scheduledPromo.Status, scheduledPromo.SendAt = notification.Scheduled, at(time.Hour)
	insert(t, s, scheduledPromo)
	news := insert(t, s, categorised("news"))
	plain := insert(t, s, categorised(""))
	retrying, delivering, delivered := insert(t, s, categorised("promo")), insert(t, s, categorised("promo")), insert(t, s, categorised("promo"))
	exec(t, s, `UPDATE notifications SET status = 'retrying', next_attempt_at = now() + interval '1 hour' WHERE tracking_id = $1`, retrying)
	exec(t, s, `UPDATE notifications SET status = 'delivering', attempts = 1, lease_expires_at = now() + interval '1 minute' WHERE tracking_id = $1`, delivering)
	exec(t, s, `UPDATE notifications SET status = 'delivered', attempts = 1 WHERE tracking_id = $1`, delivered)
	others := insert(t, s, store.NewNotification{TrackingID: newID(), Kind: notification.KindTenant, TenantID: "acme", UserID: "ok", Priority: 5, Body: "x", Category: "promox"})

	res, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByTenant)
	if err != nil || !res.Made || res.Ended != 3 {
		t.Fatalf("opt out of promo: %+v %v, want made, 3 ended", res, err)
	}
	for _, id := range []string{promo, scheduledPromo.TrackingID, retrying} {
		if st, code, msg := lastError(t, s, id); st != notification.Blocked || code != notification.CodeOptedOut || msg != "opted out" {
			t.Errorf("a waiting promo notification: %s %d %q, want blocked 1106 \"opted out\"", st, code, msg)
		}
	}
	for id, want := range map[string]notification.Status{news: notification.Queued, plain: notification.Queued, delivering: notification.Delivering,
		delivered: notification.Delivered, others: notification.Queued} {
		if st := statusOf(t, s, id); st != want {
			t.Errorf("a notification the opt-out of promo does not cover is %s, want %s", st, want)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM callback_inbox WHERE type = 'notification.blocked'`) +
		count(t, s, `SELECT count(*) FROM callback_events WHERE type = 'notification.blocked'`); n != 3 {
		t.Errorf("%d notification.blocked events, want one per ended notification (3)", n)
	}
	got := userEventsOf(t, s, "acme", store.EventUserOptedOut)
	if len(got) != 1 || got[0].UserID != "ok" || got[0].Data["category"] != "promo" || got[0].Data["by"] != "tenant" {
		t.Errorf("user.opted_out events %+v, want one for ok, category promo, by tenant", got)
	}

	// Again: nothing new, no event. Then the whole tenant: every waiting one ends, the event's category is null.
	if res, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByTenant); err != nil || res.Made || res.Ended != 0 {
		t.Errorf("the same opt-out again: %+v %v, want nothing", res, err)
	}
	if res, err := s.OptOut(ctx, "acme", "ok", "", consent.ByUser); err != nil || !res.Made || res.Ended != 3 {
		t.Errorf("opt out of the tenant: %+v %v, want made, 3 ended (news, plain, promox)", res, err)
	}
	got = userEventsOf(t, s, "acme", store.EventUserOptedOut)
	if len(got) != 2 || got[1].Data["category"] != nil || got[1].Data["by"] != "user" {
		t.Errorf("user.opted_out events %+v, want a second one, category null, by user", got)
	}
	if _, ok := got[1].Data["category"]; !ok {
		t.Error("the whole tenant's event has no category field: the contract says null")
	}
	if st := statusOf(t, s, delivering); st != notification.Delivering {
		t.Errorf("the notification being delivered is %s: an opt-out leaves it to its attempt", st)
	}
	if _, err := s.OptOut(ctx, "acme", "never-seen", "", consent.ByTenant); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an opt-out of a user the tenant never had: %v, want ErrNotFound", err)
	}
}

// The by-user rule: a tenant cannot lift the opt-out its user made in the chat, nor take it over by making it
// again; the user lifts either kind, and taking over the tenant's makes it the user's. Each lift records
// user.opted_in saying who lifted it.
func TestATenantCannotLiftTheUsersOwnOptOut(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	endpoint(t, s, "acme")
	by := func(category string) string {
		var b string
		if err := s.Pool().QueryRow(ctx, `SELECT by FROM opt_outs WHERE tenant_id = 'acme' AND user_id = 'ok' AND category = $1`, category).Scan(&b); err != nil {
			return "none"
		}
		return b
	}

	if _, err := s.OptOut(ctx, "acme", "ok", "", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	if res, err := s.OptOut(ctx, "acme", "ok", "", consent.ByTenant); err != nil || res.Made || by("") != "user" {
		t.Errorf("the tenant makes the user's opt-out again: %+v %v, by %s; want nothing changed, still the user's", res, err, by(""))
	}
	if lifted, err := s.LiftOptOut(ctx, "acme", "ok", "", consent.ByTenant); !errors.Is(err, store.ErrOptedOutByUser) || lifted || by("") != "user" {
		t.Errorf("the tenant lifts the user's opt-out: %v %v; want ErrOptedOutByUser and the opt-out kept", lifted, err)
	}
	if lifted, err := s.LiftOptOut(ctx, "acme", "ok", "", consent.ByUser); err != nil || !lifted || by("") != "none" {
		t.Errorf("the user lifts their own: %v %v, left %s", lifted, err, by(""))
	}

	// The tenant's own: the tenant lifts it; the user takes it over, and then the tenant cannot.
	if _, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	if lifted, err := s.LiftOptOut(ctx, "acme", "ok", "promo", consent.ByTenant); err != nil || !lifted {
		t.Errorf("the tenant lifts its own: %v %v", lifted, err)
	}
	if _, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	if res, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByUser); err != nil || !res.Made || by("promo") != "user" {
		t.Errorf("the user stops what the tenant stopped: %+v %v, by %s; want it the user's now", res, err, by("promo"))
	}
	if _, err := s.LiftOptOut(ctx, "acme", "ok", "promo", consent.ByTenant); !errors.Is(err, store.ErrOptedOutByUser) {
		t.Errorf("the tenant lifts what the user took over: %v, want ErrOptedOutByUser", err)
	}
	if lifted, err := s.LiftOptOut(ctx, "acme", "ok", "news", consent.ByTenant); err != nil || lifted {
		t.Errorf("lifting what was never stopped: %v %v, want nothing and no error", lifted, err)
	}
	if _, err := s.LiftOptOut(ctx, "acme", "never-seen", "", consent.ByTenant); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a lift for a user the tenant never had: %v, want ErrNotFound", err)
	}

	var got []string
	for _, e := range userEventsOf(t, s, "acme", store.EventUserOptedOut, store.EventUserOptedIn) {
		got = append(got, e.Type+" "+e.Data["by"].(string))
	}
	want := []string{"user.opted_out user", "user.opted_in user", "user.opted_out tenant", "user.opted_in tenant",
		"user.opted_out tenant", "user.opted_out user"}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	records, err := s.OptOutsOf(ctx, "acme", "ok")
	if err != nil || len(records) != 1 || records[0].Category != "promo" || records[0].By != consent.ByUser {
		t.Errorf("the user's opt-outs: %+v %v, want promo by the user", records, err)
	}
}

// The send gate refuses a user who opted out of the tenant, or of the send's category, and stores nothing
// for it; the refusal is told apart from an unverified phone afterwards.
func TestTheGateRefusesWhatAnOptOutCovers(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	if _, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	promo, news, plain, unverified := categorised("promo"), categorised("news"), categorised(""), tenantNotification("no")
	got, covered, err := s.AcceptTenantNotifications(ctx, []store.NewNotification{promo, news, plain, unverified})
	if err != nil || len(got) != 2 || !isIn(got, news.TrackingID) || !isIn(got, plain.TrackingID) {
		t.Fatalf("accepted %v (%v), want news and the one without a category", got, err)
	}
	if len(covered) != 1 || covered[promo.TrackingID] != "promo" {
		t.Errorf("covered %v, want the promo one, by the opt-out of promo", covered)
	}

	if _, err := s.OptOut(ctx, "acme", "ok", "", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	again := []store.NewNotification{categorised("promo"), categorised("news"), categorised("")}
	got, covered, err = s.AcceptTenantNotifications(ctx, again)
	if err != nil || len(got) != 0 {
		t.Errorf("after the opt-out of the tenant: accepted %v (%v), want none", got, err)
	}
	if len(covered) != 3 || covered[again[0].TrackingID] != "" || covered[again[1].TrackingID] != "" {
		t.Errorf("covered %v, want all three, by the opt-out of the tenant", covered)
	}
	if n := count(t, s, `SELECT count(*) FROM notifications WHERE tracking_id = ANY ($1::uuid[])`,
		[]string{promo.TrackingID, again[0].TrackingID, again[1].TrackingID, again[2].TrackingID}); n != 0 {
		t.Errorf("%d refused notifications stored", n)
	}
	// Another tenant's user with the same id is not covered.
	if err := s.CreateTenant(ctx, "globex", "Globex"); err != nil {
		t.Fatal(err)
	}
	verifiedUser(t, s, "globex", "ok", 1)
	g := tenantNotification("ok")
	g.TenantID = "globex"
	insert(t, s, g)
}

func isIn(m map[string]store.Destination, id string) bool { _, ok := m[id]; return ok }

// A send racing an opt-out: both take the user's gate lock (shared for the send, exclusive for the
// opt-out). A send that passed the gate first commits before the opt-out reads what it ends, and is ended;
// one that comes while the opt-out holds the lock finds the opt-out and is refused. So nothing accepted
// before the opt-out returns is left waiting.
func TestAnOptOutAndASendSerialiseOnTheGate(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	n := tenantNotification("ok")
	sendHolds, release := make(chan struct{}), make(chan struct{})
	releaseSend := sync.OnceFunc(func() { close(release) })
	defer releaseSend()
	sendDone := make(chan error, 1)
	go func() {
		sendDone <- s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			got, err := tx.InsertTenantNotifications(ctx, []store.NewNotification{n})
			if _, ok := got[n.TrackingID]; err == nil && !ok {
				err = errors.New("not accepted")
			}
			close(sendHolds)
			<-release
			return err
		})
	}()
	<-sendHolds
	optOutDone := make(chan error, 1)
	go func() { _, err := s.OptOut(ctx, "acme", "ok", "", consent.ByUser); optOutDone <- err }()
	select {
	case err := <-optOutDone:
		t.Fatalf("the opt-out did not wait for the send that passed the gate (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	releaseSend()
	if err := <-sendDone; err != nil {
		t.Fatal(err)
	}
	if err := <-optOutDone; err != nil {
		t.Fatal(err)
	}
	if st, code, _ := lastError(t, s, n.TrackingID); st != notification.Blocked || code != notification.CodeOptedOut {
		t.Errorf("the send that completed before the opt-out is %s (%d), want blocked by it", st, code)
	}
}

// The claim reads the block of the link it sends through and the opt-outs that cover the notification
// (tenant-wide, or its category): what the worker needs to end it without a call. A notification whose
// user has neither is claimed as before.
func TestTheClaimReadsTheBlockAndTheOptOuts(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	claim := func(n store.NewNotification) notification.Delivery {
		t.Helper()
		id := insert(t, s, n)
		d, err := s.ClaimDelivery(ctx, id, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := claim(categorised("promo")); d.Blocked || d.OptedOut {
		t.Errorf("a notification of a user who neither blocked nor opted out: %+v", d)
	}
	// An opt-out that came after the notification was accepted, without ending it (as when a worker holds its
	// envelope): the claim sees it.
	promo, news := insert(t, s, categorised("promo")), insert(t, s, categorised("news"))
	exec(t, s, `INSERT INTO opt_outs (tenant_id, user_id, category, by) VALUES ('acme', 'ok', 'promo', 'user')`)
	for id, want := range map[string]bool{promo: true, news: false} {
		d, err := s.ClaimDelivery(ctx, id, time.Minute)
		if err != nil || d.OptedOut != want || d.Blocked {
			t.Errorf("claim: %+v %v, want opted out %v", d, err, want)
		}
		if r, stop := d.Stopped(); stop && (r.ErrorCode != notification.CodeOptedOut || r.Status != notification.Blocked) {
			t.Errorf("the outcome of a claim that found an opt-out: %+v", r)
		}
	}
	plain := insert(t, s, categorised(""))
	exec(t, s, `INSERT INTO opt_outs (tenant_id, user_id, category, by) VALUES ('acme', 'ok', '', 'tenant')`)
	if d, err := s.ClaimDelivery(ctx, plain, time.Minute); err != nil || !d.OptedOut {
		t.Errorf("claim after an opt-out of the tenant: %+v %v", d, err)
	}
	exec(t, s, `DELETE FROM opt_outs`)

	before := insert(t, s, categorised(""))
	if n, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, true); err != nil || n != 1 {
		t.Fatalf("marking chat 1 blocked: %d %v", n, err)
	}
	d, err := s.ClaimDelivery(ctx, before, time.Minute)
	if err != nil || !d.Blocked || d.OptedOut || d.ChatID != 1 {
		t.Errorf("claim of a notification of a blocked user: %+v %v", d, err)
	}
	if r, stop := d.Stopped(); !stop || r.ErrorCode != notification.CodeBlocked {
		t.Errorf("its outcome %+v %v", r, stop)
	}
	if n, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, false); err != nil || n != 1 {
		t.Fatalf("clearing the mark: %d %v", n, err)
	}
	if d := claim(categorised("")); d.Blocked {
		t.Error("the claim still reads a cleared block")
	}
	// A system message to the chat is not a tenant's notification: neither applies.
	exec(t, s, `INSERT INTO opt_outs (tenant_id, user_id, category, by) VALUES ('acme', 'ok', '', 'user')`)
	sys := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, TenantID: "acme", ChatID: 1, Priority: 9, Body: "reply"}
	if err := s.InsertSystemMessage(ctx, sys); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, true); err != nil {
		t.Fatal(err)
	}
	if d, err := s.ClaimDelivery(ctx, sys.TrackingID, time.Minute); err != nil || d.Blocked || d.OptedOut {
		t.Errorf("claim of a system message: %+v %v", d, err)
	}
}

// A block is marked for every link of one bot's chat — every tenant linked there — and nothing of another
// bot's chat with the same id; each changed link records user.blocked (user.unblocked when cleared), once.
// The mark shows in GET /v1/users; it does not refuse a send (the claim ends it).
func TestABlockIsMarkedForEveryLinkOfTheChat(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	for _, tenant := range []string{"globex", "initech"} {
		if err := s.CreateTenant(ctx, tenant, tenant); err != nil {
			t.Fatal(err)
		}
		endpoint(t, s, tenant)
	}
	endpoint(t, s, "acme")
	verifiedUser(t, s, "globex", "g1", 1) // the same chat of the shared bot as acme's "ok"
	bot := ownBot(t, s, 900)
	exec(t, s, `UPDATE tenants SET bot_id = 900 WHERE id = 'initech'`)
	link(t, s, "initech", "i1", bot, 1) // chat 1 of another bot

	if n, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, true); err != nil || n != 2 {
		t.Fatalf("blocking chat 1 of the shared bot: %d %v, want acme's and globex's links", n, err)
	}
	if n, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, true); err != nil || n != 0 {
		t.Errorf("blocking it again: %d %v, want no change", n, err)
	}
	for tenant, want := range map[string]bool{"acme": true, "globex": true, "initech": false} {
		user := map[string]string{"acme": "ok", "globex": "g1", "initech": "i1"}[tenant]
		u, err := s.GetUser(ctx, tenant, user)
		if err != nil || u.Blocked != want {
			t.Errorf("%s's user: blocked %v (%v), want %v", tenant, u.Blocked, err, want)
		}
		if got := userEventsOf(t, s, tenant, store.EventUserBlocked); len(got) != map[bool]int{true: 1, false: 0}[want] {
			t.Errorf("%s: user.blocked events %+v", tenant, got)
		}
	}
	// Still accepted: the claim ends it.
	insert(t, s, tenantNotification("ok"))

	if n, err := s.SetChatBlocked(ctx, notification.SharedBot, 1, false); err != nil || n != 2 {
		t.Errorf("unblocking: %d %v", n, err)
	}
	if got := userEventsOf(t, s, "acme", store.EventUserUnblocked); len(got) != 1 || got[0].UserID != "ok" || got[0].Data != nil {
		t.Errorf("user.unblocked events %+v, want one for ok, with the user id only", got)
	}
	if u, _ := s.GetUser(ctx, "acme", "ok"); u.Blocked {
		t.Error("the mark is still shown after the user unblocked the bot")
	}

	// As the effect of a my_chat_member update: once per update id.
	eff, changed := store.ChatBlockedEffect(7001, bot, 1, true)
	if err := s.ApplyUpdates(ctx, []*store.Effect{eff}); err != nil || *changed != 1 {
		t.Fatalf("my_chat_member kicked: %v, %d changed", err, *changed)
	}
	again, _ := store.ChatBlockedEffect(7001, bot, 1, false)
	if err := s.ApplyUpdates(ctx, []*store.Effect{again}); err != nil || !errors.Is(again.Err, store.ErrUpdateProcessed) {
		t.Errorf("the same update id again: %v %v, want a repeat", err, again.Err)
	}
	if u, _ := s.GetUser(ctx, "initech", "i1"); !u.Blocked {
		t.Error("the update of the tenant's own bot did not mark its link")
	}
}

// GET /v1/users' new fields: the opt-out of the tenant, the categories opted out of (sorted), the block.
func TestAUserShowsTheOptOutsAndTheBlock(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	u, err := s.GetUser(ctx, "acme", "ok")
	if err != nil || u.OptedOut || len(u.OptedOutCategories) != 0 || u.OptedOutCategories == nil || u.Blocked {
		t.Fatalf("a user without any: %+v %v", u, err)
	}
	for _, c := range []string{"promo", "", "news"} {
		if _, err := s.OptOut(ctx, "acme", "ok", c, consent.ByTenant); err != nil {
			t.Fatal(err)
		}
	}
	u, err = s.GetUser(ctx, "acme", "ok")
	if err != nil || !u.OptedOut || !slices.Equal(u.OptedOutCategories, []string{"news", "promo"}) {
		t.Errorf("%+v %v, want opted out, of news and promo", u, err)
	}
}

// The categories a tenant sent a user in the last 30 days, for /stop's keyboard: each once, sorted, not
// another user's nor another tenant's, not older ones.
func TestTheCategoriesSentInTheLast30Days(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	for _, c := range []string{"promo", "news", "promo", "", "old"} {
		insert(t, s, categorised(c))
	}
	exec(t, s, `UPDATE notifications SET created_at = now() - interval '31 days' WHERE category = 'old'`)
	exec(t, s, `UPDATE phone_verifications SET status = 'verified' WHERE user_id = 'no'`)
	other := tenantNotification("no")
	other.Category = "billing"
	insert(t, s, other)
	got, err := s.SentCategories(ctx, "acme", "ok")
	if err != nil || !slices.Equal(got, []string{"news", "promo"}) {
		t.Errorf("categories %v %v, want news and promo", got, err)
	}
}

// internal/consent's table, as rendered for the store's SQL, decides in PostgreSQL as it does in Go, for
// every pair (the columns' lists: TestStatesMatchTheSchema).
func TestConsentSQLAgreesWithGo(t *testing.T) {
	s, _ := pgtest.NewStore(t)
	ctx := context.Background()
	for _, actor := range consent.Bys {
		for _, held := range consent.Bys {
			var lift, takeOver bool
			q := `SELECT ` + consent.LiftSQL(`$1::text`, `$2::text`) + `, ` + consent.TakeOverSQL(`$1::text`, `$2::text`)
			if err := s.Pool().QueryRow(ctx, q, string(actor), string(held)).Scan(&lift, &takeOver); err != nil {
				t.Fatal(err)
			}
			if lift != consent.MayLift(actor, held) || takeOver != consent.TakesOver(actor, held) {
				t.Errorf("%s over %s's: SQL lifts %v, takes over %v; Go disagrees", actor, held, lift, takeOver)
			}
		}
	}
}

func texts[S ~string](vs []S) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
