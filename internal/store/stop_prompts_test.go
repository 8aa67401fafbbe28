package store_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// threeTenants links messenger user 5 (private chat 5 of the shared bot) to acme (as "ok", the link labelled
// "Acme Shop"), globex ("g", through a token labelled "Label") and initech ("i": a link without a label, as
// one made before links kept it), each verified, and returns who they are in the chat.
func threeTenants(t *testing.T, s *store.Store) store.ChatUser {
	t.Helper()
	ctx := context.Background()
	for _, tenant := range []string{"globex", "initech"} {
		if err := s.CreateTenant(ctx, tenant, map[string]string{"globex": "Globex", "initech": "Initech"}[tenant]); err != nil {
			t.Fatal(err)
		}
	}
	linkLabelled(t, s, "acme", "ok", 5, "Acme Shop")
	link(t, s, "globex", "g", notification.SharedBot, 5)
	linkLabelled(t, s, "initech", "i", 5, "")
	return store.ChatUser{Bot: notification.SharedBot, ChatID: 5, MessengerUserID: 5}
}

// linkLabelled links and verifies a tenant's user in chat, the link labelled label ("": none, as a link
// made before links kept the label).
func linkLabelled(t *testing.T, s *store.Store, tenant, user string, chat int64, label string) {
	t.Helper()
	link(t, s, tenant, user, notification.SharedBot, chat)
	exec(t, s, `UPDATE links SET label = NULLIF($3, '') WHERE tenant_id = $1 AND user_id = $2`, tenant, user, label)
}

// apply applies the effects, then, as the webhook's receiver does after the commit, ends what their
// decisions cover (Effect.Endings); it returns how many notifications that ended.
func apply(t *testing.T, s *store.Store, effs ...*store.Effect) int {
	t.Helper()
	if err := s.ApplyUpdates(context.Background(), effs); err != nil {
		t.Fatal(err)
	}
	return finishEndings(t, s, effs...)
}

// finishEndings runs the passes of the effects' endings to the end and returns how many notifications they
// ended.
func finishEndings(t *testing.T, s *store.Store, effs ...*store.Effect) int {
	t.Helper()
	total := 0
	for _, e := range effs {
		for _, u := range e.Endings {
			n, done, err := s.FinishEndings(context.Background(), u, 0)
			if err != nil || !done {
				t.Fatalf("ending what an update covers: %d, done %v, %v", n, done, err)
			}
			total += n
		}
	}
	return total
}

func sendable(t *testing.T, s *store.Store, tenant, user string) bool {
	t.Helper()
	n := tenantNotification(user)
	n.TenantID = tenant
	got, err := s.InsertTenantNotifications(context.Background(), []store.NewNotification{n})
	if err != nil {
		t.Fatal(err)
	}
	return isIn(got, n.TrackingID)
}

// /stop's material: the tenants linked to the chat with this messenger user, each with its label (the one
// its link token carried, kept on the link; the tenant's developer name for a link made before links kept
// it), the categories it sent the user in the last 30 days and what is
// stopped; not a tenant linked to another chat, nor to the same chat id of another bot.
func TestTheTenantsOfAChat(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	who := threeTenants(t, s)
	for _, c := range []string{"promo", "news"} {
		insert(t, s, categorised(c))
	}
	if _, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	bot := ownBot(t, s, 901)
	if err := s.CreateTenant(ctx, "umbrella", "Umbrella"); err != nil {
		t.Fatal(err)
	}
	exec(t, s, `UPDATE tenants SET bot_id = 901 WHERE id = 'umbrella'`)
	link(t, s, "umbrella", "u", bot, 5)

	got, err := s.ChatTenants(ctx, who)
	if err != nil || len(got) != 3 {
		t.Fatalf("tenants of the chat: %+v %v, want acme, globex, initech", got, err)
	}
	acme := got[0]
	if acme.TenantID != "acme" || acme.Label != "Acme Shop" || !slices.Equal(acme.UserIDs, []string{"ok"}) ||
		!slices.Equal(acme.Categories, []string{"news", "promo"}) || len(acme.OptOuts) != 1 || acme.OptOuts[0].Category != "promo" {
		t.Errorf("acme in the chat: %+v", acme)
	}
	if got[1].TenantID != "globex" || got[1].Label != "Label" || len(got[1].Categories) != 0 || got[2].Label != "Initech" {
		t.Errorf("the others: %+v", got[1:])
	}
	if other, err := s.ChatTenants(ctx, store.ChatUser{Bot: bot, ChatID: 5, MessengerUserID: 5}); err != nil || len(other) != 1 || other[0].TenantID != "umbrella" {
		t.Errorf("the chat of the other bot: %+v %v", other, err)
	}
	if none, err := s.ChatTenants(ctx, store.ChatUser{ChatID: 5, MessengerUserID: 6}); err != nil || len(none) != 0 {
		t.Errorf("another messenger user in the same chat id: %+v %v", none, err)
	}
}

