package richtext

import (
	"strings"
	"testing"
)

// Links and buttons whose host disguises itself are refused (issue 35): a look-alike of '@', '/', ':' or
// '.' that is no such thing to the platform (U+FF20, U+2215, U+2044…), an invisible joiner, and a host
// that mixes scripts (a Cyrillic 'а' among Latin letters: a homograph of another host), written in Unicode
// or in punycode alike. Internationalised hosts in one script (or Latin with Han, kana or Hangul) stay
// accepted, as their ASCII lookalikes of the same characters (fullwidth letters map to ASCII ones).
func TestLinksRefuseHostsThatDisguiseThemselves(t *testing.T) {
	for _, c := range []struct {
		url, why string // why: "" for accepted
	}{
		{"https://bank.example\uff20evil.example/login", "IDNA"},                   // fullwidth @
		{"https://bank.example\u2215login.evil.example/", "not a letter or digit"}, // division slash
		{"https://bank.example\u2044login.evil.example/", "not a letter or digit"}, // fraction slash
		{"https://bank.example\uff0flogin.evil.example/", "IDNA"},                  // fullwidth solidus
		{"https://ex\u200dample.com/", "IDNA"},                                     // zero-width joiner
		{"https://\u0430pple.com/", "mixes scripts"},                               // Cyrillic а, then Latin
		{"https://xn--pple-43d.com/", "mixes scripts"},                             // the same, in punycode
		{"https://\u0430\u0440\u0440\u04cf\u0435.com/", "mixes scripts"},           // wholly Cyrillic before a Latin TLD
		{"https://paypa\u03bb.com/", "mixes scripts"},                              // a Greek letter among Latin ones

		{"https://пример.рф/", ""},
		{"https://xn--e1afmkfd.xn--p1ai/", ""},
		{"https://münchen.de/", ""},
		{"https://日本語.jp/", ""},
		{"https://お知らせ.example.jp/", ""},
		{"https://ｅｘａｍｐｌｅ.com/", ""},
		{"https://shop.example.com/a_b?x=ü", ""},
		{"https://a_b.example.com/", ""},
	} {
		why := checkURL(c.url)
		switch {
		case c.why == "" && why != "":
			t.Errorf("%q refused (%s), want it accepted", c.url, why)
		case c.why != "" && !strings.Contains(why, c.why):
			t.Errorf("%q: %q, want it refused saying %q", c.url, why, c.why)
		}
		// The same rule for a link in markup and for a button.
		_, err := ParseHTML(`<a href="` + c.url + `">x</a>`)
		if (err == nil) != (c.why == "") {
			t.Errorf("ParseHTML of a link to %q: %v", c.url, err)
		}
		if b := CheckButtonURL(c.url); (b == "") != (c.why == "") {
			t.Errorf("CheckButtonURL(%q) = %q", c.url, b)
		}
	}
}
