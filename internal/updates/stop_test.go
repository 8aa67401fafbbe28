package updates_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/audit"
	"github.com/heraldhq/herald/internal/bot"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/consent"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
	"github.com/heraldhq/herald/internal/signing"
	"github.com/heraldhq/herald/internal/store"
	"github.com/heraldhq/herald/internal/testing/fixture"
	"github.com/heraldhq/herald/internal/testing/wait"
	"github.com/heraldhq/herald/internal/updates"
)

// End users in control (spec v1-extensions §9) in the chat: blocks seen as they happen, /stop and /resume,
// the taps on their keyboards — through the simulated platform, whose webhook is this env's receiver. No
// worker runs here: a test hands a reply to the platform itself (deliver), as a worker would.

const (
	noticeStale   = "This button no longer works. Send /stop or /resume again."
	noticeStopped = "Stopped."
	noticeResumed = "Resumed."
)

// chatEnv is an env whose receiver is the simulated platform's webhook (its shared bot), with the shared
// bot's client to answer taps with.
type chatEnv struct {
	*env
	sim       *sim.Server
	client    *messenger.Client
	delivered int // replies handed to the platform so far
}

func newChatEnv(t *testing.T) *chatEnv {
	t.Helper()
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler), GlobalRate: -1, PerChatRate: -1, WebhookBackoff: 10 * time.Millisecond})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.Close()
	})
	c := &chatEnv{sim: s, client: messenger.New(srv.URL, s.Token(), nil).WithTimeout(5 * time.Second)}
	c.env = newEnv(t, func(st *store.Store, o *updates.Options) {
		o.Bots = bot.NewRegistry(bot.RegistryOptions{Store: st, APIURL: srv.URL, Shared: c.client, Logger: discardLogger()})
	})
	if err := updates.SetWebhookURL(context.Background(), c.client, c.srv.URL+updates.Path, secret); err != nil {
		t.Fatal(err)
	}
	return c
}

// user makes the simulated user (whose private chat has its id).
func (c *chatEnv) user(id int64) {
	c.t.Helper()
	if _, err := c.sim.EnsureUser(sim.User{ID: id, FirstName: "Ann"}); err != nil {
		c.t.Fatal(err)
	}
}

// answered waits until the webhook answered the update, and expects 200.
func (c *chatEnv) answered(h *sim.BotHandle, updateID int64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o := h.WaitWebhook(ctx, updateID); o.State != sim.WebhookAnswered || o.Status != 200 {
		c.t.Fatalf("update %d: webhook outcome %+v, want answered 200", updateID, o)
	}
}

// say sends text as the user in their chat with the shared bot and waits for the webhook's answer.
func (c *chatEnv) say(user int64, text string) {
	c.t.Helper()
	id, err := c.sim.SendText(user, text)
	if err != nil {
		c.t.Fatal(err)
	}
	c.answered(c.sim.DefaultBot(), id)
}

// deliver hands the replies queued since the last call to the platform, as a worker does, and returns them.
func (c *chatEnv) deliver() []reply {
	c.t.Helper()
	rs := c.replies()[c.delivered:]
	c.delivered += len(rs)
	for _, r := range rs {
		var markup json.RawMessage
		if r.ReplyMarkup != nil {
			markup, _ = json.Marshal(r.ReplyMarkup)
		}
		if _, err := c.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: r.ChatID, Text: r.Body, ReplyMarkup: markup}); err != nil {
			c.t.Fatalf("delivering %q: %v", r.Body, err)
		}
	}
	return rs
}

// tap taps as the user and waits for the webhook's answer; it returns the query with the bot's answer.
func (c *chatEnv) tap(h *sim.BotHandle, user int64, tap sim.Tap) sim.CallbackQuery {
	c.t.Helper()
	q, err := h.Tap(user, tap)
	if err != nil {
		c.t.Fatal(err)
	}
	c.answered(h, q.UpdateID)
	q, _ = h.CallbackQuery(q.ID)
	return q
}

// expectNotice asserts the bot's answer to a tap.
func expectNotice(t *testing.T, q sim.CallbackQuery, want string) {
	t.Helper()
	if q.Answer == nil || q.Answer.Text != want {
		t.Fatalf("answer to the tap = %+v, want the notice %q", q.Answer, want)
	}
}