// A user linked to three tenants stops one at once (/stop with one choice): that tenant's sends are refused,
// the other two are not. /resume lifts it.
func TestAUserLinkedToThreeTenantsStopsOne(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	who := threeTenants(t, s)
	endpoint(t, s, "acme")
	waiting := insert(t, s, tenantNotification("ok"))

	eff, res := store.ChatOptOutEffect(8001, who, consent.Stop, []consent.Choice{{TenantID: "globex"}}, nil)
	apply(t, s, eff)
	if res.Stale || res.Changed != 1 || !slices.Equal(res.Choices, []consent.Choice{{TenantID: "globex"}}) {
		t.Errorf("stop globex: %+v", res)
	}
	for tenant, want := range map[string]bool{"acme": true, "globex": false, "initech": true} {
		user := map[string]string{"acme": "ok", "globex": "g", "initech": "i"}[tenant]
		if got := sendable(t, s, tenant, user); got != want {
			t.Errorf("a send of %s after /stop of globex: accepted %v, want %v", tenant, got, want)
		}
	}
	if st := statusOf(t, s, waiting); st != notification.Queued {
		t.Errorf("acme's waiting notification is %s after globex was stopped", st)
	}

	// All of them, at once: each tenant's waiting notifications end; a tenant no longer linked here is skipped.
	exec(t, s, `DELETE FROM links WHERE tenant_id = 'initech'`)
	all := []consent.Choice{{TenantID: "acme"}, {TenantID: "globex"}, {TenantID: "initech"}}
	eff, res = store.ChatOptOutEffect(8002, who, consent.Stop, all, &store.ChatReply{
		To:     store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 5, Priority: 9},
		Labels: map[string]string{"acme": "Acme", "globex": "Globex"}})
	ended := apply(t, s, eff)
	if res.Changed != 1 || ended != 2 || len(res.Choices) != 2 || len(eff.Replies) != 1 {
		t.Errorf("stop all: %+v, %d ended, %d replies; want acme made (globex was already), acme's 2 waiting ended, initech skipped", res, ended, len(eff.Replies))
	} else if body := eff.Replies[0].Body; !strings.Contains(body, "Stopped: Acme and Globex.") {
		t.Errorf("stop all's reply, rendered from what it resolved: %q", body)
	}
	if st, code, _ := lastError(t, s, waiting); st != notification.Blocked || code != notification.CodeOptedOut {
		t.Errorf("acme's waiting notification after /stop: %s %d", st, code)
	}
	if got := userEventsOf(t, s, "acme", store.EventUserOptedOut); len(got) != 1 || got[0].Data["by"] != "user" {
		t.Errorf("acme's events: %+v", got)
	}

	eff, res = store.ChatOptOutEffect(8003, who, consent.Resume, []consent.Choice{{TenantID: "acme"}}, nil)
	apply(t, s, eff)
	if res.Changed != 1 || !sendable(t, s, "acme", "ok") || sendable(t, s, "globex", "g") {
		t.Errorf("resume acme: %+v", res)
	}
	// The tenant's own opt-out: the user lifts it too.
	if _, err := s.OptOut(ctx, "globex", "g", "promo", consent.ByTenant); err != nil {
		t.Fatal(err)
	}
	eff, res = store.ChatOptOutEffect(8004, who, consent.Resume, []consent.Choice{{TenantID: "globex", Category: "promo"}}, nil)
	apply(t, s, eff)
	if res.Changed != 1 || count(t, s, `SELECT count(*) FROM opt_outs WHERE tenant_id = 'globex' AND category = 'promo'`) != 0 {
		t.Errorf("the user resumes what the tenant stopped: %+v", res)
	}
}

