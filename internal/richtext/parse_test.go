package richtext

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/apierror"
)

func e(typ string, off, n int) Entity { return Entity{Type: typ, Offset: off, Length: n} }

func link(off, n int, url string) Entity {
	return Entity{Type: TextLink, Offset: off, Length: n, URL: url}
}

func pre(off, n int, lang string) Entity {
	return Entity{Type: Pre, Offset: off, Length: n, Language: lang}
}

func TestParseHTMLAccepts(t *testing.T) {
	for _, c := range []struct {
		name, in, text string
		want           []Entity
	}{
		{"plain", "hello", "hello", nil},
		{"empty", "", "", nil},
		{"b", "<b>x</b>", "x", []Entity{e(Bold, 0, 1)}},
		{"strong", "a<strong>x</strong>", "ax", []Entity{e(Bold, 1, 1)}},
		{"i", "<i>x</i>", "x", []Entity{e(Italic, 0, 1)}},
		{"em", "<em>x</em>", "x", []Entity{e(Italic, 0, 1)}},
		{"u", "<u>x</u>", "x", []Entity{e(Underline, 0, 1)}},
		{"ins", "<ins>x</ins>", "x", []Entity{e(Underline, 0, 1)}},
		{"s", "<s>x</s>", "x", []Entity{e(Strikethrough, 0, 1)}},
		{"strike", "<strike>x</strike>", "x", []Entity{e(Strikethrough, 0, 1)}},
		{"del", "<del>x</del>", "x", []Entity{e(Strikethrough, 0, 1)}},
		{"span spoiler", `<span class="tg-spoiler">x</span>`, "x", []Entity{e(Spoiler, 0, 1)}},
		{"tg-spoiler", "<tg-spoiler>x</tg-spoiler>", "x", []Entity{e(Spoiler, 0, 1)}},
		{"a https", `<a href="https://example.com/a?b=1&amp;c=2">x</a>`, "x", []Entity{link(0, 1, "https://example.com/a?b=1&c=2")}},
		{"a http with port and fragment", `<a href="http://shop.example.com:8080/o/1042#top">x</a>`, "x", []Entity{link(0, 1, "http://shop.example.com:8080/o/1042#top")}},
		{"a tg", `<a href="tg://resolve?domain=herald">x</a>`, "x", []Entity{link(0, 1, "tg://resolve?domain=herald")}},
		{"a tg without slashes", `<a href="tg:resolve?domain=herald">x</a>`, "x", []Entity{link(0, 1, "tg:resolve?domain=herald")}},
		{"a internationalised host", `<a href="https://пример.рф/">x</a>`, "x", []Entity{link(0, 1, "https://пример.рф/")}},
		{"code", "<code>x</code>", "x", []Entity{e(Code, 0, 1)}},
		{"pre", "<pre>x\ny</pre>", "x\ny", []Entity{pre(0, 3, "")}},
		{"pre with language", `<pre><code class="language-go">x</code></pre>`, "x", []Entity{pre(0, 1, "go")}},
		{"pre with language c++", `<pre><code class="language-c++">x</code></pre>`, "x", []Entity{pre(0, 1, "c++")}},
		{"pre holding a code without language", `<pre><code>x</code></pre>`, "x", []Entity{pre(0, 1, "")}},
		{"blockquote", "<blockquote>x</blockquote>", "x", []Entity{e(Blockquote, 0, 1)}},
		{"expandable blockquote", "<blockquote expandable>x</blockquote>", "x", []Entity{e(ExpandableBlockquote, 0, 1)}},
		{"expandable with an empty value", `<blockquote expandable="">x</blockquote>`, "x", []Entity{e(ExpandableBlockquote, 0, 1)}},

		// HTML's leniencies the platform shares.
		{"upper-case tag", "<B>x</B>", "x", []Entity{e(Bold, 0, 1)}},
		{"mixed-case end tag", "<Strong>x</sTRONG>", "x", []Entity{e(Bold, 0, 1)}},
		{"upper-case attribute", `<a HREF="https://a.example">x</a>`, "x", []Entity{link(0, 1, "https://a.example")}},
		{"single quotes", `<a href='https://a.example/?q="1"'>x</a>`, "x", []Entity{link(0, 1, `https://a.example/?q="1"`)}},
		{"unquoted value", `<span class=tg-spoiler>x</span>`, "x", []Entity{e(Spoiler, 0, 1)}},
		{"spaces in tags", "<b >x</b >", "x", []Entity{e(Bold, 0, 1)}},
		{"newlines in a tag", "<a\nhref = \"https://a.example\"\n>x</a>", "x", []Entity{link(0, 1, "https://a.example")}},

		// Character references.
		{"named references", "&lt;b&gt; &amp; &quot;q&quot;", `<b> & "q"`, nil},
		{"numeric references", "&#65;&#x42;&#X43;&#x0044;", "ABCD", nil},
		{"quotes in text", `"it's"`, `"it's"`, nil},
		{"astral reference shifts offsets", "&#x1F600;<b>x</b>", "😀x", []Entity{e(Bold, 2, 1)}},
		{"reference inside an attribute", `<a href="https://a.example/?a=1&#38;b=2">x</a>`, "x", []Entity{link(0, 1, "https://a.example/?a=1&b=2")}},

		// Offsets in UTF-16 code units.
		{"emoji before", "😀<b>x</b>", "😀x", []Entity{e(Bold, 2, 1)}},
		{"emoji inside", "<b>a😀b</b>c", "a😀bc", []Entity{e(Bold, 0, 4)}},
		{"two-byte and three-byte characters count one", "é€<i>ü</i>", "é€ü", []Entity{e(Italic, 2, 1)}},
		{"flag (two astral characters)", "🇺🇦<u>x</u>", "🇺🇦x", []Entity{e(Underline, 4, 1)}},
		{"newlines count one", "a\n<b>b\r\nc</b>\n", "a\nb\r\nc\n", []Entity{e(Bold, 2, 4)}},

		// Nesting.
		{"nested", "<b>a<i>b</i>c</b>", "abc", []Entity{e(Bold, 0, 3), e(Italic, 1, 1)}},
		{"same span keeps the markup's order", "<i><b>x</b></i>", "x", []Entity{e(Italic, 0, 1), e(Bold, 0, 1)}},
		{"same span: formatting before link", `<a href="https://a.example"><b>x</b></a>`, "x", []Entity{e(Bold, 0, 1), link(0, 1, "https://a.example")}},
		{"formatting around a link", `<i>see <a href="https://a.example">this</a></i>`, "see this", []Entity{e(Italic, 0, 8), link(4, 4, "https://a.example")}},
		{"b in b (merged: TestParseHTMLMergesIdenticalSpans)", "<b>a<b>b</b></b>", "ab", []Entity{e(Bold, 0, 2)}},
		{"blockquote holds pre", "<blockquote>q<pre>x</pre></blockquote>", "qx", []Entity{e(Blockquote, 0, 2), pre(1, 1, "")}},
		{"blockquote holds code", "<blockquote><code>x</code></blockquote>", "x", []Entity{e(Blockquote, 0, 1), e(Code, 0, 1)}},
		{"blockquote holds a link", `<blockquote><a href="https://a.example">x</a></blockquote>`, "x", []Entity{e(Blockquote, 0, 1), link(0, 1, "https://a.example")}},
		{"formatting holds a blockquote", "<b><blockquote>x</blockquote></b>", "x", []Entity{e(Blockquote, 0, 1), e(Bold, 0, 1)}},
		{"every formatting at once", `<b><i><u><s><tg-spoiler>x</tg-spoiler></s></u></i></b>`, "x",
			[]Entity{e(Bold, 0, 1), e(Italic, 0, 1), e(Underline, 0, 1), e(Strikethrough, 0, 1), e(Spoiler, 0, 1)}},

		// Empty elements give no entity, as on the platform.
		{"empty element", "<b></b>x", "x", nil},
		{"empty nested elements", "<b><i></i></b>x<u></u>", "x", nil},
		{"empty inside a full one", "<b>x<i></i></b>", "x", []Entity{e(Bold, 0, 1)}},
		{"empty pre with a language", `<pre><code class="language-go"></code></pre>`, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseHTML(c.in)
			if err != nil {
				t.Fatalf("ParseHTML(%q): %v", c.in, err)
			}
			if m.Text != c.text {
				t.Errorf("text %q, want %q", m.Text, c.text)
			}
			if len(m.Entities) != 0 || len(c.want) != 0 {
				if !reflect.DeepEqual(m.Entities, c.want) {
					t.Errorf("entities %+v, want %+v", m.Entities, c.want)
				}
			}
		})
	}
}

