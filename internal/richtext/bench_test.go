package richtext

import (
	"strings"
	"testing"
)

// benchMarkup is a notification of 1–2 KB of markup, as a tenant's template would make it: formatting,
// links with query strings, references, a code block, emoji, non-Latin text.
var benchMarkup = func() string {
	var b strings.Builder
	b.WriteString("<b>Order #1042</b> — <i>confirmed</i> ✅\n\n")
	for i := range 6 {
		b.WriteString(`• <a href="https://shop.example.com/items/1042?ref=mail&amp;utm_source=herald">Item ` + string(rune('A'+i)) + "</a>: ")
		b.WriteString("<u>2 × 19,99 €</u> &amp; <s>24,99 €</s> <tg-spoiler>code SAVE10</tg-spoiler> Привет, 世界 😀\n")
	}
	b.WriteString(`<blockquote expandable>Delivery to <b>Jane Doe</b>, 221B Baker Street, London &lt;NW1&gt;` + "\n")
	b.WriteString("Between <code>10:00</code> and <code>12:00</code>.</blockquote>\n")
	b.WriteString(`<pre><code class="language-json">{"order": 1042, "total": &quot;39,98&quot;}</code></pre>`)
	return b.String()
}()

// BenchmarkParseHTML: the parser alone, on the send path; MB/s of markup.
func BenchmarkParseHTML(b *testing.B) {
	if n := len(benchMarkup); n < 1024 || n > 2048 {
		b.Fatalf("the markup is %d bytes, want 1–2 KB", n)
	}
	b.SetBytes(int64(len(benchMarkup)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHTML(benchMarkup); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeEntities: the store's form of the entities of the benchmark's markup, on the send path
// after the parser (before the compact form, json.Marshal: BenchmarkEntitiesJSON).
func BenchmarkEncodeEntities(b *testing.B) {
	m, err := ParseHTML(benchMarkup)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeEntities(m.Entities); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEntitiesJSON: what the worker does with them (the compact form read back, as JSON).
func BenchmarkEntitiesJSON(b *testing.B) {
	m, err := ParseHTML(benchMarkup)
	if err != nil {
		b.Fatal(err)
	}
	stored, _ := EncodeEntities(m.Entities)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EntitiesJSON(stored); err != nil {
			b.Fatal(err)
		}
	}
}
