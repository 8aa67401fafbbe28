package sim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// botView is a bot as the control API describes it.
type botView struct {
	ID            int64   `json:"id"`
	Username      string  `json:"username"`
	FirstName     string  `json:"first_name"`
	Token         string  `json:"token"`
	RateLimit     float64 `json:"rate_limit"`
	Burst         int     `json:"burst"`
	PaidBroadcast bool    `json:"paid_broadcast"`
	Default       bool    `json:"default"`
	WebhookURL    string  `json:"webhook_url"`
}

// counters are the fields of GET /sim/stats these tests read, for the totals and for each bot.
type counters struct {
	Sends                   int64 `json:"sends"`
	Delivered               int64 `json:"delivered"`
	Rejected                int64 `json:"rejected"`
	Answered429             int64 `json:"answered_429"`
	LimitViolations         int64 `json:"limit_violations"`
	GlobalLimitViolations   int64 `json:"global_limit_violations"`
	Unauthorized            int64 `json:"unauthorized"`
	UpdatesGenerated        int64 `json:"updates_generated"`
	PaidSends               int64 `json:"paid_sends"`
	SlidingSecondViolations int64 `json:"sliding_second_violations"`
	ChatIntervalViolations  int64 `json:"chat_interval_violations"`
}

// botStats are one bot's counters in GET /sim/stats.
type botStats struct {
	counters
	ID       int64  `json:"id"`
	Username string `json:"username"`
}

type allStats struct {
	counters
	Bots []botStats `json:"bots"`
}

// createBot creates a bot through the control API and returns what it answered.
func (e *env) createBot(t *testing.T, body map[string]any) botView {
	t.Helper()
	var b botView
	e.mustControl(t, "POST", "/sim/bots", body, &b)
	return b
}

// botStatsOf reads one bot's counters over HTTP.
func (e *env) botStatsOf(t *testing.T, bot string) counters {
	t.Helper()
	var st counters
	e.mustControl(t, "GET", "/sim/stats?bot="+bot, nil, &st)
	return st
}

// botCall calls a Bot API method with any token and a raw JSON body; it returns the HTTP status and the answer.
func (e *env) botCall(t *testing.T, token, method, body string) (int, messenger.Response) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/bot"+token+"/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer res.Body.Close()
	var r messenger.Response
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		t.Fatalf("%s: decoding the answer: %v", method, err)
	}
	return res.StatusCode, r
}

// sendAs sends a text to a chat with the token, flagged allow_paid_broadcast or not; it returns the status.
func (e *env) sendAs(t *testing.T, token string, chat int64, paid bool) (int, messenger.Response) {
	t.Helper()
	body := fmt.Sprintf(`{"chat_id":%d,"text":"x"}`, chat)
	if paid {
		body = fmt.Sprintf(`{"chat_id":%d,"text":"x","allow_paid_broadcast":true}`, chat)
	}
	return e.botCall(t, token, "sendMessage", body)
}

// A token the simulator has not seen is a bot of its own from its first call: getMe names it after its id.
// Another secret for a known id is refused, and a GET (what another site's image can send) creates nothing.
func TestEveryTokenIsABotOfItsOwn(t *testing.T) {
	e := newEnv(t, sim.Options{})
	status, r := e.botCall(t, "4242:first-use", "getMe", "")
	var me messenger.User
	if status != 200 || json.Unmarshal(r.Result, &me) != nil || me.ID != 4242 || me.Username != "bot4242_bot" || !me.IsBot {
		t.Fatalf("getMe with a new token: %d %+v (%s)", status, me, r.Result)
	}
	if status, _ := e.botCall(t, "4242:another-secret", "getMe", ""); status != 401 {
		t.Errorf("another secret for bot 4242: %d, want 401", status)
	}
	if status, _ := e.botCall(t, "not-a-token", "getMe", ""); status != 401 {
		t.Errorf("a token that is no <id>:<secret>: %d, want 401", status)
	}
	res, err := http.Get(e.srv.URL + "/bot5151:by-get/getMe")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("GET getMe with an unknown token: %d, want 401", res.StatusCode)
	}

	var list struct{ Bots []botView }
	e.mustControl(t, "GET", "/sim/bots", nil, &list)
	if len(list.Bots) != 2 || !list.Bots[0].Default || list.Bots[0].Username != sim.DefaultBotUsername ||
		list.Bots[1].ID != 4242 || list.Bots[1].Username != "bot4242_bot" || list.Bots[1].Default {
		t.Fatalf("bots = %+v, want the default bot and bot 4242", list.Bots)
	}
	for _, b := range list.Bots {
		if b.Token != "" {
			t.Errorf("the list shows bot %d's token", b.ID)
		}
	}
	// The default bot is the one it always was.
	if me, err := e.client.GetMe(t.Context()); err != nil || me.ID != 123456 || me.Username != sim.DefaultBotUsername {
		t.Errorf("the default bot: %+v, %v", me, err)
	}
	if st := e.botStatsOf(t, "4242"); st.Unauthorized != 1 {
		t.Errorf("bot 4242 counts %d calls with a wrong secret, want 1", st.Unauthorized)
	}
}