func TestParseHTMLRefuses(t *testing.T) {
	for _, c := range []struct {
		name, in string
		offset   int // in characters
		reason   string
	}{
		// Tags outside the subset.
		{"br", "a<br>b", 1, `unknown tag <br>`},
		{"p", "<p>x</p>", 0, `unknown tag <p>`},
		{"span without class", "<span>x</span>", 0, `class="tg-spoiler"`},
		{"span with another class", `<span class="red">x</span>`, 0, `class="tg-spoiler"`},
		{"tg-emoji", `<tg-emoji emoji-id="1">👍</tg-emoji>`, 0, "unknown tag <tg-emoji>"},
		{"comment", "<!-- x -->", 0, "'<' that starts no tag"},
		{"self-closing", "<b/>", 2, "self-closing"},
		{"self-closing with space", "x<br />", 1, "unknown tag <br>"},

		// Attributes.
		{"unknown attribute", `<b style="x">y</b>`, 3, `attribute "style"`},
		{"boolean attribute on b", "<b x>y</b>", 3, `attribute "x"`},
		{"duplicate attribute", `<a href="https://a.example" href="https://b.example">x</a>`, 28, "twice"},
		{"a without href", "<a>x</a>", 0, "href"},
		{"empty href", `<a href="">x</a>`, 8, "empty"},
		{"expandable with a value", `<blockquote expandable="yes">x</blockquote>`, 12, "expandable"},
		{"class on a standalone code", `<code class="language-go">x</code>`, 6, "inside <pre>"},
		{"another class on code", `<pre><code class="go">x</code></pre>`, 17, `language-`},
		{"empty language", `<pre><code class="language-">x</code></pre>`, 17, "language"},
		{"language with a space", `<pre><code class="language-a b">x</code></pre>`, 17, "language"},
		{"unquoted value with a colon", `<a href=https://a.example>x</a>`, 8, "quote"},
		{"attribute without a name", `<a ="x">y</a>`, 3, "attribute"},
		{"unclosed quote", `<a href="https://a.example>x</a>`, 0, "never ends"},

		// Links.
		{"javascript", `<a href="javascript:alert(1)">x</a>`, 8, "https:, http: or tg:"},
		{"data", `<a href="data:text/html,x">x</a>`, 8, "https:, http: or tg:"},
		{"ftp", `<a href="ftp://a.example/">x</a>`, 8, "https:, http: or tg:"},
		{"relative", `<a href="/orders/1">x</a>`, 8, "https:, http: or tg:"},
		{"no slashes", `<a href="https:a.example">x</a>`, 8, "//"},
		{"user info", `<a href="https://bank.example@evil.example/">x</a>`, 8, "user"},
		{"no dot", `<a href="https://localhost/">x</a>`, 8, "host"},
		{"empty host", `<a href="https:///x">x</a>`, 8, "host"},
		{"bad host character", `<a href="https://a_b!.example/">x</a>`, 8, "host"},
		{"port zero", `<a href="https://a.example:0/">x</a>`, 8, "port"},
		{"port too large", `<a href="https://a.example:65536/">x</a>`, 8, "port"},
		{"port not a number", `<a href="https://a.example:x/">x</a>`, 8, "port"},
		{"space in url", `<a href="https://a.example/a b">x</a>`, 8, "space"},
		{"ipv6 literal", `<a href="https://[::1]/">x</a>`, 8, "host"},
		{"tg mention by id", `<a href="tg://user?id=42">x</a>`, 8, "tg://user"},
		{"tg mention upper case", `<a href="TG://User?id=42">x</a>`, 8, "tg://user"},
		{"tg with a port", `<a href="tg://resolve:80?domain=x">x</a>`, 8, "host"},
		{"tg empty host", `<a href="tg://?x=1">x</a>`, 8, "host"},

		// Nesting.
		{"b in code", "<code><b>x</b></code>", 6, "code and pre hold no other formatting"},
		{"code in b", "<b><code>x</code></b>", 3, "inside a blockquote only"},
		{"pre in i", "<i><pre>x</pre></i>", 3, "inside a blockquote only"},
		{"code in a link", `<a href="https://a.example"><code>x</code></a>`, 28, "inside a blockquote only"},
		{"code in blockquote in b", "<b><blockquote><code>x</code></blockquote></b>", 15, "inside a blockquote only"},
		{"link in link", `<a href="https://a.example"><a href="https://b.example">x</a></a>`, 28, "link cannot be inside a link"},
		{"blockquote in link", `<a href="https://a.example"><blockquote>x</blockquote></a>`, 28, "blockquote cannot be inside a link"},
		{"blockquote in blockquote", "<blockquote><blockquote>x</blockquote></blockquote>", 12, "blockquote cannot be inside a blockquote"},
		{"b in pre", "<pre><b>x</b></pre>", 5, "<pre> holds"},
		{"code after text in pre", `<pre>a<code class="language-go">x</code></pre>`, 6, "<pre> holds"},
		{"text after the code of a pre", `<pre><code class="language-go">x</code>y</pre>`, 39, "</pre>"},
		{"tag after the code of a pre", `<pre><code class="language-go">x</code><b>y</b></pre>`, 39, "</pre>"},
		{"second code in a pre", `<pre><code>x</code><code>y</code></pre>`, 19, "</pre>"},
		{"tag in the code of a pre", `<pre><code class="language-go"><b>x</b></code></pre>`, 31, "code and pre hold no other formatting"},

		// Structure.
		{"mismatched end tag", "<b>x</i>", 4, "</i> does not close <b>"},
		{"end tag of the same entity by another name", "<b>x</strong>", 4, "</strong> does not close <b>"},
		{"crossed tags", "<b><i>x</b></i>", 7, "</b> does not close <i>"},
		{"end tag with nothing open", "x</b>", 1, "nothing is open"},
		{"never closed", "<b>x", 0, "never closed"},
		{"inner never closed", "<b><i>x</b>", 7, "does not close <i>"},
		{"unfinished tag", "<b", 0, "never ends"},
		{"unfinished end tag", "<b>x</b", 4, "never ends"},
		{"empty end tag", "<b>x</>", 4, "end tag"},
		{"end tag with an attribute", `<b>x</b class="y">`, 4, "end tag"},

		// Bare markup characters and references.
		{"bare <", "a < b", 2, "&lt;"},
		{"bare < before a digit", "I <3 you", 2, "&lt;"},
		{"bare >", "a > b", 2, "&gt;"},
		{"bare &", "fish & chips", 5, "&amp;"},
		{"unknown named reference", "a&nbsp;b", 1, "&nbsp;"},
		{"upper-case named reference", "&LT;", 0, "&LT;"},
		{"reference without ;", "&lt b", 0, "';'"},
		{"numeric reference without ;", "&#65 b", 0, "';'"},
		{"zero", "&#0;", 0, "code point"},
		{"surrogate", "&#xD800;", 0, "code point"},
		{"beyond Unicode", "&#x110000;", 0, "code point"},
		{"huge", "&#99999999999999999999;", 0, "code point"},
		{"no digits", "&#;", 0, "digits"},
		{"no hex digits", "&#x;", 0, "digits"},

		// Offsets count characters, not bytes.
		{"offset after emoji", "😀é<p>", 2, "unknown tag <p>"},
		{"invalid UTF-8", "ab\xffc", 2, "UTF-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseHTML(c.in)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("ParseHTML(%q) = %+v, %v; want a *SyntaxError", c.in, m, err)
			}
			if se.Offset != c.offset {
				t.Errorf("offset %d, want %d (%v)", se.Offset, c.offset, err)
			}
			if se.Byte < 0 || se.Byte > len(c.in) || charOffset(c.in, se.Byte) != se.Offset {
				t.Errorf("byte offset %d does not match character offset %d", se.Byte, se.Offset)
			}
			if !strings.Contains(se.Reason, c.reason) {
				t.Errorf("reason %q, want it to say %q", se.Reason, c.reason)
			}
			if !strings.Contains(err.Error(), "offset "+strconv.Itoa(c.offset)) {
				t.Errorf("message %q does not name the offset %d", err.Error(), c.offset)
			}
		})
	}
}

