package richtext

import (
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzParseHTML: whatever a tenant sends as HTML, ParseHTML does not panic; it refuses with a
// *SyntaxError whose offsets point into the markup, or it accepts, and then what it returns is what
// Validate accepts (branded: what Herald sends) and what RenderHTML renders back to markup that parses to
// the same text and entities; the entities' compact form (the store's) reads back as the same entities.
// `go test` runs the seeds; `make fuzz` runs it for FUZZTIME.
func FuzzParseHTML(f *testing.F) {
	for _, s := range []string{
		"", "plain", "<b>x</b>", "<b><i>x</i></b>", "<i><b>x</b></i>", `<a href="https://a.example"><b>x</b></a>`,
		`<span class="tg-spoiler">x</span>`, "<tg-spoiler>x</tg-spoiler>", "<u>a</u><ins>b</ins><s>c</s><strike>d</strike><del>e</del>",
		"<strong>a</strong><em>b</em>", "<code>x</code>", "<pre>x</pre>", `<pre><code class="language-go">x</code></pre>`,
		"<pre><code>x</code></pre>", "<blockquote>x</blockquote>", "<blockquote expandable>x <b>y</b></blockquote>",
		"<blockquote><pre>x</pre><code>y</code></blockquote>", "<b><blockquote>x</blockquote></b>",
		`<a href="tg://resolve?domain=x">t</a>`, `<a href='http://a.example:80/p?q=1&amp;r=2#f'>l</a>`,
		"&lt;&gt;&amp;&quot;&#65;&#x1F600;", "😀<b>🇺🇦</b>é", "a\n<b>b\r\nc</b>\n", "<b></b><i><u></u></i>",
		"<b>a<b>b</b></b>", "<B>x</b>", "<b >x</b >",
		// Refused ones, so the fuzzer starts at the edges too.
		"<b>x</i>", "<b>x", "x</b>", "<br>", "<b/>", "a < b", "a > b", "a & b", "&nbsp;", "&#0;", "&#xD800;",
		"<code><b>x</b></code>", "<b><code>x</code></b>", `<a href="javascript:x">y</a>`, `<a href="tg://user?id=1">y</a>`,
		`<pre>a<code class="language-go">b</code></pre>`, `<pre><code class="language-go">b</code>c</pre>`,
		"<blockquote><blockquote>x</blockquote></blockquote>", `<a href="https://a.example"`, "\xff", "<a\x00>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseHTML(in)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("ParseHTML(%q): %T %v, want a *SyntaxError", in, err, err)
			}
			if se.Byte < 0 || se.Byte > len(in) || se.Offset != charOffset(in, se.Byte) || se.Reason == "" {
				t.Fatalf("ParseHTML(%q): bad error %+v", in, se)
			}
			return
		}
		if !utf8.ValidString(m.Text) || len(m.Text) > len(in) {
			t.Fatalf("ParseHTML(%q): text %q", in, m.Text)
		}
		if err := validateEntities(m.Text, m.Entities); err != nil {
			t.Fatalf("ParseHTML(%q) = %+v, which Validate refuses: %v", in, m, err)
		}
		if branded, fits := Brand("Acme", m); fits {
			if err := Validate(branded); err != nil {
				t.Fatalf("ParseHTML(%q) branded = %+v, which Validate refuses: %v", in, branded, err)
			}
		}
		stored, err := EncodeEntities(m.Entities)
		if err != nil {
			t.Fatalf("EncodeEntities(ParseHTML(%q).Entities): %v", in, err)
		}
		if got, err := DecodeEntities(stored); err != nil || !reflect.DeepEqual(got, m.Entities) {
			t.Fatalf("the compact form of ParseHTML(%q)'s entities, %q, reads back as %+v (%v), want %+v", in, stored, got, err, m.Entities)
		}
		h, err := RenderHTML(m)
		if err != nil {
			t.Fatalf("RenderHTML(ParseHTML(%q)): %v", in, err)
		}
		back, err := ParseHTML(h)
		if err != nil {
			t.Fatalf("ParseHTML(RenderHTML(ParseHTML(%q))) = ParseHTML(%q): %v", in, h, err)
		}
		if back.Text != m.Text || !reflect.DeepEqual(back.Entities, m.Entities) {
			t.Fatalf("round trip of %q through %q:\n got %+v\nwant %+v", in, h, back, m)
		}
	})
}

// FuzzValidate: whatever text and entity the simulator is handed, Validate does not panic, and what it
// accepts RenderHTML renders to markup that ParseHTML accepts, with the same text and entities (two of
// the same formatting, nested or side by side, as one).
func FuzzValidate(f *testing.F) {
	f.Add("abc", uint8(0), 0, 1, uint8(1), 1, 1, "")
	f.Add("😀b", uint8(0), 1, 2, uint8(0), 0, 0, "")
	f.Add("abc", uint8(5), 0, 3, uint8(8), 1, 1, "go")
	f.Add("abc", uint8(8), 0, 3, uint8(6), 0, 3, "")
	f.Add("x", uint8(5), 0, 1, uint8(0), 0, 1, "https://a.example")
	f.Add("abc", uint8(0), 0, 1, uint8(0), 1, 2, "")
	f.Add("abc", uint8(5), 0, 2, uint8(5), 2, 1, "https://a.example")
	f.Fuzz(func(t *testing.T, text string, t1 uint8, o1, l1 int, t2 uint8, o2, l2 int, arg string) {
		types := []string{Bold, Italic, Underline, Strikethrough, Spoiler, TextLink, Code, Pre, Blockquote, ExpandableBlockquote, "url"}
		mk := func(ty uint8, o, l int) Entity {
			ent := Entity{Type: types[int(ty)%len(types)], Offset: o, Length: l}
			switch ent.Type {
			case TextLink:
				ent.URL = arg
			case Pre:
				ent.Language = arg
			}
			return ent
		}
		m := Message{Text: text, Entities: []Entity{mk(t1, o1, l1), mk(t2, o2, l2)}}
		if Validate(m) != nil {
			return
		}
		h, err := RenderHTML(m)
		if err != nil {
			t.Fatalf("Validate accepts %+v, RenderHTML refuses it: %v", m, err)
		}
		back, err := ParseHTML(h)
		if err != nil {
			t.Fatalf("ParseHTML(RenderHTML(%+v)) = ParseHTML(%q): %v", m, h, err)
		}
		want := sorted(m.Entities)
		if a, b := want[0], want[1]; a.Type == b.Type && a.URL == b.URL && (classOf(a.Type) == classFormatting || classOf(a.Type) == classLink) &&
			b.Offset <= a.Offset+a.Length {
			// The same formatting (or link) twice, nested or side by side: ParseHTML makes one span of them
			// (TestParseHTMLMergesIdenticalSpans). Sorted, a starts first and, nested, holds b.
			a.Length = max(a.Length, b.Offset+b.Length-a.Offset)
			want = []Entity{a}
		}
		if back.Text != m.Text || !reflect.DeepEqual(back.Entities, want) {
			t.Fatalf("%+v rendered as %q parses to %+v", m, h, back)
		}
	})
}
