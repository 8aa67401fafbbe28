package sim_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// TestRoutingAnswers pins which answer each kind of path and method gets, served alone (herald sim) and
// mounted in a chi router the way herald dev mounts it: the control API's own 404 for anything under /sim/
// it does not serve (a known path with another method too), the Bot API's 404 everywhere else, and a HEAD
// served as the GET.
func TestRoutingAnswers(t *testing.T) {
	s := sim.New(sim.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { s.Close() })
	alone := httptest.NewServer(s)
	t.Cleanup(alone.Close)
	router := chi.NewRouter()
	router.Handle("/bot*", s)
	router.Handle("/sim", s)
	router.Handle("/sim/*", s)
	router.Get("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "console") })
	mounted := httptest.NewServer(router)
	t.Cleanup(mounted.Close)

	const (
		help     = "help"      // 200 with the route list
		ok       = "ok"        // 200 with a JSON body
		okBot    = "ok bot"    // 200 with "ok": true
		simError = "sim error" // Herald's error body with this status
		botError = "bot error" // the Bot API's error body with this status
		noBody   = "no body"   // HEAD: the status only
	)
	token := s.Token()
	cases := []struct {
		method, path string
		status       int
		kind         string
		code         string // the error code of a sim error
	}{
		{"GET", "/sim", 200, help, ""},
		{"GET", "/sim/", 200, help, ""},
		{"GET", "/sim/stats", 200, ok, ""},
		{"HEAD", "/sim/stats", 200, noBody, ""},
		{"HEAD", "/sim/nope", 404, noBody, ""},
		{"GET", "/sim/nope", 404, simError, "not_found"},
		{"DELETE", "/sim/users", 404, simError, "not_found"},
		{"GET", "/sim/users/1/start", 404, simError, "not_found"},
		{"GET", "/sim/users/", 404, simError, "not_found"},
		{"POST", "/sim/", 404, simError, "not_found"},
		{"GET", "/sim/users/abc", 400, simError, "invalid_request"},
		{"GET", "/sim/users/42", 404, simError, "not_found"},
		{"POST", "/sim/faults", 200, ok, ""},
		{"POST", "/sim", 404, simError, "not_found"},
		{"GET", "/bot" + token + "/getMe", 200, okBot, ""},
		{"POST", "/bot" + token + "/getMe", 200, okBot, ""},
		{"HEAD", "/bot" + token + "/getMe", 200, noBody, ""},
		{"POST", "/bot" + token + "/sendSticker", 404, botError, ""},
		{"POST", "/bot" + token, 404, botError, ""},
		{"POST", "/botwrong/getMe", 401, botError, ""},
		{"GET", "/bot" + token + "/sendMessage", 400, botError, ""},
	}
	// Mounted, only the paths herald dev hands to the simulator reach it.
	aloneOnly := []struct {
		method, path string
		status       int
		kind         string
		code         string
	}{
		{"GET", "/simulator", 404, botError, ""},
		{"GET", "/", 404, botError, ""},
	}
	for _, base := range []struct{ name, url string }{{"alone", alone.URL}, {"mounted", mounted.URL}} {
		served := cases
		if base.name == "alone" {
			served = append(served, aloneOnly...)
		}
		for _, c := range served {
			req, err := http.NewRequestWithContext(t.Context(), c.method, base.url+c.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.method == "POST" || c.method == "DELETE" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %s %s: %v", base.name, c.method, c.path, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s: %s %s: %v", base.name, c.method, c.path, err)
			}
			if resp.StatusCode != c.status {
				t.Errorf("%s: %s %s: %d %s, want %d", base.name, c.method, c.path, resp.StatusCode, body, c.status)
				continue
			}
			var (
				bot     messenger.Response
				control struct {
					Error  string `json:"error"`
					Routes any    `json:"routes"`
				}
			)
			_ = json.Unmarshal(body, &bot)
			_ = json.Unmarshal(body, &control)
			var good bool
			switch c.kind {
			case help:
				good = control.Routes != nil
			case ok:
				good = json.Valid(body) && control.Error == "" && !strings.Contains(string(body), `"error_code"`)
			case okBot:
				good = bot.OK
			case simError:
				good = control.Error == c.code && bot.ErrorCode == 0
			case botError:
				good = !bot.OK && bot.ErrorCode == c.status && control.Error == ""
			case noBody:
				good = len(body) == 0
			}
			if !good {
				t.Errorf("%s: %s %s: answered %s, want a %s", base.name, c.method, c.path, body, c.kind)
			}
		}
	}
}