// A long markup is parsed in one piece: offsets past many entities (as many as the platform takes) and
// references stay exact.
func TestParseHTMLLong(t *testing.T) {
	var in, text strings.Builder
	var want []Entity
	off := 0
	for i := range MaxEntities {
		in.WriteString("😀 &amp; <b>#" + strconv.Itoa(i) + "</b>\n")
		s := "#" + strconv.Itoa(i)
		text.WriteString("😀 & " + s + "\n")
		want = append(want, e(Bold, off+5, len(s)))
		off += 5 + len(s) + 1
	}
	m, err := ParseHTML(in.String())
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != text.String() {
		t.Fatalf("text differs")
	}
	if !reflect.DeepEqual(m.Entities, want) {
		t.Fatalf("entities differ: got %d, first %+v", len(m.Entities), m.Entities[:min(3, len(m.Entities))])
	}
	if UTF16Len(m.Text) != off {
		t.Fatalf("UTF16Len %d, want %d", UTF16Len(m.Text), off)
	}
}

func TestLength(t *testing.T) {
	m, err := ParseHTML("<b>😀</b>&amp;é")
	if err != nil {
		t.Fatal(err)
	}
	// The platform counts code points: 😀, & and é are one each, though 😀 is two UTF-16 units.
	if m.Length() != 3 {
		t.Fatalf("Length %d, want 3", m.Length())
	}
	if UTF16Len(m.Text) != 4 {
		t.Fatalf("UTF16Len %d, want 4", UTF16Len(m.Text))
	}
}

