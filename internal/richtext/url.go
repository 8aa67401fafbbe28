package richtext

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// checkURL says why the platform would not take u as the URL of a text_link, or "". It accepts a subset
// of what the platform takes (tdlib LinkManager::check_link, parse_url): sent as an entity, a URL the
// platform does not take fails the whole message, long after the tenant's 202.
func checkURL(u string) string {
	if u == "" {
		return "the URL is empty"
	}
	if !utf8.ValidString(u) {
		return "the URL is not valid UTF-8"
	}
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] == 0x7F {
			return "a URL has no spaces or control characters (write %20)"
		}
	}
	scheme, rest, _ := strings.Cut(u, ":")
	switch {
	case strings.EqualFold(scheme, "https"), strings.EqualFold(scheme, "http"):
		return checkHTTPURL(rest)
	case strings.EqualFold(scheme, "tg"):
		return checkTgURL(rest)
	}
	return "a link is https:, http: or tg:"
}

// checkHTTPURL checks what follows "http:" or "https:".
func checkHTTPURL(rest string) string {
	rest, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return "an http or https URL goes on with //: https://host/…"
	}
	authority := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		authority = rest[:end]
	}
	if strings.IndexByte(authority, '@') >= 0 {
		return "a URL with user information (user@host) is refused: it disguises the host"
	}
	host, port, hasPort := strings.Cut(authority, ":")
	if host == "" {
		return "the URL has no host"
	}
	dot := false
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c == '.':
			if i == 0 || i == len(host)-1 || host[i-1] == '.' {
				return fmt.Sprintf("the host %q is not a domain name", host)
			}
			dot = true
		case isLetter(c) || isDigit(c) || c == '-' || c == '_' || c >= utf8.RuneSelf:
		default:
			return fmt.Sprintf("the host %q holds %q: a host is letters, digits, '-', '_' and dots", host, c)
		}
	}
	if !dot {
		return fmt.Sprintf("the host %q has no dot: the platform takes a link to a domain name only", host)
	}
	if international(host) {
		if why := checkInternationalHost(host); why != "" {
			return why
		}
	}
	if hasPort {
		v := 0
		for i := 0; i < len(port) && v <= 65535; i++ {
			if !isDigit(port[i]) {
				v = -1
				break
			}
			v = v*10 + int(port[i]-'0')
		}
		if port == "" || v < 1 || v > 65535 {
			return fmt.Sprintf("the port %q is not a number from 1 to 65535", port)
		}
	}
	return ""
}

// hostProfile maps an internationalised host as a browser and a resolver do (IDNA, UTS 46 for lookup,
// non-transitional), refusing what no registry would register: STD3's ASCII (letters, digits and '-'
// only, so a look-alike that maps to '@', '/', ':' or '.' is refused once mapped), the bidi rule, valid
// labels (no joiners out of place), DNS lengths.
var hostProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.BidiRule(), idna.ValidateLabels(true),
	idna.StrictDomainName(true), idna.VerifyDNSLength(true))

// international reports whether host needs IDNA's checks: it holds a non-ASCII character, or a punycode
// label (xn--), which a client shows decoded.
func international(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] >= utf8.RuneSelf {
			return true
		}
	}
	for label := range strings.SplitSeq(host, ".") {
		if len(label) >= 4 && strings.EqualFold(label[:4], "xn--") {
			return true
		}
	}
	return false
}

