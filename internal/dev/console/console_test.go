package console_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/dev/devenv"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/testing/devtest"
	"github.com/heraldhq/herald/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dev is a running herald dev: the real stack on a pgtest database, the embedded broker and the simulator.
type dev struct {
	base, key string
	stop      func() // stops it (at the latest when the test ends), failing the test if that takes over 10 s
}

// startDev starts herald dev for the test; it must stop within 10 s (an open console stream must not hold
// the shutdown).
func startDev(t *testing.T) dev {
	t.Helper()
	d := devtest.Start(t, devenv.Options{DataDir: t.TempDir(), DatabaseURL: pgtest.NewDatabase(t),
		TopicPrefix: "herald", DeepLinkBase: "https://t.me", RateLimit: 30}, 10*time.Second)
	return dev{base: d.Base, key: d.Key, stop: d.Stop}
}

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// The page, its files and the session are served to the developer's browser, on an IP address or
// localhost only: a rebinding name that resolves to 127.0.0.1 gets nothing, the demo key least of all.
func TestThePageIsServedLocallyOnly(t *testing.T) {
	t.Parallel()
	d := startDev(t)
	page := get(t, d.base+"/")
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || !strings.Contains(string(body), `<script type="module" src="/console/app.js">`) ||
		!strings.Contains(page.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("GET /: %d %s\n%s", page.StatusCode, page.Header, body)
	}
	for path, contentType := range map[string]string{"/console/app.js": "javascript", "/console/style.css": "text/css", "/console/render.js": "javascript"} {
		if res := get(t, d.base+path); res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), contentType) {
			t.Errorf("GET %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	var s struct {
		Tenant    string `json:"tenant"`
		APIKey    string `json:"api_key"`
		Simulator bool   `json:"simulator"`
	}
	res := get(t, d.base+"/console/api/session")
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil || s.APIKey != d.key || !s.Simulator || s.Tenant != "demo" {
		t.Errorf("session: %+v, %v", s, err)
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.base, "http://"))
	for _, host := range []string{"localhost:" + port, "[::1]:" + port} {
		if res := get(t, d.base+"/console/api/session", "Host", host); res.StatusCode != 200 {
			t.Errorf("Host %s: %d", host, res.StatusCode)
		}
	}
	for _, path := range []string{"/", "/console/api/session", "/console/api/events", "/console/app.js"} {
		if res := get(t, d.base+path, "Host", "rebind.example:"+port); res.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with Host rebind.example: %d, want 403", path, res.StatusCode)
		}
	}
}