// A stop prompt: shown to one user in one chat, its choice taken once by a tap (the tap applies it in the
// update's transaction), and after that — or to anyone else, with an index out of range, a forged id, or a
// day later — a tap changes nothing.
func TestAStopPromptIsTakenOnce(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	who := threeTenants(t, s)
	newPrompt := func(kind consent.Kind, choices ...[]consent.Choice) [16]byte {
		t.Helper()
		var id [16]byte
		_, _ = rand.Read(id[:])
		updateIDs++
		reply := store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: 5, Priority: 9, Body: "choose",
			ReplyMarkup: []byte(`{"inline_keyboard":[]}`)}
		eff, err := store.StopPromptEffect(updateIDs, store.StopPrompt{ID: id, ChatUser: who, Kind: kind, Choices: choices}, reply)
		if err != nil {
			t.Fatal(err)
		}
		apply(t, s, eff)
		if len(eff.Replies) != 1 {
			t.Fatalf("the prompt's reply was not inserted: %+v", eff.Replies)
		}
		return id
	}
	tap := func(updateID int64, by store.ChatUser, id [16]byte, index int) (*store.Effect, *consent.Result) {
		t.Helper()
		eff, res := store.StopChoiceEffect(updateID, by, id, index, nil)
		apply(t, s, eff)
		return eff, res
	}
	stop := newPrompt(consent.Stop,
		[]consent.Choice{{TenantID: "acme"}},
		[]consent.Choice{{TenantID: "acme", Category: "promo"}},
		[]consent.Choice{{TenantID: "acme"}, {TenantID: "globex"}, {TenantID: "initech"}})

	stranger := store.ChatUser{ChatID: 5, MessengerUserID: 6}
	for name, try := range map[string]func() *consent.Result{
		"another user": func() *consent.Result { _, r := tap(9001, stranger, stop, 1); return r },
		"another bot": func() *consent.Result {
			_, r := tap(9002, store.ChatUser{Bot: 77, ChatID: 5, MessengerUserID: 5}, stop, 1)
			return r
		},
		"index out of range": func() *consent.Result { _, r := tap(9003, who, stop, 3); return r },
		"a negative index":   func() *consent.Result { _, r := tap(9004, who, stop, -1); return r },
		"a forged prompt id": func() *consent.Result { _, r := tap(9005, who, [16]byte{1, 2, 3}, 0); return r },
	} {
		if res := try(); !res.Stale || res.Changed != 0 {
			t.Errorf("a tap by %s: %+v, want stale", name, res)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM opt_outs`); n != 0 {
		t.Fatalf("stale taps made %d opt-outs", n)
	}

	_, res := tap(9010, who, stop, 2)
	if res.Stale || res.Kind != consent.Stop || res.Changed != 3 || len(res.Choices) != 3 {
		t.Errorf("the tap on All of them: %+v", res)
	}
	// The platform redelivers the same update: taken once per update id. Another tap (a new update) on the
	// same prompt finds it used.
	again, _ := store.StopChoiceEffect(9010, who, stop, 2, nil)
	apply(t, s, again)
	if !errors.Is(again.Err, store.ErrUpdateProcessed) {
		t.Errorf("the redelivered tap: %v, want a repeat", again.Err)
	}
	if _, res := tap(9011, who, stop, 0); !res.Stale {
		t.Errorf("a second tap on a used prompt: %+v, want stale", res)
	}
	if n := count(t, s, `SELECT count(*) FROM opt_outs WHERE by = 'user' AND category = ''`); n != 3 {
		t.Errorf("%d opt-outs after All of them, want 3", n)
	}

	// /resume's prompt lifts the choice the same way; a day-old one changes nothing.
	resume := newPrompt(consent.Resume, []consent.Choice{{TenantID: "globex"}}, []consent.Choice{{TenantID: "initech"}})
	old := newPrompt(consent.Resume, []consent.Choice{{TenantID: "acme"}})
	exec(t, s, `UPDATE stop_prompts SET created_at = now() - interval '25 hours' WHERE id = $1`, old[:])
	if _, res := tap(9020, who, old, 0); !res.Stale {
		t.Errorf("a tap on a day-old prompt: %+v, want stale", res)
	}
	if _, res := tap(9021, who, resume, 1); res.Stale || res.Kind != consent.Resume || res.Changed != 1 {
		t.Errorf("resume initech: %+v", res)
	}
	if !sendable(t, s, "initech", "i") || sendable(t, s, "globex", "g") || sendable(t, s, "acme", "ok") {
		t.Error("after resuming initech: only initech may send")
	}

	// Retention deletes prompts a day after they were made.
	if n, err := s.Purge(ctx, store.PurgeStopPrompts, store.DefaultRetention, 100); err != nil || n != 1 {
		t.Errorf("purged %d stop prompts (%v), want the day-old one", n, err)
	}
	if n := count(t, s, `SELECT count(*) FROM stop_prompts`); n != 2 {
		t.Errorf("%d stop prompts left, want the two of today", n)
	}
	if _, err := store.StopPromptEffect(1, store.StopPrompt{ChatUser: who, Kind: consent.Stop, Choices: [][]consent.Choice{{{TenantID: "acme"}}}},
		store.NewNotification{}); err == nil {
		t.Error("a prompt without an id was accepted")
	}
}

// The erasure of a user takes the user's opt-outs and the prompts that name the tenant in the user's chat
// along; another tenant's opt-outs of the same person, and prompts of other chats, stay.
func TestErasureTakesTheOptOutsAndThePrompts(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	who := threeTenants(t, s)
	if _, err := s.OptOut(ctx, "acme", "ok", "promo", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OptOut(ctx, "globex", "g", "", consent.ByUser); err != nil {
		t.Fatal(err)
	}
	prompt := func(chat int64, tenant string) {
		var id [16]byte
		_, _ = rand.Read(id[:])
		updateIDs++
		c := who
		c.ChatID, c.MessengerUserID = chat, chat
		eff, err := store.StopPromptEffect(updateIDs, store.StopPrompt{ID: id, ChatUser: c, Kind: consent.Stop,
			Choices: [][]consent.Choice{{{TenantID: tenant}}}}, store.NewNotification{TrackingID: newID(), Kind: notification.KindSystem, ChatID: chat, Priority: 9, Body: "?"})
		if err != nil {
			t.Fatal(err)
		}
		apply(t, s, eff)
	}
	prompt(5, "acme")
	prompt(5, "globex")
	prompt(6, "acme")

	e, err := s.EraseUser(ctx, "acme", "ok")
	if err != nil || e.OptOuts != 1 || e.StopPrompts != 1 {
		t.Fatalf("erasure: %+v %v, want 1 opt-out and 1 prompt erased", e, err)
	}
	if n := count(t, s, `SELECT count(*) FROM opt_outs WHERE tenant_id = 'acme'`); n != 0 {
		t.Errorf("%d opt-outs of the erased user left", n)
	}
	if n := count(t, s, `SELECT count(*) FROM opt_outs WHERE tenant_id = 'globex'`) + count(t, s, `SELECT count(*) FROM stop_prompts`); n != 3 {
		t.Errorf("globex's opt-out and the two other prompts: %d rows, want 3", n)
	}
	// Erased and linked again: the opt-out is gone with the rest.
	linkLabelled(t, s, "acme", "ok", 5, "")
	if !sendable(t, s, "acme", "ok") {
		t.Error("a user erased and linked again is still opted out")
	}
}