// checkInternationalHost says why an internationalised host (Unicode or punycode) disguises itself, or
// "" (issue 35). It is mapped with IDNA (hostProfile) and checked as a user would see it, decoded:
//   - every character is a letter, a mark or a digit (or '-'): a symbol that looks like punctuation (U+2215
//     DIVISION SLASH, U+2044 FRACTION SLASH), which IDNA lets through, would make "bank.example∕login" read
//     as a path of bank.example;
//   - the whole host is in one script, or Latin with the scripts written beside it (Han with kana, Han with
//     Bopomofo, Han with Hangul): the "highly restrictive" level of Unicode's UTS 39. So a Cyrillic 'а' in
//     "аpple.com", or a wholly Cyrillic label before a Latin top-level domain, is refused: a homograph of
//     another host. The cost: an internationalised label under a top-level domain of another script
//     (Cyrillic under .com) is refused too.
func checkInternationalHost(host string) string {
	ascii, err := hostProfile.ToASCII(host)
	if err != nil {
		return fmt.Sprintf("the host %q is not an internationalised domain name (IDNA, UTS 46: %v)", host, err)
	}
	shown, err := hostProfile.ToUnicode(ascii)
	if err != nil {
		return fmt.Sprintf("the host %q is not an internationalised domain name (IDNA, UTS 46: %v)", host, err)
	}
	var scripts []string
	for _, r := range shown {
		switch {
		case r == '.' || r == '-':
			continue
		case !unicode.IsLetter(r) && !unicode.IsMark(r) && !unicode.IsDigit(r):
			return fmt.Sprintf("the host %q holds %q (U+%04X), which is not a letter or digit: a look-alike of a URL's punctuation disguises the host", host, r, r)
		}
		if sc := scriptOf(r); sc != "" && !slices.Contains(scripts, sc) {
			scripts = append(scripts, sc)
		}
	}
	if !oneScript(scripts) {
		slices.Sort(scripts)
		return fmt.Sprintf("the host %q mixes scripts (%s): it could be taken for another host (a homograph); write it in one script", host, strings.Join(scripts, ", "))
	}
	return ""
}

// scriptOf is the name of the Unicode script of r, "" for Common and Inherited (digits, marks shared by
// several scripts), which go with any.
func scriptOf(r rune) string {
	for name, table := range unicode.Scripts {
		if name != "Common" && name != "Inherited" && unicode.Is(table, r) {
			return name
		}
	}
	return ""
}

// oneScript reports whether scripts (each once) may be mixed in one host: one, or Latin with Han and the
// scripts written beside Han (Japanese, Chinese, Korean).
func oneScript(scripts []string) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, allowed := range [][]string{{"Latin", "Han", "Hiragana", "Katakana"}, {"Latin", "Han", "Bopomofo"}, {"Latin", "Han", "Hangul"}} {
		if !slices.ContainsFunc(scripts, func(s string) bool { return !slices.Contains(allowed, s) }) {
			return true
		}
	}
	return false
}

// checkTgURL checks what follows "tg:": an optional //, a host of letters, digits, '-' or '_', then
// anything from '/', '?' or '#' on (tg://resolve?domain=…).
func checkTgURL(rest string) string {
	rest = strings.TrimPrefix(rest, "//")
	host := rest
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		host = rest[:end]
	}
	if host == "" {
		return "a tg: link names a host: tg://resolve?domain=…"
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !isLetter(c) && !isDigit(c) && c != '-' && c != '_' {
			return fmt.Sprintf("the host of a tg: link is letters, digits, '-' and '_', not %q", host)
		}
	}
	if strings.EqualFold(host, "user") {
		return "tg://user links (mentions by user id) are refused: the platform takes them only for users the bot has met, and refuses the message otherwise"
	}
	return ""
}

// maxLanguage bounds a pre's language: the platform's names (libprisma's) are short.
const maxLanguage = 64

// checkLanguage says why lang is not a pre's programming language, or "": 1 to 64 letters, digits and
// + # _ . - (c++, c#, objective-c, vb.net).
func checkLanguage(lang string) string {
	if lang == "" || len(lang) > maxLanguage {
		return fmt.Sprintf("a language is 1 to %d characters", maxLanguage)
	}
	for i := 0; i < len(lang); i++ {
		if c := lang[i]; !isLetter(c) && !isDigit(c) && !strings.ContainsRune("+#_.-", rune(c)) {
			return fmt.Sprintf("a language is letters, digits and + # _ . -, not %q", lang)
		}
	}
	return ""
}

// MaxButtonURL bounds a link button's url (spec v1-extensions §10), in characters.
const MaxButtonURL = 1024

// CheckButtonURL says why u cannot be the url of a link button (§10), or "": https: or tg: only (not
// http:, which a text_link may be), at most MaxButtonURL characters, and a URL the platform takes, by the
// rules of a text_link's (checkURL): the platform refuses the whole message for one it does not.
func CheckButtonURL(u string) string {
	if n := utf8.RuneCountInString(u); n > MaxButtonURL {
		return fmt.Sprintf("a button's url is at most %d characters (got %d)", MaxButtonURL, n)
	}
	scheme, _, _ := strings.Cut(u, ":")
	if !strings.EqualFold(scheme, "https") && !strings.EqualFold(scheme, "tg") {
		return "a button's url is https: or tg:"
	}
	return checkURL(u)
}