// The page drives the simulator with same-origin JSON; another site's page, which can make the browser
// POST text/plain to 127.0.0.1 or rebind a name of its own to it, gets nothing done.
func TestTheSimulatorTakesOnlyThePagesRequests(t *testing.T) {
	t.Parallel()
	d := startDev(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(d.base, "http://"))
	post := func(path, body string, header ...string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", d.base+path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
			}
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	const user = `{"id":1001,"first_name":"Ann"}`
	for name, c := range map[string]struct {
		header []string
		want   int
	}{
		"text/plain from another site": {[]string{"Content-Type", "text/plain", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		"text/plain without an origin": {[]string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		"JSON from another origin":     {[]string{"Content-Type", "application/json", "Origin", "https://evil.example"}, http.StatusForbidden},
		"JSON to a rebound name":       {[]string{"Content-Type", "application/json", "Host", "rebind.example:" + port, "Origin", "http://rebind.example:" + port}, http.StatusForbidden},
	} {
		if got := post("/sim/users", user, c.header...); got != c.want {
			t.Errorf("%s: %d, want %d", name, got, c.want)
		}
	}
	if res := get(t, d.base+"/sim/users/1001"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("after the refused requests, user 1001: %d, want 404", res.StatusCode)
	}
	if res := get(t, d.base+"/bot"+sim.DefaultToken+"/getMe", "Host", "rebind.example:"+port); res.StatusCode != http.StatusForbidden {
		t.Errorf("the Bot API to a rebound name: %d, want 403", res.StatusCode)
	}
	if got := post("/sim/users", user, "Content-Type", "application/json", "Origin", d.base, "Sec-Fetch-Site", "same-origin"); got != 200 {
		t.Errorf("the page's own request: %d, want 200", got)
	}
}

// The stream pushes the state at once, then again when something changes, without the page asking.
func TestEventsPushTheStateWhenItChanges(t *testing.T) {
	t.Parallel()
	d := startDev(t)
	res := get(t, d.base+"/console/api/events")
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q", res.StatusCode, ct)
	}
	events := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var st map[string]any
				_ = json.Unmarshal([]byte(data), &st)
				events <- st
			}
		}
		close(events)
	}()
	next := func(what string) map[string]any {
		t.Helper()
		select {
		case st, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended while waiting for %s", what)
			}
			return st
		case <-time.After(10 * time.Second):
			t.Fatalf("no event for %s within 10 s", what)
		}
		return nil
	}
	if st := next("the first state"); len(st["chats"].([]any)) != 0 || len(st["notifications"].([]any)) != 0 {
		t.Errorf("the first state of a fresh dev: %v", st)
	}

	// A user writes to the bot: the chat appears, with the user's line.
	post, err := http.Post(d.base+"/sim/users/1001/message", "application/json", strings.NewReader(`{"text":"hello <b>bot</b>"}`))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	st := next("the user's message")
	chats := st["chats"].([]any)
	if len(chats) != 1 {
		t.Fatalf("after a message: %v", st)
	}
	lines := chats[0].(map[string]any)["lines"].([]any)
	if line := lines[0].(map[string]any); line["from"] != "user" || line["text"] != "hello <b>bot</b>" {
		t.Errorf("the chat's line: %v", line)
	}

	// A link token makes a tenant user: the state pushed next lists it (read from PostgreSQL).
	req, _ := http.NewRequest("POST", d.base+"/v1/link-token", strings.NewReader(`{"user_id":"carol"}`))
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	lt, err := http.DefaultClient.Do(req)
	if err != nil || lt.StatusCode != 201 {
		t.Fatalf("link token: %v %v", lt, err)
	}
	lt.Body.Close()
	for {
		st := next("the new tenant user")
		if users := st["users"].([]any); len(users) == 1 && users[0].(map[string]any)["user_id"] == "carol" {
			break
		}
	}

	// herald dev stops at once with the page still listening: the stream ends.
	d.stop()
	for range events {
	}
}

// A user has one chat per bot: the state lists each chat with the bot it is with, and the bots.
func TestTheStateListsAChatPerBot(t *testing.T) {
	t.Parallel()
	d := startDev(t)
	for _, c := range []struct{ path, body string }{
		{"/sim/bots", `{"username":"second_bot"}`},
		{"/sim/users/1001/message", `{"text":"to the shared bot"}`},
		{"/sim/users/1001/message?bot=second_bot", `{"text":"to the second bot"}`},
		{"/sim/users", `{"id":1002}`}, // a user who wrote to no bot yet
	} {
		res, err := http.Post(d.base+c.path, "application/json", strings.NewReader(c.body))
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("POST %s: %v %v", c.path, res, err)
		}
		res.Body.Close()
	}
	res := get(t, d.base+"/console/api/events")
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	type chat struct {
		Bot struct {
			Username string `json:"username"`
			Default  bool   `json:"default"`
		} `json:"bot"`
		User  sim.User   `json:"user"`
		Lines []sim.Line `json:"lines"`
	}
	var st struct {
		Bots []struct {
			Username string `json:"username"`
		} `json:"bots"`
		Chats []chat `json:"chats"`
	}
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &st); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	// herald dev's second demo tenant's bot, @demo_shop_bot, is listed too.
	if len(st.Bots) != 3 || st.Bots[0].Username != sim.DefaultBotUsername || st.Bots[1].Username != "demo_shop_bot" || st.Bots[2].Username != "second_bot" {
		t.Errorf("bots: %+v", st.Bots)
	}
	var got []string
	for _, c := range st.Chats {
		line := ""
		if len(c.Lines) > 0 {
			line = c.Lines[0].Text
		}
		got = append(got, fmt.Sprintf("%d@%s:%s", c.User.ID, c.Bot.Username, line))
	}
	want := []string{"1001@herald_sim_bot:to the shared bot", "1001@second_bot:to the second bot", "1002@herald_sim_bot:"}
	if !slices.Equal(got, want) {
		t.Errorf("chats: %q, want %q", got, want)
	}
}