// The control API creates a bot with a username, a rate and paid broadcast; its token works at once.
func TestTheControlAPICreatesAndListsBots(t *testing.T) {
	e := newEnv(t, sim.Options{})
	b := e.createBot(t, map[string]any{"username": "acme_bot", "rate_limit": 20, "paid_broadcast": true})
	if b.ID <= 0 || !strings.HasPrefix(b.Token, fmt.Sprint(b.ID)+":") || b.Username != "acme_bot" || b.RateLimit != 20 || !b.PaidBroadcast {
		t.Fatalf("created %+v", b)
	}
	c := messenger.New(e.srv.URL, b.Token, nil)
	if me, err := c.GetMe(t.Context()); err != nil || me.ID != b.ID || me.Username != "acme_bot" {
		t.Errorf("getMe with the new token: %+v, %v", me, err)
	}
	// A given token and id; then an update of the same bot keeps what is not given.
	given := e.createBot(t, map[string]any{"token": "777:given-secret", "username": "shop_bot"})
	if given.ID != 777 || given.Token != "777:given-secret" {
		t.Errorf("with a given token: %+v", given)
	}
	again := e.createBot(t, map[string]any{"id": 777, "rate_limit": 5})
	if again.Username != "shop_bot" || again.RateLimit != 5 || again.Token != "" {
		t.Errorf("updating bot 777: %+v (the token is shown only when the bot is created)", again)
	}
	var one botView
	e.mustControl(t, "GET", "/sim/bots/shop_bot", nil, &one)
	if one.ID != 777 || one.RateLimit != 5 {
		t.Errorf("GET /sim/bots/shop_bot = %+v", one)
	}
	for name, body := range map[string]map[string]any{
		"a username without bot at the end": {"username": "acme"},
		"a username with a space":           {"username": "my bot"},
		"a negative rate":                   {"username": "neg_bot", "rate_limit": -1},
		"a token that is no <id>:<secret>":  {"token": "nope"},
		"a token for another id":            {"id": 5, "token": "6:x"},
	} {
		if status := e.control(t, "POST", "/sim/bots", body, nil); status != 400 {
			t.Errorf("%s: %d, want 400", name, status)
		}
	}
	if status := e.control(t, "POST", "/sim/bots", map[string]any{"username": "ACME_bot"}, nil); status != 409 {
		t.Errorf("a username taken (in another case): %d, want 409", status)
	}
	if status := e.control(t, "POST", "/sim/bots", map[string]any{"token": "777:other"}, nil); status != 409 {
		t.Errorf("another token for bot 777: %d, want 409", status)
	}
	if status := e.control(t, "GET", "/sim/bots/nobody_bot", nil, nil); status != 404 {
		t.Errorf("an unknown bot: %d, want 404", status)
	}

	// Revoking issues a new token: the old one is refused from then on.
	var revoked botView
	e.mustControl(t, "POST", "/sim/bots/777/revoke", nil, &revoked)
	if revoked.Token == "" || revoked.Token == "777:given-secret" || !strings.HasPrefix(revoked.Token, "777:") {
		t.Fatalf("revoked: %+v", revoked)
	}
	if status, _ := e.botCall(t, "777:given-secret", "getMe", ""); status != 401 {
		t.Errorf("the revoked token: %d, want 401", status)
	}
	if status, _ := e.botCall(t, revoked.Token, "getMe", ""); status != 200 {
		t.Errorf("the new token: %d, want 200", status)
	}
}

