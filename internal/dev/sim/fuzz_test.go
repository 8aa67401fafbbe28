package sim

import (
	"encoding/json"
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

// FuzzParseInlineKeyboard: a bot's reply_markup is outside input too (herald sim serves any client). No
// panic; an accepted keyboard has buttons with text and exactly one of a link the apps open or callback data
// of 1 to 64 bytes, and reads back as itself.
func FuzzParseInlineKeyboard(f *testing.F) {
	for _, s := range []string{`{"inline_keyboard":[[{"text":"a","callback_data":"p:0"}],[{"text":"b","url":"https://x.example"}]]}`,
		`{"inline_keyboard":[]}`, `{"inline_keyboard":[[]]}`, `{"inline_keyboard":[[{"text":"a"}]]}`,
		`{"inline_keyboard":[[{"text":"a","callback_data":""}]]}`, `{"inline_keyboard":[[{"text":"a","url":"javascript:x"}]]}`,
		`{"inline_keyboard":[{"text":"a"}]}`, `{"inline_keyboard":null}`, `[]`, `"x"`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := parseInlineKeyboard(json.RawMessage(raw))
		if err != nil || out == nil {
			return
		}
		kb := keyboardOf(out)
		if kb == nil {
			t.Fatalf("%s accepted as %s, which reads back as no keyboard", raw, out)
		}
		for _, row := range kb {
			for _, b := range row {
				if b.Text == "" || (b.URL == "") == (b.CallbackData == "") || b.URL != "" && !buttonURLOK(b.URL) ||
					b.URL == "" && !callbackDataOK(b.CallbackData) {
					t.Fatalf("%s accepted with the button %+v", raw, b)
				}
			}
		}
		if again, err := parseInlineKeyboard(out); err != nil || string(again) != string(out) {
			t.Fatalf("%s: its form %s reads back as %s, %v", raw, out, again, err)
		}
	})
}