// The ingress answers a refused markup with 400 invalid_format, a catalogued code, and the error's text,
// which names the offset.
func TestSyntaxErrorIsInvalidFormat(t *testing.T) {
	_, err := ParseHTML("a<br>")
	if err == nil {
		t.Fatal("accepted <br>")
	}
	ae := apierror.InvalidFormat.With("%v", err)
	if ae.Status != http.StatusBadRequest || ae.Code != "invalid_format" || !strings.Contains(ae.Message, "at offset 1 ") {
		t.Fatalf("%+v", ae)
	}
	if got := apierror.ByCode("invalid_format"); got != apierror.InvalidFormat {
		t.Fatalf("invalid_format is not in the catalogue: ByCode gives %+v", got)
	}
}

// Identical spans are merged (issue 35): a formatting inside the same formatting adds nothing, and two
// siblings of the same formatting, or links to the same URL, that touch are one span. What the user sees
// does not change; the platform counts fewer entities. Spans that would cross once merged stay apart.
func TestParseHTMLMergesIdenticalSpans(t *testing.T) {
	deep := strings.Repeat("<b>", 9000) + "x" + strings.Repeat("</b>", 9000)
	for _, c := range []struct {
		name, in string
		want     []Entity
	}{
		{"b in b", "<b>a<b>b</b></b>", []Entity{e(Bold, 0, 2)}},
		{"9,000 nested b", deep, []Entity{e(Bold, 0, 1)}},
		{"b in i in b", "<b>a<i>b<b>c</b></i></b>", []Entity{e(Bold, 0, 3), e(Italic, 1, 2)}},
		{"strong in b", "<b><strong>x</strong></b>", []Entity{e(Bold, 0, 1)}},
		{"adjacent b", "<b>a</b><b>b</b><b>c</b>", []Entity{e(Bold, 0, 3)}},
		{"adjacent b and strong", "<b>a</b><strong>b</strong>", []Entity{e(Bold, 0, 2)}},
		{"adjacent across an empty element", "<b>a</b><i></i><b>b</b>", []Entity{e(Bold, 0, 2)}},
		{"adjacent inside a parent", "<i><b>a</b><b>b</b>c</i>", []Entity{e(Italic, 0, 3), e(Bold, 0, 2)}},
		{"adjacent links to one URL", `<a href="https://a.example">a</a><a href="https://a.example">b</a>`, []Entity{link(0, 2, "https://a.example")}},
		{"adjacent holding children", "<b><i>a</i></b><b>b</b>", []Entity{e(Bold, 0, 2), e(Italic, 0, 1)}},

		// Not identical, not touching, or not siblings: kept apart.
		{"adjacent links to two URLs", `<a href="https://a.example">a</a><a href="https://b.example">b</a>`,
			[]Entity{link(0, 1, "https://a.example"), link(1, 1, "https://b.example")}},
		{"text between", "<b>a</b> <b>b</b>", []Entity{e(Bold, 0, 1), e(Bold, 2, 1)}},
		{"b and i", "<b>a</b><i>b</i>", []Entity{e(Bold, 0, 1), e(Italic, 1, 1)}},
		{"would cross once merged", "<i>x<b>a</b></i><b>b</b>", []Entity{e(Italic, 0, 2), e(Bold, 1, 1), e(Bold, 2, 1)}},
		{"adjacent code", "<code>a</code><code>b</code>", []Entity{e(Code, 0, 1), e(Code, 1, 1)}},
		{"adjacent pre", "<pre>a</pre><pre>b</pre>", []Entity{pre(0, 1, ""), pre(1, 1, "")}},
		{"adjacent blockquotes", "<blockquote>a</blockquote><blockquote>b</blockquote>", []Entity{e(Blockquote, 0, 1), e(Blockquote, 1, 1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseHTML(c.in)
			if err != nil {
				t.Fatalf("ParseHTML: %v", err)
			}
			if !reflect.DeepEqual(m.Entities, c.want) {
				t.Errorf("%d entities %+v, want %+v", len(m.Entities), m.Entities[:min(len(m.Entities), 5)], c.want)
			}
			if err := validateEntities(m.Text, m.Entities); err != nil {
				t.Errorf("the merged entities are not valid: %v", err)
			}
		})
	}
}

// The platform refuses a message of more than MaxEntities entities ("entities too long"); the door
// refuses it first, with a *SyntaxError naming the tag that makes one too many. Identical spans merged
// first (TestParseHTMLMergesIdenticalSpans) do not count, nor do empty elements.
func TestParseHTMLRefusesTooManyEntities(t *testing.T) {
	spans := func(n int) string { return strings.Repeat("<b>x</b> ", n) }
	m, err := ParseHTML(spans(MaxEntities))
	if err != nil || len(m.Entities) != MaxEntities {
		t.Fatalf("%d spans: %d entities, %v; want them accepted", MaxEntities, len(m.Entities), err)
	}
	if m, err := ParseHTML(strings.TrimSuffix(spans(MaxEntities), " ") + strings.Repeat("<i></i>", 500) + "<b>y<b>z</b></b>"); err != nil || len(m.Entities) != MaxEntities {
		t.Fatalf("%d spans, 500 empty elements and a b holding a b, touching the last span: %d entities, %v; want %d, accepted",
			MaxEntities, len(m.Entities), err, MaxEntities)
	}
	for _, in := range []string{
		spans(MaxEntities + 1),
		spans(MaxEntities) + strings.Repeat("<b>", 500) + "y" + strings.Repeat("</b>", 500),
		strings.Repeat(`<a href="https://a.example">x</a> `, MaxEntities+1),
	} {
		_, err := ParseHTML(in)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("ParseHTML of %d characters: %v, want a *SyntaxError", len(in), err)
		}
		// The tag of the 101st entity: after 100 spans of the form "<b>x</b> " (9 characters) or
		// `<a href="https://a.example">x</a> ` (34).
		wantAt := MaxEntities * 9
		if strings.HasPrefix(in, "<a") {
			wantAt = MaxEntities * 34
		}
		if se.Offset != wantAt || !strings.Contains(se.Reason, strconv.Itoa(MaxEntities)) {
			t.Errorf("refused %+v, want offset %d and a reason naming the limit %d", se, wantAt, MaxEntities)
		}
	}
}