// Each bot has its own webhook and secret, its own updates and its own update ids: a user writing to both
// bots reaches each webhook with that bot's secret only.
func TestTwoBotsWebhooksGetTheirOwnUpdatesWithTheirOwnSecrets(t *testing.T) {
	e := newEnv(t, sim.Options{FirstUpdateID: 500})
	second := e.createBot(t, map[string]any{"token": "777:second", "username": "second_bot"})
	first := messenger.New(e.srv.URL, e.sim.Token(), nil)
	other := messenger.New(e.srv.URL, second.Token, nil)
	rcFirst := newReceiver(t, func(int) int { return 200 })
	rcSecond := newReceiver(t, func(int) int { return 200 })
	noError(t, first.SetWebhook(t.Context(), rcFirst.srv.URL+"/messenger/webhook", "first_secret", nil))
	noError(t, other.SetWebhook(t.Context(), rcSecond.srv.URL+"/messenger/webhook/777", "second_secret", nil))

	var toFirst, toSecond actionResult
	e.mustControl(t, "POST", "/sim/users/1001/message", map[string]string{"text": "to the first"}, &toFirst)
	e.mustControl(t, "POST", "/sim/users/1001/message?bot=second_bot", map[string]string{"text": "to the second"}, &toSecond)
	var link actionResult
	e.mustControl(t, "POST", "/sim/users/1002/open-link", map[string]string{"url": "https://t.me/second_bot?start=tok"}, &link)
	if toFirst.Webhook.State != sim.WebhookAnswered || toSecond.Webhook.State != sim.WebhookAnswered || link.Webhook.State != sim.WebhookAnswered {
		t.Fatalf("the actions' webhooks: %+v / %+v / %+v", toFirst, toSecond, link)
	}

	got1, secrets1 := rcFirst.received()
	got2, secrets2 := rcSecond.received()
	if len(got1) != 1 || got1[0].Message.Text != "to the first" || secrets1[0] != "first_secret" {
		t.Errorf("the first bot's webhook got %+v with %q", got1, secrets1)
	}
	if len(got2) != 2 || got2[0].Message.Text != "to the second" || got2[1].Message.Text != "/start tok" ||
		secrets2[0] != "second_secret" || secrets2[1] != "second_secret" {
		t.Errorf("the second bot's webhook got %+v with %q", got2, secrets2)
	}
	// Update ids are per bot: both bots count from the same first id here.
	if len(got1) == 1 && len(got2) == 2 && (got1[0].UpdateID != 500 || got2[0].UpdateID != 500 || got2[1].UpdateID != 501) {
		t.Errorf("update ids: first bot %d, second bot %d, %d; want 500 and 500, 501", got1[0].UpdateID, got2[0].UpdateID, got2[1].UpdateID)
	}
	var info messenger.WebhookInfo
	e.mustControl(t, "GET", "/sim/webhook?bot=777", nil, &info)
	if info.URL != rcSecond.srv.URL+"/messenger/webhook/777" {
		t.Errorf("the second bot's webhook info: %+v", info)
	}

	// getUpdates is per bot too: with its webhook deleted, the second bot polls its own updates only.
	noError(t, other.DeleteWebhook(t.Context()))
	e.mustControl(t, "POST", "/sim/users/1001/message?bot=777", map[string]string{"text": "polled"}, nil)
	e.mustControl(t, "POST", "/sim/users/1001/message", map[string]string{"text": "pushed"}, nil)
	polled, err := other.GetUpdates(t.Context(), 0, 0, nil)
	if err != nil || len(polled) != 1 || polled[0].Message.Text != "polled" {
		t.Errorf("the second bot polled %+v, %v", polled, err)
	}
	if status := e.control(t, "POST", "/sim/users/1001/message?bot=nobody_bot", map[string]string{"text": "x"}, nil); status != 404 {
		t.Errorf("a message to an unknown bot: %d, want 404", status)
	}
}