type optOutRow struct{ Tenant, User, Category, By string }

// optOuts returns every opt-out, sorted.
func (e *env) optOuts() []optOutRow {
	e.t.Helper()
	var out []optOutRow
	for _, o := range e.fx.OptOuts(e.t) {
		out = append(out, optOutRow(o))
	}
	return out
}

func expectOptOuts(t *testing.T, e *env, want ...optOutRow) {
	t.Helper()
	if got := e.optOuts(); !slices.Equal(got, want) {
		t.Fatalf("opt-outs = %+v, want %+v", got, want)
	}
}

// userEvents returns the user.* events recorded for the tenant ("type user_id"), oldest first.
func (e *env) userEvents(tenant string) []string {
	e.t.Helper()
	var out []string
	for _, ev := range e.fx.CallbackInbox(e.t) {
		if ev.TenantID == tenant && strings.HasPrefix(ev.Type, "user.") {
			out = append(out, ev.Type+" "+ev.UserID)
		}
	}
	return out
}

// subscribe gives the tenant a callback endpoint, so that its events are recorded.
func (e *env) subscribe(tenant string) {
	e.t.Helper()
	e.fx.CallbackEndpoint(e.t, testKey(e.t), tenant, "https://hooks.example.com/"+tenant)
}

func (e *env) blocked(tenant, user string) bool {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM links WHERE tenant_id = $1 AND user_id = $2 AND blocked_at IS NOT NULL`, tenant, user) == 1
}

// buttons are a reply's inline keyboard: text → callback_data.
func buttons(t *testing.T, r reply) ([]string, map[string]string) {
	t.Helper()
	var kb messenger.InlineKeyboardMarkup
	b, _ := json.Marshal(r.ReplyMarkup)
	if err := json.Unmarshal(b, &kb); err != nil || len(kb.InlineKeyboard) == 0 {
		t.Fatalf("reply %q has no inline keyboard: %s", r.Body, b)
	}
	var texts []string
	data := map[string]string{}
	for _, row := range kb.InlineKeyboard {
		for _, btn := range row {
			texts = append(texts, btn.Text)
			data[btn.Text] = btn.CallbackData
		}
	}
	return texts, data
}

var callbackDataForm = regexp.MustCompile(`^[A-Za-z0-9_-]{22}:[0-9]{1,3}$`)

// A user who blocks the bot marks every link of that chat blocked, with a user.blocked event per link;
// unblocking clears them, with user.unblocked. Another user's links stay as they are, and a block
// redelivered changes nothing again.
func TestBlockingTheBotInTheChatMarksTheChatsLinks(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t)
	for _, id := range []string{"acme", "globex"} {
		c.tenant(id, strings.ToUpper(id[:1])+id[1:])
		c.subscribe(id)
	}
	c.user(701)
	c.user(702)
	c.link("acme", "ann", 701)
	c.link("globex", "ann-g", 701)
	c.link("acme", "bob", 702)

	blockID, _, err := c.sim.DefaultBot().SetBlocked(701, true)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the block to be marked", func() bool { return c.blocked("acme", "ann") && c.blocked("globex", "ann-g") })
	if c.blocked("acme", "bob") {
		t.Fatal("another user's link was marked blocked")
	}
	if got := c.userEvents("acme"); !slices.Equal(got, []string{"user.blocked ann"}) {
		t.Fatalf("acme's events = %v, want user.blocked of ann", got)
	}
	if got := c.userEvents("globex"); !slices.Equal(got, []string{"user.blocked ann-g"}) {
		t.Fatalf("globex's events = %v", got)
	}
	// The platform sends the update again: it was handled.
	blockUpdate := map[string]any{"update_id": blockID, "my_chat_member": map[string]any{
		"chat": privateChat(701), "from": sender(701), "date": 1700000000,
		"old_chat_member": map[string]any{"status": "member", "user": sender(1)}, "new_chat_member": map[string]any{"status": "kicked", "user": sender(1)}}}
	c.fx.LinkBlocked(t, "globex", "ann-g", false)
	expectOK(t, c.post(blockUpdate))
	if c.blocked("globex", "ann-g") {
		t.Fatal("a redelivered block took effect again")
	}
	c.fx.LinkBlocked(t, "globex", "ann-g", true)

	if err := c.sim.Unblock(701); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the block to be cleared", func() bool { return !c.blocked("acme", "ann") && !c.blocked("globex", "ann-g") })
	if got := c.userEvents("acme"); !slices.Equal(got, []string{"user.blocked ann", "user.unblocked ann"}) {
		t.Fatalf("acme's events = %v, want user.blocked then user.unblocked", got)
	}
	if n := len(c.replies()); n != 0 {
		t.Fatalf("%d replies to a block: the user cannot read them", n)
	}
}

// /stop with one tenant and no categories opts out at once, branded with the tenant's label; the waiting
// notifications it covers end blocked. /stop again says it is done; /resume lifts it at once.
func TestStopWithOneTenantStopsAtOnceAndResumeLiftsIt(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t)
	c.tenant("acme", "Acme")
	c.subscribe("acme")
	c.user(701)
	c.link("acme", "ann", 701)
	waiting := c.fx.Notification(t, fixture.For("acme", "ann"))

	c.say(701, "/stop")
	expectOptOuts(t, c.env, optOutRow{"acme", "ann", "", "user"})
	// The opt-out commits with the update; the notifications it covers end just after, in the receiver's
	// background (Receiver.runEndings), so the update's answer may come first.
	c.endingsDone()
	if r := c.fx.NotificationRow(t, waiting); r.Status != "blocked" || r.ErrMsg == nil || *r.ErrMsg != "opted out" {
		t.Fatalf("the waiting notification is %s %v, want blocked \"opted out\"", r.Status, r.ErrMsg)
	}
	r := c.onlyReply()
	expectReply(t, r, 701, "acme", brand.Render("Acme", "Stopped: Acme. You will not receive these notifications here. Send /resume to receive them again."), nil)

	c.say(701, "/stop")
	rs := c.wantReplies(2)
	expectReply(t, rs[1], 701, "acme", brand.Render("Acme", "Everything is already stopped. Send /resume to receive notifications again."), nil)

	c.say(701, "/resume")
	expectOptOuts(t, c.env)
	rs = c.wantReplies(3)
	expectReply(t, rs[2], 701, "acme", brand.Render("Acme", "Resumed: Acme. You will receive these notifications here again."), nil)
	if got := c.userEvents("acme"); !slices.Equal(got, []string{"user.opted_out ann", "user.opted_in ann"}) {
		t.Fatalf("acme's user events = %v, want user.opted_out then user.opted_in", got)
	}
	// The audit trail (§15) records both as the user's, in the chat.
	events, _, err := c.st.AuditEvents(context.Background(), "acme", []audit.Type{audit.UserOptedOut, audit.UserOptedIn}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, e := range events {
		trail = append(trail, string(e.Type)+" "+e.Actor+" "+e.Target)
	}
	if want := []string{"user.opted_in user ann", "user.opted_out user ann"}; !slices.Equal(trail, want) {
		t.Fatalf("acme's audit trail = %v, want %v", trail, want)
	}
}

// A user linked to three tenants gets a keyboard: a button per tenant by its label, one per category a
// tenant sent in the last 30 days, and "All of them"; each callback_data is a prompt reference of at most
// 64 bytes. A tap opts out of that choice, answers the query and edits the message; the tap redelivered
// changes nothing new; /resume offers what is stopped and lifts the choice.
func TestStopWithThreeTenantsOffersAKeyboardAndATapStops(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t)
	for _, id := range []string{"acme", "globex", "initech"} {
		c.tenant(id, strings.ToUpper(id[:1])+id[1:])
		c.subscribe(id)
	}
	c.user(701)
	c.link("acme", "ann", 701)
	c.link("globex", "ann", 701)
	c.link("initech", "ann", 701)
	c.fx.Notification(t, fixture.For("acme", "ann"), fixture.Category("billing"), fixture.InState("delivered"))
	news := c.fx.Notification(t, fixture.For("acme", "ann"), fixture.Category("news"))
	billing := c.fx.Notification(t, fixture.For("acme", "ann"), fixture.Category("billing"))

	c.say(701, "/stop")
	prompt := c.deliver()[0]
	texts, data := buttons(t, prompt)
	prompt.ReplyMarkup = nil // checked button by button
	expectReply(t, prompt, 701, "", brand.Render("Acme, Globex and Initech", "Which notifications do you want to stop?"), nil)
	if want := []string{"Acme", "Globex", "Initech", "Acme: billing", "Acme: news", "All of them"}; !slices.Equal(texts, want) {
		t.Fatalf("buttons = %v, want %v", texts, want)
	}
	for text, d := range data {
		if len(d) > 64 || !callbackDataForm.MatchString(d) {
			t.Fatalf("button %q carries %q: not a prompt reference of at most 64 bytes", text, d)
		}
	}
	if len(c.optOuts()) != 0 {
		t.Fatal("the keyboard opted out of something before a tap")
	}

	h := c.sim.DefaultBot()
	q := c.tap(h, 701, sim.Tap{Button: "Acme: billing"})
	expectNotice(t, q, noticeStopped)
	expectOptOuts(t, c.env, optOutRow{"acme", "ann", "billing", "user"})
	c.endingsDone() // the covered notifications end after the update's commit (Receiver.runEndings)
	if s := c.status(billing); s != "blocked" {
		t.Fatalf("the waiting billing notification is %s, want blocked", s)
	}
	if s := c.status(news); s != "queued" {
		t.Fatalf("the news notification is %s: the billing opt-out must not cover it", s)
	}
	msgs := c.sim.Messages(701)
	edited := msgs[len(msgs)-1]
	want := brand.Render("Acme", "Stopped: Acme: billing. You will not receive these notifications here. Send /resume to receive them again.")
	if edited.Text != want || edited.EditedAt == nil || len(edited.ReplyMarkup) != 0 {
		t.Fatalf("the keyboard's message = %q (edited %v, markup %s), want %q without the keyboard", edited.Text, edited.EditedAt, edited.ReplyMarkup, want)
	}
	events := c.userEvents("acme")

	// The platform sends the tap again (our answer was lost): nothing new changes.
	expectOK(t, c.post(map[string]any{"update_id": q.UpdateID, "callback_query": map[string]any{
		"id": q.ID, "from": sender(701), "data": q.Data,
		"message": map[string]any{"message_id": q.MessageID, "date": 1700000000, "chat": privateChat(701)}}}))
	expectOptOuts(t, c.env, optOutRow{"acme", "ann", "billing", "user"})
	if got := c.userEvents("acme"); !slices.Equal(got, events) {
		t.Fatalf("the redelivered tap recorded events: %v, then %v", events, got)
	}
	// The same button once more, under a new update (a second client showing the old keyboard): used.
	expectNotice(t, c.tap(h, 701, sim.Tap{MessageID: q.MessageID, CallbackData: q.Data, Forged: true}), noticeStale)
	expectOptOuts(t, c.env, optOutRow{"acme", "ann", "billing", "user"})

	// A second /stop offers what is left; "All of them" stops every tenant.
	c.say(701, "/stop")
	texts, _ = buttons(t, c.deliver()[0])
	if want := []string{"Acme", "Globex", "Initech", "Acme: news", "All of them"}; !slices.Equal(texts, want) {
		t.Fatalf("buttons = %v, want %v", texts, want)
	}
	expectNotice(t, c.tap(h, 701, sim.Tap{Button: "All of them"}), noticeStopped)
	expectOptOuts(t, c.env, optOutRow{"acme", "ann", "", "user"}, optOutRow{"acme", "ann", "billing", "user"},
		optOutRow{"globex", "ann", "", "user"}, optOutRow{"initech", "ann", "", "user"})
	msgs = c.sim.Messages(701)
	if got, want := msgs[len(msgs)-1].Text, brand.Render("Acme, Globex and Initech", "Stopped: Acme, Globex and Initech. You will not receive these notifications here. Send /resume to receive them again."); got != want {
		t.Fatalf("edited to %q, want %q", got, want)
	}
	c.endingsDone()
	if s := c.status(news); s != "blocked" {
		t.Fatalf("the news notification is %s after acme was stopped, want blocked", s)
	}

	// /resume offers only what is stopped.
	c.say(701, "/resume")
	texts, _ = buttons(t, c.deliver()[0])
	if want := []string{"Acme", "Globex", "Initech", "Acme: billing", "All of them"}; !slices.Equal(texts, want) {
		t.Fatalf("resume buttons = %v, want %v", texts, want)
	}
	expectNotice(t, c.tap(h, 701, sim.Tap{Button: "Globex"}), noticeResumed)
	expectOptOuts(t, c.env, optOutRow{"acme", "ann", "", "user"}, optOutRow{"acme", "ann", "billing", "user"}, optOutRow{"initech", "ann", "", "user"})
	if got := c.userEvents("globex"); !slices.Equal(got, []string{"user.opted_out ann", "user.opted_in ann"}) {
		t.Fatalf("globex's events = %v", got)
	}
}

// A tap that is not on a live keyboard of the tapping user's own changes nothing and is answered with a
// short notice: a forged reference, another user's button, an index out of range, a prompt older than a
// day, data that is no reference at all.
func TestForgedStaleAndOtherUsersTapsChangeNothing(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t)
	for _, id := range []string{"acme", "globex"} {
		c.tenant(id, strings.ToUpper(id[:1])+id[1:])
		c.subscribe(id)
	}
	c.user(701)
	c.user(702)
	for _, u := range []int64{701, 702} {
		c.link("acme", "u"+string(rune('0'+u%10)), u)
		c.link("globex", "u"+string(rune('0'+u%10)), u)
	}
	c.say(701, "/stop")
	c.say(702, "/stop")
	rs := c.deliver()
	_, annData := buttons(t, rs[0])
	bobPrompt := c.sim.Messages(702)[0].MessageID
	id, _, _ := strings.Cut(annData["Acme"], ":")
	h := c.sim.DefaultBot()

	cases := map[string]struct {
		user int64
		msg  int64
		data string
	}{
		"forged id":          {701, 0, "AAAAAAAAAAAAAAAAAAAAAA:0"},
		"another user's":     {702, bobPrompt, annData["Acme"]},
		"index out of range": {701, 0, id + ":9"},
		"not a reference":    {701, 0, "stop acme"},
		"a negative index":   {701, 0, id + ":-1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			expectNotice(t, c.tap(h, tc.user, sim.Tap{MessageID: tc.msg, CallbackData: tc.data, Forged: true}), noticeStale)
		})
	}
	c.fx.StopPromptsAged(t, 25*time.Hour)
	expectNotice(t, c.tap(h, 701, sim.Tap{Button: "Acme"}), noticeStale)

	expectOptOuts(t, c.env)
	if got := append(c.userEvents("acme"), c.userEvents("globex")...); len(got) != 0 {
		t.Fatalf("events after taps that changed nothing: %v", got)
	}
	if n := c.count(`SELECT count(*) FROM stop_prompts WHERE used_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d prompts used by taps that changed nothing", n)
	}
}

