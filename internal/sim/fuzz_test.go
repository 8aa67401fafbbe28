package sim

import (
	"net/url"
	"testing"
)

// FuzzParseDeepLink: the simulator's open-link control route takes any URL (herald dev serves it). No panic;
// an accepted link names a bot and carries a start parameter. `go test` runs the seeds; `make fuzz` runs it
// for FUZZTIME.
func FuzzParseDeepLink(f *testing.F) {
	for _, s := range []string{"https://t.me/herald_sim_bot?start=abc", "tg://resolve?domain=herald_sim_bot&start=abc",
		"https://example.com/links/bot?start=", "https://t.me/?start=x", "https://t.me/bot", "%", "://", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, link string) {
		bot, payload, err := parseDeepLink(link)
		if err != nil {
			return
		}
		if bot == "" {
			t.Fatalf("%q accepted without a bot", link)
		}
		u, _ := url.Parse(link)
		if !u.Query().Has("start") || u.Query().Get("start") != payload {
			t.Fatalf("%q accepted with payload %q", link, payload)
		}
	})
}