// A user has one private chat per bot (chat id = user id): a bot writes only to a user who started it, the
// messages stay in that bot's chat, and a block is per bot.
func TestAUserHasOneChatPerBot(t *testing.T) {
	e := newEnv(t, sim.Options{})
	second := e.createBot(t, map[string]any{"username": "second_bot"})
	e.user(t, sim.User{ID: 1001})
	status, r := e.sendAs(t, second.Token, 1001, false)
	if status != 403 || r.Description != "Forbidden: bot can't initiate conversation with a user" {
		t.Errorf("a bot writing to a user who never started it: %d %q", status, r.Description)
	}
	if status, _ := e.sendAs(t, second.Token, 999, false); status != 400 {
		t.Errorf("a bot writing to no user at all: %d, want 400 chat not found", status)
	}
	e.mustControl(t, "POST", "/sim/users/1001/start?bot="+second.Username, map[string]string{"payload": "x"}, nil)
	if status, r := e.sendAs(t, second.Token, 1001, false); status != 200 {
		t.Fatalf("after /start: %d %s", status, r.Description)
	}
	var msgs struct{ Messages []sim.SentMessage }
	e.mustControl(t, "GET", fmt.Sprintf("/sim/chats/1001/messages?bot=%d", second.ID), nil, &msgs)
	if len(msgs.Messages) != 1 {
		t.Errorf("the second bot's chat with 1001 holds %d messages, want 1", len(msgs.Messages))
	}
	if n := len(e.sim.Messages(1001)); n != 0 {
		t.Errorf("the default bot's chat with 1001 holds %d messages, want 0", n)
	}
	var lines struct{ Lines []sim.Line }
	e.mustControl(t, "GET", "/sim/chats/1001/transcript?bot=second_bot", nil, &lines)
	if len(lines.Lines) != 2 || lines.Lines[0].Text != "/start x" || lines.Lines[1].From != "bot" {
		t.Errorf("the second bot's transcript: %+v", lines.Lines)
	}

	var u sim.User
	e.mustControl(t, "POST", "/sim/users/1001/block?bot=second_bot", nil, &u)
	if !u.Blocked {
		t.Errorf("after blocking the second bot: %+v", u)
	}
	if status, r := e.sendAs(t, second.Token, 1001, false); status != 403 || r.Description != "Forbidden: bot was blocked by the user" {
		t.Errorf("the blocked bot: %d %q", status, r.Description)
	}
	if _, err := e.send(t, 1001, "from the default bot"); err != nil {
		t.Errorf("the default bot, not blocked: %v", err)
	}
	e.mustControl(t, "GET", "/sim/users/1001", nil, &u)
	if u.Blocked {
		t.Error("GET /sim/users/1001 says the user blocked the default bot")
	}
	e.mustControl(t, "POST", "/sim/users/1001/unblock?bot=second_bot", nil, &u)
	if status, _ := e.sendAs(t, second.Token, 1001, false); u.Blocked || status != 200 {
		t.Errorf("after unblocking: %+v, send %d", u, status)
	}
}

// A bot past its rate is answered 429 with retry_after; another bot keeps its whole rate.
func TestABotPastItsRateDoesNotTouchAnother(t *testing.T) {
	e := newEnv(t, sim.Options{})
	slow := e.createBot(t, map[string]any{"username": "slow_bot", "rate_limit": 5, "burst": 5})
	calm := e.createBot(t, map[string]any{"username": "calm_bot", "rate_limit": 5, "burst": 5})
	e.mustControl(t, "POST", "/sim/users/1/message?bot=slow_bot", map[string]string{"text": "hi"}, nil)
	e.mustControl(t, "POST", "/sim/users/1/message?bot=calm_bot", map[string]string{"text": "hi"}, nil)
	// The per-chat limit is off here (newEnv): every 429 is the bot's global rate.
	refused := 0
	for range 20 {
		status, r := e.sendAs(t, slow.Token, 1, false)
		if status == 429 {
			refused++
			if r.Parameters == nil || r.Parameters.RetryAfter < 1 {
				t.Fatalf("a 429 without retry_after: %+v", r)
			}
		}
	}
	if refused < 10 {
		t.Fatalf("20 sends at once at 5/s got %d 429s, want most", refused)
	}
	for i := range 5 {
		if status, r := e.sendAs(t, calm.Token, 1, false); status != 200 {
			t.Fatalf("the other bot's send %d: %d %s", i+1, status, r.Description)
		}
	}
	if st := e.botStatsOf(t, "calm_bot"); st.Answered429 != 0 || st.LimitViolations != 0 || st.Delivered != 5 {
		t.Errorf("the other bot's stats: %+v", st)
	}
	if st := e.botStatsOf(t, "slow_bot"); st.Answered429 != int64(refused) || st.GlobalLimitViolations != int64(refused) {
		t.Errorf("the bot past its rate: %+v, want %d 429s", st, refused)
	}
}