// The console is a dev tool: only herald dev mounts it, never a production component. And the dev wing
// (internal/dev/…) as a whole stays out of the product: only cmd/herald (which wires herald dev and herald
// sim), the wing itself and the test scaffolding (internal/testing, test/, hack/) import it.
func TestOnlyHeraldDevMountsTheConsole(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if strings.Contains(string(b), `"github.com/heraldhq/herald/internal/dev/console"`) && filepath.Dir(rel) != filepath.Join("internal", "dev", "devenv") {
			t.Errorf("%s imports the dev console; only internal/dev/devenv (herald dev) may", rel)
		}
		wing := false
		for _, p := range []string{"cmd/herald/", "internal/dev/", "internal/testing/", "test/", "hack/"} {
			wing = wing || strings.HasPrefix(filepath.ToSlash(rel), p)
		}
		if !wing && strings.Contains(string(b), `"github.com/heraldhq/herald/internal/dev/`) {
			t.Errorf("%s imports the dev wing (internal/dev/…); product code never does", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A chat's state carries what the page renders of inline keyboards: the bot's message with its keyboard, as
// edited last (its new text, when), and the user's taps with the notice the bot answered.
func TestTheStateShowsInlineKeyboardsEditsAndTaps(t *testing.T) {
	t.Parallel()
	d := startDev(t)
	call := func(path, body string) map[string]any {
		t.Helper()
		res, err := http.Post(d.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 {
			t.Fatalf("POST %s: %d %v %v", path, res.StatusCode, out, err)
		}
		return out
	}
	// A bot of its own, without a webhook: nothing but this test answers its taps.
	token := call("/sim/bots", `{"username":"keys_bot"}`)["token"].(string)
	call("/sim/users/1001/message?bot=keys_bot", `{"text":"/start"}`)
	sent := call("/bot"+token+"/sendMessage", `{"chat_id":1001,"text":"What do you want to stop?","reply_markup":{"inline_keyboard":[[{"text":"Acme","callback_data":"p:0"}],[{"text":"Why?","url":"https://example.com/why"}]]}}`)
	messageID := sent["result"].(map[string]any)["message_id"].(float64)
	queryID := call("/sim/users/1001/tap?bot=keys_bot", `{"button":"Acme"}`)["callback_query_id"].(string)
	call("/bot"+token+"/answerCallbackQuery", `{"callback_query_id":"`+queryID+`","text":"Acme is stopped","show_alert":true}`)
	call("/bot"+token+"/editMessageText", fmt.Sprintf(`{"chat_id":1001,"message_id":%d,"text":"Acme is stopped.","reply_markup":{"inline_keyboard":[[{"text":"Resume","callback_data":"p:1"}]]}}`, int64(messageID)))

	type line struct {
		From        string `json:"from"`
		Text        string `json:"text"`
		EditedAt    string `json:"edited_at"`
		ReplyMarkup struct {
			InlineKeyboard [][]struct {
				Text         string `json:"text"`
				CallbackData string `json:"callback_data"`
			} `json:"inline_keyboard"`
		} `json:"reply_markup"`
	}
	type tap struct {
		MessageID float64 `json:"message_id"`
		Data      string  `json:"data"`
		Answer    *struct {
			Text      string `json:"text"`
			ShowAlert bool   `json:"show_alert"`
		} `json:"answer"`
	}
	type chat struct {
		Bot struct {
			Username string `json:"username"`
		} `json:"bot"`
		Lines []line `json:"lines"`
		Taps  []tap  `json:"taps"`
	}
	var st struct {
		Chats []chat `json:"chats"`
	}
	res := get(t, d.base+"/console/api/events")
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &st); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	i := slices.IndexFunc(st.Chats, func(c chat) bool { return c.Bot.Username == "keys_bot" })
	if i < 0 {
		t.Fatalf("no chat with keys_bot: %+v", st.Chats)
	}
	c := st.Chats[i]
	if len(c.Lines) != 2 || c.Lines[1].From != "bot" || c.Lines[1].Text != "Acme is stopped." || c.Lines[1].EditedAt == "" ||
		len(c.Lines[1].ReplyMarkup.InlineKeyboard) != 1 || c.Lines[1].ReplyMarkup.InlineKeyboard[0][0].CallbackData != "p:1" {
		t.Errorf("the chat's lines: %+v", c.Lines)
	}
	if len(c.Taps) != 1 || c.Taps[0].MessageID != messageID || c.Taps[0].Data != "p:0" || c.Taps[0].Answer == nil ||
		c.Taps[0].Answer.Text != "Acme is stopped" || !c.Taps[0].Answer.ShowAlert {
		t.Errorf("the chat's taps: %+v", c.Taps)
	}
}