// /help (and /start) tell the user about /stop and /resume; /stop in a chat that receives nothing says so.
func TestHelpMentionsStopAndResume(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t)
	c.user(701)
	c.say(701, "/help")
	c.say(701, "/stop")
	rs := c.wantReplies(2)
	if !strings.Contains(rs[0].Body, "/stop") || !strings.Contains(rs[0].Body, "/resume") {
		t.Fatalf("/help answered %q, which does not mention /stop and /resume", rs[0].Body)
	}
	expectReply(t, rs[1], 701, "", "This chat receives no notifications. To receive notifications here, open the link the app gave you.", nil)
}

// Blocks and /stop through a tenant's own bot belong to that bot's links: the same user's link through the
// shared bot stays as it is.
func TestBlockAndStopThroughATenantsOwnBot(t *testing.T) {
	t.Parallel()
	b := newBotsEnv(t)
	b.tenant("shop", "Shop")
	b.tenant("acme", "Acme")
	b.subscribe("shop")
	h, id := b.register("shop", "shop_bot", sim.BotConfig{})
	if _, err := b.sim.EnsureUser(sim.User{ID: 801}); err != nil {
		t.Fatal(err)
	}
	tok := b.token("shop", "s1", "Shop", "")
	if _, err := h.StartUser(801, tok); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the link through the shop's bot", func() bool { _, ok := b.linkOf("shop", "s1"); return ok })
	b.link("acme", "a1", 801) // the same person, through the shared bot

	if err := h.Block(801); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the block of the shop's bot", func() bool { return b.blocked("shop", "s1") })
	if b.blocked("acme", "a1") {
		t.Fatal("blocking the shop's bot marked the shared bot's link")
	}
	if err := h.Unblock(801); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the unblock", func() bool { return !b.blocked("shop", "s1") })

	upd, err := h.SendText(801, "/stop")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.WaitWebhook(ctx, upd)
	expectOptOuts(t, b.env, optOutRow{"shop", "s1", "", "user"})
	rs := b.replies()
	expectReplyThrough(t, rs[len(rs)-1], id, 801, "shop", brand.Render("Shop", "Stopped: Shop. You will not receive these notifications here. Send /resume to receive them again."), nil)
	if got := b.userEvents("shop"); !slices.Equal(got, []string{"user.linked s1", "user.blocked s1", "user.unblocked s1", "user.opted_out s1"}) {
		t.Fatalf("shop's events = %v", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.Until(t, 10*time.Second, what, cond)
}

func (e *env) status(trackingID string) string {
	e.t.Helper()
	return e.fx.NotificationRow(e.t, trackingID).Status
}

func testKey(t *testing.T) *signing.Key {
	t.Helper()
	key, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// A tenant with many categories cannot crowd another's off the /stop and /resume keyboards (issue 35): the
// category buttons are shared out between the tenants in turn (each one's first, then each one's second,
// …), so acme, linked first with 60 categories, leaves room for all three of globex's; the keyboard stays
// within its 50 buttons. /resume's "All of them" lifts every opt-out, shown or not.
func TestKeyboardsShareTheirButtonsFairlyAndAllOfThemCoversEverything(t *testing.T) {
	t.Parallel()
	c := newChatEnv(t)
	c.tenant("acme", "Acme")
	c.tenant("globex", "Globex")
	c.user(701)
	c.link("acme", "ann", 701)
	c.link("globex", "ann", 701)
	var acmeCategories []string
	for i := range 60 {
		acmeCategories = append(acmeCategories, fmt.Sprintf("a%02d", i))
		c.fx.Notification(t, fixture.For("acme", "ann"), fixture.Category(acmeCategories[i]), fixture.InState("delivered"))
	}
	for _, cat := range []string{"g0", "g1", "g2"} {
		c.fx.Notification(t, fixture.For("globex", "ann"), fixture.Category(cat), fixture.InState("delivered"))
	}
	expectFair := func(texts []string) {
		t.Helper()
		count := map[string]int{}
		for _, text := range texts {
			if tenant, _, ok := strings.Cut(text, ": "); ok {
				count[tenant]++
			}
		}
		if len(texts) > 50 || count["Globex"] != 3 || count["Acme"] != 50-3-3 {
			t.Fatalf("%d buttons, %d of Acme's categories and %d of Globex's; want 50 buttons, all 3 of Globex's and 44 of Acme's: %v",
				len(texts), count["Acme"], count["Globex"], texts)
		}
		if texts[0] != "Acme" || texts[1] != "Globex" || texts[len(texts)-1] != "All of them" {
			t.Fatalf("buttons %v, want each tenant's own first and All of them last", texts)
		}
	}
	c.say(701, "/stop")
	texts, _ := buttons(t, c.deliver()[0])
	expectFair(texts)

	// Every category of both stopped (as by earlier taps), and /resume.
	for _, cat := range acmeCategories {
		c.fx.OptedOut(t, "acme", "ann", cat, consent.ByUser)
	}
	for _, cat := range []string{"g0", "g1", "g2", ""} {
		c.fx.OptedOut(t, "globex", "ann", cat, consent.ByUser)
	}
	c.fx.OptedOut(t, "acme", "ann", "", consent.ByTenant)
	c.say(701, "/resume")
	texts, _ = buttons(t, c.deliver()[0])
	expectFair(texts)
	expectNotice(t, c.tap(c.sim.DefaultBot(), 701, sim.Tap{Button: "All of them"}), noticeResumed)
	if left := c.optOuts(); len(left) != 0 {
		t.Fatalf("%d opt-outs left after All of them, want none: %v", len(left), left[:min(len(left), 5)])
	}
}