// allow_paid_broadcast takes a bot allowed it past its free rate, up to 1,000 a second (with a burst of 50);
// a bot not allowed it is held to its rate as if the flag were absent, and so is an allowed bot's send
// without the flag.
func TestPaidBroadcastLetsOnlyAnAllowedBotPastItsRate(t *testing.T) {
	e := newEnv(t, sim.Options{})
	paid := e.createBot(t, map[string]any{"username": "paid_bot", "rate_limit": 30, "paid_broadcast": true})
	free := e.createBot(t, map[string]any{"username": "free_bot", "rate_limit": 30})
	for _, b := range []string{"paid_bot", "free_bot"} {
		for user := 1; user <= 45; user++ {
			e.mustControl(t, "POST", fmt.Sprintf("/sim/users/%d/start?bot=%s&wait=0", user, b), nil, nil)
		}
	}
	var paid429, free429 int
	for user := int64(1); user <= 45; user++ {
		if status, r := e.sendAs(t, paid.Token, user, true); status == 429 {
			paid429++
		} else if status != 200 {
			t.Fatalf("a paid send: %d %s", status, r.Description)
		}
		if status, _ := e.sendAs(t, free.Token, user, true); status == 429 {
			free429++
		}
	}
	if paid429 != 0 {
		t.Errorf("the bot allowed paid broadcast got %d 429s for 45 flagged sends at once", paid429)
	}
	if free429 < 20 {
		t.Errorf("the bot without paid broadcast got %d 429s for 45 sends at once, want most past its 30/s", free429)
	}
	pst, fst := e.botStatsOf(t, "paid_bot"), e.botStatsOf(t, "free_bot")
	if pst.PaidSends < 20 || pst.Delivered != 45 || pst.LimitViolations != 0 || pst.SlidingSecondViolations != 0 {
		t.Errorf("the paid bot's stats: %+v, want 45 delivered, most of them paid", pst)
	}
	if fst.PaidSends != 0 || fst.GlobalLimitViolations != int64(free429) {
		t.Errorf("the free bot's stats: %+v", fst)
	}
	// Without the flag, the allowed bot is held to its free rate too.
	unflagged := 0
	for user := int64(1); user <= 20; user++ {
		if status, _ := e.sendAs(t, paid.Token, user, false); status == 429 {
			unflagged++
		}
	}
	if unflagged == 0 {
		t.Error("the paid bot's unflagged sends past its rate were all let through")
	}
}

// A flagged send is paid for and ignores the free rate: however many flagged sends went first, the allowed
// bot's unflagged sends still have all of its free rate, and every flagged one is billed.
func TestAFlaggedSendTakesNothingOfTheFreeRate(t *testing.T) {
	e := newEnv(t, sim.Options{})
	paid := e.createBot(t, map[string]any{"username": "flagged_bot", "rate_limit": 30, "burst": 3, "paid_broadcast": true})
	for user := 1; user <= 23; user++ {
		e.mustControl(t, "POST", fmt.Sprintf("/sim/users/%d/start?bot=flagged_bot&wait=0", user), nil, nil)
	}
	for user := int64(1); user <= 20; user++ {
		if status, r := e.sendAs(t, paid.Token, user, true); status != 200 {
			t.Fatalf("a flagged send: %d %s", status, r.Description)
		}
	}
	for user := int64(21); user <= 23; user++ { // the free rate's burst, untouched by the flagged sends
		if status, r := e.sendAs(t, paid.Token, user, false); status != 200 {
			t.Errorf("an unflagged send after 20 flagged ones: %d %s, want it within the free rate", status, r.Description)
		}
	}
	if st := e.botStatsOf(t, "flagged_bot"); st.PaidSends != 20 || st.LimitViolations != 0 {
		t.Errorf("the paid bot's stats: %d paid sends, %d violations; want the 20 flagged ones billed, none refused", st.PaidSends, st.LimitViolations)
	}
}

