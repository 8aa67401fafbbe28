package richtext

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRenderHTML(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Message
		want string
	}{
		{"plain", Message{Text: "hello"}, "hello"},
		{"escapes text", Message{Text: `<script>&"'`}, `&lt;script&gt;&amp;"'`},
		{"each type", Message{Text: "abcdefghij", Entities: []Entity{
			e(Bold, 0, 1), e(Italic, 1, 1), e(Underline, 2, 1), e(Strikethrough, 3, 1), e(Spoiler, 4, 1),
			link(5, 1, "https://a.example/"), e(Code, 6, 1), pre(7, 1, "go"), e(Blockquote, 8, 1), e(ExpandableBlockquote, 9, 1),
		}}, `<b>a</b><i>b</i><u>c</u><s>d</s><tg-spoiler>e</tg-spoiler><a href="https://a.example/">f</a><code>g</code>` +
			`<pre><code class="language-go">h</code></pre><blockquote>i</blockquote><blockquote expandable>j</blockquote>`},
		{"pre without language", Message{Text: "x", Entities: []Entity{pre(0, 1, "")}}, "<pre>x</pre>"},
		{"escapes the url", Message{Text: "x", Entities: []Entity{link(0, 1, `https://a.example/?a=1&b="<>"`)}},
			`<a href="https://a.example/?a=1&amp;b=&quot;&lt;&gt;&quot;">x</a>`},
		{"nested", Message{Text: "abc", Entities: []Entity{e(Bold, 0, 3), e(Italic, 1, 1)}}, "<b>a<i>b</i>c</b>"},
		{"nests in canonical order whatever the given order", Message{Text: "abc", Entities: []Entity{e(Italic, 1, 1), e(Bold, 0, 3)}}, "<b>a<i>b</i>c</b>"},
		{"same span", Message{Text: "x", Entities: []Entity{pre(0, 1, ""), e(Blockquote, 0, 1)}}, "<blockquote><pre>x</pre></blockquote>"},
		{"emoji offsets", Message{Text: "😀a😀b", Entities: []Entity{e(Bold, 2, 3), e(Italic, 5, 1)}}, "😀<b>a😀</b><i>b</i>"},
		{"adjacent and closing together", Message{Text: "abcd", Entities: []Entity{e(Bold, 0, 4), e(Italic, 0, 2), e(Underline, 2, 2)}},
			"<b><i>ab</i><u>cd</u></b>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := RenderHTML(c.m)
			if err != nil {
				t.Fatalf("RenderHTML: %v", err)
			}
			if got != c.want {
				t.Fatalf("RenderHTML =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// RenderHTML refuses what Validate refuses: it never renders a link to a script or tags that cross.
func TestRenderHTMLRefusesInvalid(t *testing.T) {
	for _, m := range []Message{
		{Text: "x", Entities: []Entity{link(0, 1, "javascript:alert(1)")}},
		{Text: "abc", Entities: []Entity{e(Bold, 0, 2), e(Italic, 1, 2)}},
		{Text: "x", Entities: []Entity{e(Bold, 0, 5)}},
		{Text: "a\xff"},
	} {
		if got, err := RenderHTML(m); err == nil {
			t.Errorf("RenderHTML(%+v) = %q, want an error", m, got)
		}
	}
}

// An empty or blank text renders (the console shows what it has); only lengths are not RenderHTML's.
func TestRenderHTMLEmpty(t *testing.T) {
	for _, text := range []string{"", " \n"} {
		if got, err := RenderHTML(Message{Text: text}); err != nil || got != text {
			t.Errorf("RenderHTML(%q) = %q, %v", text, got, err)
		}
	}
}

// The round trip parse → render → parse gives the same text and entities.
func TestRoundTrip(t *testing.T) {
	for _, in := range []string{
		"plain", "",
		`<b>Order <i>#1042</i></b> is <u>on its way</u> &amp; <s>late</s> <tg-spoiler>surprise</tg-spoiler>`,
		`<a href="https://shop.example/o/1042?x=1&amp;y=2"><b>track</b></a> <a href="tg://resolve?domain=shop">bot</a>`,
		`<blockquote expandable>q <b>b</b> <code>c</code> <pre><code class="language-go">x := 1</code></pre></blockquote>`,
		"😀<b>🇺🇦 &#x1F600;</b>\n<pre>a\n\tb</pre>&lt;&gt;&quot;",
		`<span class="tg-spoiler">s</span><strong>b</strong><em>i</em><ins>u</ins><del>d</del><strike>k</strike>`,
		"<b><i>x</i></b><i><b>y</b></i><b>a<b>b</b></b>",
		`<a href="https://a.example"><b>x</b></a>`,
	} {
		m, err := ParseHTML(in)
		if err != nil {
			t.Fatalf("ParseHTML(%q): %v", in, err)
		}
		h, err := RenderHTML(m)
		if err != nil {
			t.Fatalf("RenderHTML(%+v): %v", m, err)
		}
		back, err := ParseHTML(h)
		if err != nil {
			t.Fatalf("ParseHTML(RenderHTML(%q)) = ParseHTML(%q): %v", in, h, err)
		}
		if back.Text != m.Text || !reflect.DeepEqual(back.Entities, m.Entities) {
			t.Fatalf("round trip of %q through %q:\n got %+v\nwant %+v", in, h, back, m)
		}
	}
}

// A Message marshals as sendMessage's text and entities: the Bot API's field names, url and language only
// where they belong.
func TestMessageJSON(t *testing.T) {
	m, err := ParseHTML(`<b>a</b><a href="https://a.example">b</a><pre><code class="language-go">c</code></pre>`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"text":"abc","entities":[{"type":"bold","offset":0,"length":1},` +
		`{"type":"text_link","offset":1,"length":1,"url":"https://a.example"},{"type":"pre","offset":2,"length":1,"language":"go"}]}`
	if string(got) != want {
		t.Fatalf("JSON\n%s\nwant\n%s", got, want)
	}
}
