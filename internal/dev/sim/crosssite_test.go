package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
)

// raw sends one request with exactly the given headers and returns the status and body.
func (e *env) raw(t *testing.T, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// A web page the developer visits can make the browser send a "simple" request to 127.0.0.1 (a text/plain
// POST, a form, an image's GET) but cannot read the answer nor send application/json without a CORS
// preflight, which the simulator never grants: what changes its state is refused unless it is JSON, and
// from the simulator's own origin when the browser names one.
func TestControlAPIRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	json := "application/json"
	const user = `{"id":1001,"first_name":"Ann"}`
	for name, c := range map[string]struct {
		headers []string
		status  int
	}{
		"a text/plain POST (a page's fetch or form)": {[]string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType},
		"a form POST":                             {[]string{"Content-Type", "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		"no Content-Type":                         {nil, http.StatusUnsupportedMediaType},
		"JSON from another origin":                {[]string{"Content-Type", json, "Origin", "http://evil.example"}, http.StatusForbidden},
		"JSON from the same port of another host": {[]string{"Content-Type", json, "Origin", "http://evil.example" + e.srv.URL[strings.LastIndexByte(e.srv.URL, ':'):]}, http.StatusForbidden},
		"JSON the browser says is cross-site":     {[]string{"Content-Type", json, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		"text/plain from another origin":          {[]string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, http.StatusForbidden},
	} {
		for _, path := range []string{"/sim/users", "/sim/faults", "/sim/users/1001/block", "/sim/users/1001/tap", "/sim/callbacks/fail"} {
			if status, body := e.raw(t, "POST", path, user, c.headers...); status != c.status || !strings.Contains(body, `"error"`) {
				t.Errorf("%s to %s: %d %s, want %d with an error body", name, path, status, body, c.status)
			}
		}
	}
	if status, _ := e.raw(t, "DELETE", "/sim/faults", "", "Origin", "http://evil.example"); status != http.StatusForbidden {
		t.Errorf("a cross-origin DELETE: %d, want 403", status)
	}
	if n := len(e.sim.Users()); n != 0 {
		t.Errorf("the refused requests created %d users", n)
	}
	if _, err := e.sim.EnsureUser(sim.User{ID: 1002}); err != nil {
		t.Fatal(err)
	}
	if status, _ := e.raw(t, "POST", "/sim/reset", "", "Content-Type", "text/plain"); status != http.StatusUnsupportedMediaType || len(e.sim.Users()) != 1 {
		t.Errorf("a text/plain reset: %d, and %d users left, want 415 and the one", status, len(e.sim.Users()))
	}

	// The console's page (same origin: Origin and Sec-Fetch-Site say so) and curl (neither) are served.
	for name, headers := range map[string][]string{
		"the page":           {"Content-Type", json, "Origin", e.srv.URL, "Sec-Fetch-Site", "same-origin"},
		"curl":               {"Content-Type", json},
		"with a charset":     {"Content-Type", "application/json; charset=utf-8"},
		"a same-origin page": {"Content-Type", json, "Origin", e.srv.URL},
	} {
		if status, body := e.raw(t, "POST", "/sim/users", user, headers...); status != 200 {
			t.Errorf("%s: %d %s, want 200", name, status, body)
		}
	}
	if status, body := e.raw(t, "POST", "/sim/users/1001/block", "", "Content-Type", json); status != 200 {
		t.Errorf("a JSON POST without a body: %d %s, want 200", status, body)
	}
	// Reading stays open to any client: a page cannot read the answer of another origin.
	if status, _ := e.raw(t, "GET", "/sim/users", "", "Origin", "http://evil.example"); status != 200 {
		t.Errorf("a GET with another Origin: %d, want 200", status)
	}
}

// The Bot API changes state too (setWebhook points the updates elsewhere) and its default token is public:
// the same rule holds, and only the read-only methods answer a GET (an image tag on a page sends one).
func TestBotAPIRefusesCrossSiteRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	bot := "/bot" + e.sim.Token()
	e.mustControl(t, "POST", "/sim/users", map[string]any{"id": 1001}, nil)
	if err := e.client.SetWebhook(t.Context(), "http://127.0.0.1:1/hook", "", nil); err != nil {
		t.Fatal(err)
	}
	const hook, send = `{"url":"http://evil.example/"}`, `{"chat_id":1001,"text":"hi"}`
	for _, c := range []struct {
		method, path, body string
		headers            []string
	}{
		{"POST", "/setWebhook", hook, []string{"Content-Type", "text/plain"}},
		{"POST", "/sendMessage", send, nil},
		{"POST", "/deleteWebhook", "", []string{"Content-Type", "application/json", "Origin", "http://evil.example"}},
		{"POST", "/sendMessage", send, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}},
		{"GET", "/setWebhook", "", nil},
		{"GET", "/deleteWebhook", "", nil},
		{"GET", "/sendMessage", send, nil},
	} {
		status, body := e.raw(t, c.method, bot+c.path, c.body, c.headers...)
		if status < 400 || status > 499 {
			t.Errorf("%s %s %v: %d %s, want a 4xx", c.method, c.path, c.headers, status, body)
		}
	}
	if got := e.sim.WebhookInfo().URL; got != "http://127.0.0.1:1/hook" {
		t.Errorf("the webhook is %q after the refused requests", got)
	}
	if n := len(e.sim.Messages(1001)); n != 0 {
		t.Errorf("the refused requests sent %d messages", n)
	}
	for _, method := range []string{"getMe", "getWebhookInfo"} {
		status, body := e.raw(t, "GET", bot+"/"+method, "")
		var answer struct{ OK bool }
		if err := json.Unmarshal([]byte(body), &answer); status != 200 || err != nil || !answer.OK {
			t.Errorf("GET %s: %d %s, want 200 ok", method, status, body)
		}
	}
}