// /sim/stats keeps its totals and lists each bot's counters beside them; ?bot= reads one bot's.
func TestStatsCountPerBot(t *testing.T) {
	e := newEnv(t, sim.Options{})
	second := e.createBot(t, map[string]any{"username": "second_bot"})
	e.user(t, sim.User{ID: 1})
	e.mustControl(t, "POST", "/sim/users/1/message?bot=second_bot", map[string]string{"text": "hi"}, nil)
	for range 2 {
		if _, err := e.send(t, 1, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if status, _ := e.sendAs(t, second.Token, 1, false); status != 200 {
		t.Fatal(status)
	}
	e.sendAs(t, second.Token, 2, false) // no such chat: refused

	var all allStats
	e.mustControl(t, "GET", "/sim/stats", nil, &all)
	if all.Sends != 4 || all.Delivered != 3 || all.Rejected != 1 || all.UpdatesGenerated != 1 {
		t.Errorf("totals = %+v", all.counters)
	}
	if len(all.Bots) != 2 {
		t.Fatalf("bots in the stats: %+v", all.Bots)
	}
	def, sec := all.Bots[0], all.Bots[1]
	if def.ID != 123456 || def.Username != sim.DefaultBotUsername || def.Sends != 2 || def.Delivered != 2 || def.Rejected != 0 {
		t.Errorf("the default bot's counters: %+v", def)
	}
	if sec.ID != second.ID || sec.Username != "second_bot" || sec.Sends != 2 || sec.Delivered != 1 || sec.Rejected != 1 || sec.UpdatesGenerated != 1 {
		t.Errorf("the second bot's counters: %+v", sec)
	}
	if st := e.botStatsOf(t, "second_bot"); st != sec.counters {
		t.Errorf("?bot=second_bot = %+v, want %+v", st, sec.counters)
	}
	if status := e.control(t, "GET", "/sim/stats?bot=nobody_bot", nil, nil); status != 404 {
		t.Errorf("the stats of an unknown bot: %d, want 404", status)
	}
	e.mustControl(t, "POST", "/sim/reset", nil, nil)
	e.mustControl(t, "GET", "/sim/stats", nil, &all)
	if all.counters != (counters{}) || len(all.Bots) != 2 || all.Bots[1].counters != (counters{}) {
		t.Errorf("after a reset the bots stay, their counters start again: %+v", all)
	}
}

// The simulator counts, per bot, the sends past its rate in any sliding second (even those its bucket let
// through in a burst), and the sends to one chat closer than the per-chat interval (1 s at 1/s), per (bot,
// chat): the two measures a well-paced sender keeps at zero.
func TestSlidingSecondAndChatIntervalViolationsArePerBot(t *testing.T) {
	e := newEnv(t, sim.Options{PerChatRate: 1, PerChatBurst: 3})
	bursty := e.createBot(t, map[string]any{"username": "bursty_bot", "rate_limit": 10, "burst": 20})
	other := e.createBot(t, map[string]any{"username": "other_bot", "rate_limit": 10, "burst": 20})
	for _, b := range []string{"bursty_bot", "other_bot"} {
		for user := 1; user <= 15; user++ {
			e.mustControl(t, "POST", fmt.Sprintf("/sim/users/%d/start?bot=%s&wait=0", user, b), nil, nil)
		}
	}
	// 15 sends to 15 chats at once: the bucket's burst lets them all through; 4 of them are more than
	// 10 × 1.05 in one second.
	for user := int64(1); user <= 15; user++ {
		if status, r := e.sendAs(t, bursty.Token, user, false); status != 200 {
			t.Fatalf("send %d: %d %s", user, status, r.Description)
		}
	}
	// Chat 1 of the other bot is another chat than chat 1 of the first: its first send keeps the interval.
	// Its second at once does not: the chat's bucket lets it through, the interval is not kept.
	for range 2 {
		if status, r := e.sendAs(t, other.Token, 1, false); status != 200 {
			t.Fatalf("%d %s", status, r.Description)
		}
	}
	b, o := e.botStatsOf(t, "bursty_bot"), e.botStatsOf(t, "other_bot")
	if b.LimitViolations != 0 || b.SlidingSecondViolations != 5 || b.ChatIntervalViolations != 0 {
		t.Errorf("the bursty bot: %d limit violations, %d sliding-second, %d chat-interval; want 0, 5, 0",
			b.LimitViolations, b.SlidingSecondViolations, b.ChatIntervalViolations)
	}
	if o.LimitViolations != 0 || o.SlidingSecondViolations != 0 || o.ChatIntervalViolations != 1 {
		t.Errorf("the other bot: %d limit violations, %d sliding-second, %d chat-interval; want 0, 0, 1",
			o.LimitViolations, o.SlidingSecondViolations, o.ChatIntervalViolations)
	}
	var all allStats
	e.mustControl(t, "GET", "/sim/stats", nil, &all)
	if all.SlidingSecondViolations != 5 || all.ChatIntervalViolations != 1 {
		t.Errorf("totals: %d sliding-second, %d chat-interval; want 5, 1", all.SlidingSecondViolations, all.ChatIntervalViolations)
	}
}

// Faults can be set for one bot: its sends meet them, the others' do not.
func TestFaultsForOneBot(t *testing.T) {
	e := newEnv(t, sim.Options{})
	sick := e.createBot(t, map[string]any{"username": "sick_bot"})
	e.user(t, sim.User{ID: 1})
	e.mustControl(t, "POST", "/sim/users/1/message?bot=sick_bot", map[string]string{"text": "hi"}, nil)
	var f sim.Faults
	e.mustControl(t, "POST", "/sim/faults?bot=sick_bot", map[string]any{"rate_429": 1, "retry_after": 3}, &f)
	if f.Rate429 != 1 {
		t.Fatalf("the bot's faults: %+v", f)
	}
	status, r := e.sendAs(t, sick.Token, 1, false)
	if status != 429 || r.Parameters == nil || r.Parameters.RetryAfter != 3 {
		t.Errorf("the faulted bot: %d %+v", status, r)
	}
	if _, err := e.send(t, 1, "x"); err != nil {
		t.Errorf("the default bot meets the other bot's faults: %v", err)
	}
	var global sim.Faults
	e.mustControl(t, "GET", "/sim/faults", nil, &global)
	if global.Rate429 != 0 {
		t.Errorf("the simulator's own faults: %+v", global)
	}
	e.mustControl(t, "DELETE", "/sim/faults?bot=sick_bot", nil, nil)
	if status, _ := e.sendAs(t, sick.Token, 1, false); status != 200 {
		t.Errorf("after clearing its faults: %d", status)
	}
	// The simulator's faults apply to a bot without faults of its own.
	e.mustControl(t, "POST", "/sim/faults", map[string]any{"next_5xx": 1}, nil)
	if status, _ := e.sendAs(t, sick.Token, 1, false); status != 500 {
		t.Errorf("the simulator's fault on a bot: %d, want 500", status)
	}
}

// The bots are bounded: past MaxBots a new token is refused and the control API says why.
func TestBotsAreBounded(t *testing.T) {
	e := newEnv(t, sim.Options{MaxBots: 2})
	if status, _ := e.botCall(t, "11:a", "getMe", ""); status != 200 {
		t.Fatalf("the second bot: %d", status)
	}
	if status, _ := e.botCall(t, "12:a", "getMe", ""); status != 401 {
		t.Errorf("a third bot past MaxBots 2: %d, want 401", status)
	}
	if status := e.control(t, "POST", "/sim/bots", map[string]any{"username": "third_bot"}, nil); status != 409 {
		t.Errorf("creating a third bot past MaxBots 2: %d, want 409", status)
	}
	var list struct{ Bots []botView }
	e.mustControl(t, "GET", "/sim/bots", nil, &list)
	if len(list.Bots) != 2 {
		t.Errorf("%d bots, want 2", len(list.Bots))
	}
}
