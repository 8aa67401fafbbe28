package template_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/richtext"
	"github.com/heraldhq/herald/internal/template"
)

// data decodes JSON as the ingress does (numbers kept as written).
func data(t testing.TB, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func render(t *testing.T, src, js string, html bool) (string, error) {
	t.Helper()
	tpl, err := template.Parse(src)
	if err != nil {
		t.Fatalf("parse %q: %v", src, err)
	}
	return tpl.Render(data(t, js), template.Options{HTML: html, Now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)})
}

func TestRenders(t *testing.T) {
	for _, c := range []struct{ src, data, want string }{
		{`Hi {{ name }}!`, `{"name": "Ana"}`, `Hi Ana!`},
		{`{{ order.id }} {{ order.items[1].sku }} {{ order.items[-1].sku }} {{ order["id"] }}`, `{"order": {"id": 7, "items": [{"sku": "a"}, {"sku": "b"}]}}`, `7 b b 7`},
		{`{{ items.size }} {{ items | size }} {{ items | join: ", " }} {{ items.first }}`, `{"items": ["x", "y"]}`, `2 2 x, y x`},
		{`{{ n | upcase }} {{ n | downcase }} {{ n | capitalize }}`, `{"n": "élan Vital"}`, `ÉLAN VITAL élan vital Élan Vital`},
		{`{{ s | truncate: 8 }}|{{ s | truncate: 5, "" }}`, `{"s": "abcdefghijk"}`, `abcde...|abcde`},
		{`{{ price }} {{ ratio }}`, `{"price": 1234567890123, "ratio": 0.25}`, `1234567890123 0.25`},
		{`{% if a > 2 and b == "x" %}yes{% elsif a == 1 %}one{% else %}no{% endif %}`, `{"a": 3, "b": "x"}`, `yes`},
		{`{% if a > 2 and b == "x" %}yes{% elsif a == 1 %}one{% else %}no{% endif %}`, `{"a": 1, "b": "x"}`, `one`},
		{`{% unless vip %}regular{% else %}vip{% endunless %}`, `{"vip": false}`, `regular`},
		{`{% case status %}{% when "paid", "done" %}ok{% when "late" %}late{% else %}?{% endcase %}`, `{"status": "done"}`, `ok`},
		{`{% for i in items limit: 2 %}{{ forloop.index }}:{{ i }}{% unless forloop.last %},{% endunless %}{% endfor %}`, `{"items": ["a", "b", "c"]}`, `1:a,2:b`},
		{`{% for i in (1..3) reversed %}{{ i }}{% endfor %}{% for i in empty %}x{% else %}none{% endfor %}`, `{"empty": []}`, `321none`},
		{`{% assign who = name | upcase %}{% capture line %}[{{ who }}]{% endcapture %}{{ line }}`, `{"name": "bo"}`, `[BO]`},
		{`{% raw %}{{ not parsed }}{% endraw %}{% comment %}{{ nor this }}{% endcomment %}`, `{}`, `{{ not parsed }}`},
		{"a  {{- x -}}  b\n{%- if true -%}\n c{% endif %}", `{"x": 1}`, `a1bc`},
		{`{{ when | date: "%Y-%m-%d %H:%M %b" }} {{ "now" | date: "%d.%m.%Y" }}`, `{"when": "2026-01-02T03:04:05Z"}`, `2026-01-02 03:04 Jan 04.03.2026`},
		{`{% if tags contains "vip" %}V{% endif %}{% if name contains "na" %}N{% endif %}`, `{"tags": ["vip"], "name": "Ana"}`, `VN`},
		// A closer inside a string literal is the string's: {{ "}}" }} outputs }}.
		{`{{ "a}}b" }}|{{ x | default: '%}' }}|{% if x == "}}" %}eq{% endif %}`, `{"x": "}}"}`, `a}}b|}}|eq`},
	} {
		got, err := render(t, c.src, c.data, false)
		if err != nil || got != c.want {
			t.Errorf("%s with %s: %q %v, want %q", c.src, c.data, got, err, c.want)
		}
	}
}

// The anchors' first failure: only the first missing variable reported. Every missing path is, at once,
// as the template wrote it, each once.
func TestEveryMissingPathAtOnce(t *testing.T) {
	_, err := render(t, `{{ user.name }} {{ order.id }} {{ order.items[0].sku }} {{ user.name }} {{ total | upcase }}{% for x in lines %}{% endfor %}`,
		`{"order": {"items": []}}`, false)
	var m *template.MissingError
	if !errors.As(err, &m) {
		t.Fatalf("err = %v, want a MissingError", err)
	}
	want := []string{"user.name", "order.id", "order.items[0].sku", "total", "lines"}
	if !slices.Equal(m.Paths, want) {
		t.Fatalf("missing %q, want %q", m.Paths, want)
	}
}

// null is given: it renders empty, is false in a test, and a step into it is null too; an absent value in
// a test is false, not an error; default covers absent and null; data nobody uses is ignored.
func TestNullIsGivenAndIfDefaultAreNotErrors(t *testing.T) {
	for _, c := range []struct{ src, data, want string }{
		{`[{{ coupon }}]`, `{"coupon": null}`, `[]`},
		{`[{{ coupon.code }}]`, `{"coupon": null}`, `[]`},
		{`{% if coupon %}has{% else %}none{% endif %}`, `{"coupon": null}`, `none`},
		{`{% if coupon %}has{% else %}none{% endif %}{% if coupon.code == "x" %}!{% endif %}`, `{}`, `none`},
		{`{{ nick | default: "friend" }} {{ gone | default: "friend" }} {{ empty | default: "friend" }}`, `{"nick": null, "empty": "", "unused": {"deep": 1}}`, `friend friend friend`},
		{`{{ zero | default: 5 }}`, `{"zero": 0}`, `0`},
	} {
		got, err := render(t, c.src, c.data, false)
		if err != nil || got != c.want {
			t.Errorf("%s with %s: %q %v, want %q", c.src, c.data, got, err, c.want)
		}
	}
}

// No "[object Object]", no map[...] and no raw key: an object or array in an output is refused, naming it.
func TestObjectsInOutputsAreRefused(t *testing.T) {
	for src, name := range map[string]string{`{{ order }}`: "order", `{{ order.items }}`: "order.items", `{{ order | upcase }}`: "filter upcase"} {
		_, err := render(t, src, `{"order": {"items": [1, 2]}}`, false)
		var r *template.RenderError
		if !errors.As(err, &r) || !strings.Contains(r.Msg, name) {
			t.Errorf("%s: %v, want a RenderError naming %s", src, err, name)
		}
	}
}

func TestSyntaxErrorsNameLineAndColumn(t *testing.T) {
	for _, c := range []struct {
		src       string
		line, col int
		says      string
	}{
		{"Hello\n  {{ name | nope }}", 2, 13, "unknown filter"},
		{"Hi {{ name", 1, 4, "not closed"},
		{"a\nb {% if x %}\nno end", 3, 7, "endif"},
		{"ünïcode {% frobnicate %}", 1, 12, "unknown tag"},
		{`{% include "secrets.liquid" %}`, 1, 4, "not available"},
		{`{% render "x" %}`, 1, 4, "not available"},
		{`{% layout "x" %}`, 1, 4, "not available"},
		{`{{ a.b.[0] }}`, 1, 8, "a name must follow"},
		{`{% endif %}`, 1, 4, "unexpected"},
	} {
		_, err := template.Parse(c.src)
		var s *template.SyntaxError
		if !errors.As(err, &s) || s.Line != c.line || s.Column != c.col || !strings.Contains(s.Msg, c.says) {
			t.Errorf("%q: %v, want line %d column %d saying %q", c.src, err, c.line, c.col, c.says)
		}
	}
}

// In an html template every output is escaped (data never adds markup) and the template's own tags are
// the markup: the result passes the §10 parser with the data as text.
func TestHTMLOutputsAreEscapedAndParse(t *testing.T) {
	got, err := render(t, `<b>Order {{ id }}</b> for {{ name }} {{ name | escape }}`, `{"id": "<7>", "name": "Tom & \"Jerry\" <i>"}`, true)
	want := `<b>Order &lt;7&gt;</b> for Tom &amp; &quot;Jerry&quot; &lt;i&gt; Tom &amp; &quot;Jerry&quot; &lt;i&gt;`
	if err != nil || got != want {
		t.Fatalf("got %q %v\nwant %q", got, err, want)
	}
	m, err := richtext.ParseHTML(got)
	if err != nil || !strings.Contains(m.Text, `Tom & "Jerry" <i>`) || len(m.Entities) != 1 {
		t.Fatalf("parsed: %+v %v", m, err)
	}
	// A text template inserts data as it is.
	if got, _ := render(t, `{{ name }}`, `{"name": "<i>"}`, false); got != "<i>" {
		t.Fatalf("text template: %q", got)
	}
}

func TestBoundsOfARender(t *testing.T) {
	// Output: 64 KiB at most.
	_, err := render(t, `{% for i in (1..100) %}{{ big }}{% endfor %}`, `{"big": "`+strings.Repeat("x", 1000)+`"}`, false)
	var r *template.RenderError
	if !errors.As(err, &r) || !strings.Contains(r.Msg, "64 KiB") {
		t.Fatalf("large output: %v", err)
	}
	// Time: 10 ms, also for loops that write nothing.
	start := time.Now()
	_, err = render(t, `{% for a in (1..99999) %}{% for b in (1..99999) %}{% endfor %}{% endfor %}`, `{}`, false)
	if !errors.As(err, &r) || !strings.Contains(r.Msg, "10ms") {
		t.Fatalf("long render: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the long render took %s", d)
	}
	// A capture that doubles itself is bounded too.
	_, err = render(t, `{% assign s = "0123456789" %}{% for i in (1..30) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}{{ s }}`, `{}`, false)
	if !errors.As(err, &r) {
		t.Fatalf("doubling capture: %v", err)
	}
}

// pt-br, pt_BR and PT-BR are one locale; a candidate falls back to its primary language; the chain's
// first match wins; the default closes it.
func TestLocaleChoice(t *testing.T) {
	set, err := template.Compile(false, "en", map[string]template.LocaleSource{
		"en": {Message: "Hi"}, "pt-br": {Message: "Oi"}, "de": {Message: "Hallo"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		candidates []string
		want       string
	}{
		{[]string{"pt_BR"}, "pt-br"},
		{[]string{"PT-BR"}, "pt-br"},
		{[]string{"de-AT"}, "de"},
		{[]string{"fr", "", "de"}, "de"},
		{[]string{"pt"}, "en"}, // a primary language does not widen to a region the template has
		{[]string{"fr", "ja"}, "en"},
		{nil, "en"},
	} {
		if got := set.Choose(c.candidates...); got != c.want {
			t.Errorf("Choose(%q) = %q, want %q", c.candidates, got, c.want)
		}
	}
	out, err := set.Render("PT_br", nil, template.Options{})
	if err != nil || out.Message != "Oi" || out.Locale != "pt-br" {
		t.Fatalf("render pt-br: %+v %v", out, err)
	}
}

// A set's syntax error names the locale and the field; the missing paths of the message and the buttons
// are reported together.
func TestSetErrorsAndButtons(t *testing.T) {
	_, err := template.Compile(false, "en", map[string]template.LocaleSource{
		"en": {Message: "ok"}, "pt-br": {Message: "Oi", Buttons: [][]template.ButtonSource{{{Text: "Ver", URL: "https://x.example/{{ id "}}}},
	})
	var inv *template.InvalidError
	if !errors.As(err, &inv) || inv.Locale != "pt-br" || !strings.Contains(err.Error(), `locale "pt-br", the url of button 0 of row 0: line 1, column 19`) {
		t.Fatalf("err = %v", err)
	}
	set, err := template.Compile(true, "en", map[string]template.LocaleSource{
		"en": {Message: "<b>{{ title }}</b>", Buttons: [][]template.ButtonSource{{{Text: "Open {{ id }}", URL: "https://x.example/o/{{ id }}?a=1&b={{ ref }}"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = set.Render("en", data(t, `{"id": "A&1"}`), template.Options{})
	var m *template.MissingError
	if !errors.As(err, &m) || !slices.Equal(m.Paths, []string{"title", "ref"}) {
		t.Fatalf("missing: %v", err)
	}
	out, err := set.Render("en", data(t, `{"id": "A&1", "title": "T", "ref": "r"}`), template.Options{})
	if err != nil || out.Message != "<b>T</b>" || out.Buttons[0][0] != (template.Button{Text: "Open A&1", URL: "https://x.example/o/A&1?a=1&b=r"}) {
		t.Fatalf("render: %+v %v", out, err)
	}
}

// benchmarkSource is a ~1 KB html template with 10 outputs and a loop, as issue 36's measure asks.
var benchmarkSource = `<b>Order {{ order.id }}</b> is on its way, {{ customer.first_name | capitalize }}!
Shipped {{ order.shipped_at | date: "%d %b %Y" }} by {{ carrier.name }}; tracking <code>{{ carrier.tracking }}</code>.
{% for item in order.items limit: 5 %}• {{ item.quantity }} × {{ item.name | truncate: 40 }} — {{ item.price }} {{ order.currency }}
{% endfor %}{% if order.items.size > 5 %}…and {{ order.items.size | minus_five }} more{% endif %}
Total: <b>{{ order.total }} {{ order.currency }}</b>. Delivery to {{ address.city }} expected {{ order.eta | default: "soon" }}.
<i>Questions? Reply to this chat or write to {{ support.email }}.</i> We are glad you shop with us and we hope everything
arrives in good order; if anything is missing or damaged, tell us within fourteen days and we will put it right at once,
free of charge. Thank you for your order, and see you soon at our shop. Your friends at the shop.`

func benchmarkSet(b testing.TB) (*template.Set, map[string]any) {
	src := strings.Replace(benchmarkSource, " | minus_five", "", 1)
	set, err := template.Compile(true, "en", map[string]template.LocaleSource{"en": {Message: src}})
	if err != nil {
		b.Fatal(err)
	}
	return set, data(b, `{"order": {"id": "A-1001", "shipped_at": "2026-03-01T10:00:00Z", "currency": "EUR", "total": "129.90",
		"eta": null, "items": [{"quantity": 1, "name": "Kettle <steel>", "price": "49.90"}, {"quantity": 2, "name": "Mug & saucer", "price": "40.00"}]},
		"customer": {"first_name": "ana"}, "carrier": {"name": "DHL", "tracking": "JD0123"}, "address": {"city": "Porto"},
		"support": {"email": "help@shop.example"}}`)
}

func BenchmarkRender(b *testing.B) {
	set, d := benchmarkSet(b)
	out, err := set.Render("en", d, template.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := richtext.ParseHTML(out.Message); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(out.Message)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := set.Render("en", d, template.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// What the render's reuse of its buffers and stacks must not change (render.go, set.go): loop variables
// hide assigned ones and go with their loop, forloop hides a loop variable of its name, assign in a loop
// outlives it, nested loops each see their own item, and the filters that now skip a copy give what they
// gave — also for text that is not valid UTF-8 (which []rune and string made U+FFFD).
func TestRenderScopesAndFilters(t *testing.T) {
	for _, c := range []struct{ src, data, want string }{
		{`{% assign x = "a" %}{% for x in xs %}{{ x }}{% endfor %}{{ x }}`, `{"xs": [1, 2]}`, `12a`},
		{`{% for x in xs %}{% assign last = x %}{% endfor %}{{ last }}`, `{"xs": [1, 2]}`, `2`},
		{`{% for forloop in xs %}{{ forloop.index }}{% endfor %}`, `{"xs": ["p", "q"]}`, `12`},
		{`{% for a in as %}{% for b in bs %}{{ a }}{{ b }}{{ forloop.index }},{% endfor %}{{ forloop.index }}{{ a }};{% endfor %}`, `{"as": ["x", "y"], "bs": [1, 2]}`, `x11,x22,1x;y11,y22,2y;`},
		{`{% for a in as %}{% for a in bs %}{{ a }}{% endfor %}{{ a }}{% endfor %}{{ a | default: "-" }}`, `{"as": ["x"], "bs": [1, 2]}`, `12x-`},
		{`{% for p in m %}{{ p[0] }}={{ p[1] }};{% endfor %}`, `{"m": {"b": 2, "a": 1}}`, `a=1;b=2;`},
		{`{% capture c %}{% for x in xs %}[{{ x }}]{% endfor %}{% endcapture %}{{ c }}{{ c | size }}`, `{"xs": [1, 2]}`, `[1][2]6`},
		{`{{ xs.size }} {{ s.size }} {{ xs | size }} {{ big.size }}`, `{"xs": [1, 2, 3], "s": "héé", "big": []}`, `3 3 3 0`},
		{`{{ s | truncate: 5 }}|{{ s | truncate: 3, "…" }}|{{ s | truncate: 20 }}|{{ s | truncate: -1 }}|{{ n | truncate: 2, "" }}`, `{"s": "héllo wörld", "n": 12345}`, `hé...|hé…|héllo wörld|...|12`},
		{"{{ s | truncate: 3, \"\" }}|{{ s | truncate: 9 }}|{{ s | capitalize }}", "{\"s\": \"a\xffbc\"}", "a\uFFFDb|a\uFFFDbc|A\uFFFDbc"},
		{"{{ s | capitalize }}|{{ t | capitalize }}|{{ u | capitalize }}|{{ n | capitalize }}", "{\"s\": \"\xffx\", \"t\": \"Ana\", \"u\": \"\uFFFDx\", \"n\": 7}", "\uFFFDx|Ana|\uFFFDx|7"},
		{`{{ s | upcase }}|{{ s | downcase }}|{{ u | upcase }}|{{ n | upcase }}`, `{"s": "ab", "u": "AB", "n": 1.5}`, `AB|ab|AB|1.5`},
	} {
		got, err := render(t, c.src, c.data, false)
		if err != nil || got != c.want {
			t.Errorf("%s with %s: %q %v, want %q", c.src, c.data, got, err, c.want)
		}
	}
}

// The html escape written straight into the output counts against the 64 KiB bound as the escaped text
// would: an output that fits escaped passes, one byte more does not.
func TestEscapedOutputBound(t *testing.T) {
	fill := func(n int) string { return `{"s": "` + strings.Repeat("&", n/5) + strings.Repeat("x", n%5) + `"}` }
	got, err := render(t, `{{ s }}`, fill(template.MaxRenderOutput), true)
	if err != nil || len(got) != template.MaxRenderOutput || !strings.HasPrefix(got, "&amp;&amp;") {
		t.Fatalf("64 KiB escaped: %d bytes, %v", len(got), err)
	}
	var r *template.RenderError
	if _, err := render(t, `{{ s }}x`, fill(template.MaxRenderOutput), true); !errors.As(err, &r) {
		t.Fatalf("64 KiB + 1: %v", err)
	}
	if got, err := render(t, `a{{ s }}b{{ s }}`, `{"s": "<\"&>"}`, true); err != nil || got != `a&lt;&quot;&amp;&gt;b&lt;&quot;&amp;&gt;` {
		t.Fatalf("escaped: %q %v", got, err)
	}
}

// Renders share nothing, whatever the reuse: the missing paths of one render stay its own after others,
// and concurrent renders of one set give each its own output (run with -race).
func TestRendersShareNothing(t *testing.T) {
	set, err := template.Compile(true, "en", map[string]template.LocaleSource{"en": {Message: `{% for x in xs %}{{ x }}{% endfor %}{{ a }}{{ b }}`}})
	if err != nil {
		t.Fatal(err)
	}
	_, err1 := set.Render("en", data(t, `{"xs": [1]}`), template.Options{})
	_, err2 := set.Render("en", data(t, `{"xs": [2], "a": 1}`), template.Options{})
	var m1, m2 *template.MissingError
	if !errors.As(err1, &m1) || !errors.As(err2, &m2) || !slices.Equal(m1.Paths, []string{"a", "b"}) || !slices.Equal(m2.Paths, []string{"b"}) {
		t.Fatalf("missing: %v, then %v", err1, err2)
	}
	done := make(chan error)
	for g := range 4 {
		go func() {
			for i := range 200 {
				want := strings.Repeat("&lt;", g) + strconv.Itoa(i) + "-" + strconv.Itoa(g)
				d := map[string]any{"xs": []any{strings.Repeat("<", g), json.Number(strconv.Itoa(i))}, "a": "-", "b": json.Number(strconv.Itoa(g))}
				out, err := set.Render("en", d, template.Options{})
				if err != nil || out.Message != want {
					done <- fmt.Errorf("render %d of %d: %q %v, want %q", i, g, out.Message, err, want)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// toObjects is v with every map an *Object, its members in reverse key order (a render must not care).
func toObjects(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		slices.Reverse(keys)
		o := &template.Object{}
		for _, k := range keys {
			o.Members = append(o.Members, template.Member{Key: k, Value: toObjects(x[k])})
		}
		return o
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = toObjects(e)
		}
		return a
	}
	return v
}

// An Object renders as the map it stands for (the ingress decodes a send's data into Objects): every
// output, loop, test, filter and error alike, in text and html.
func TestObjectsRenderAsMaps(t *testing.T) {
	cases := []struct{ src, data string }{
		{`{{ order.id }} {{ order.items[1].sku }} {{ order.items[-1].sku }} {{ order["id"] }} {{ order.items.size }} {{ order | size }}`, `{"order": {"id": 7, "items": [{"sku": "a"}, {"sku": "b"}]}}`},
		{`{% for p in m %}{{ p[0] }}={{ p[1] }};{{ forloop.index }}{% endfor %}{% for p in m reversed limit: 1 %}{{ p[0] }}{% endfor %}`, `{"m": {"b": 2, "a": 1, "c": {"d": 1}}}`},
		{`{% if m contains "a" %}A{% endif %}{% if m contains "z" %}Z{% endif %}{% if m contains 1 %}1{% endif %}`, `{"m": {"a": null}}`},
		{`{% if a == b %}eq{% else %}ne{% endif %}`, `{"a": {"x": 1, "y": [1, {"z": "s"}]}, "b": {"y": [1, {"z": "s"}], "x": 1}}`},
		{`{% if a == b %}eq{% else %}ne{% endif %}`, `{"a": {"x": 1, "y": [1, {"z": "s"}]}, "b": {"y": [1, {"z": "t"}], "x": 1}}`},
		{`{% if a == b %}eq{% else %}ne{% endif %}`, `{"a": {"x": 1}, "b": {"x": 1, "y": 2}}`},
		{`{% if a == b %}eq{% else %}ne{% endif %}{% if a != c %}!{% endif %}{% if l contains a %}in{% endif %}`, `{"a": {}, "b": {}, "c": [], "l": [1, {}]}`},
		{`{% case a %}{% when b %}b{% else %}-{% endcase %}`, `{"a": {"k": "v"}, "b": {"k": "v"}}`},
		{`{{ o }}`, `{"o": {"a": 1}}`},
		{`{{ o | upcase }}`, `{"o": {"a": 1}}`},
		{`{{ l | join: "," }}`, `{"l": [1, {"a": 1}]}`},
		{`{{ o | append: "!" }}|{{ l | prepend: "<" }}|{{ o | replace: "a", "b" }}`, `{"o": {"b": 2, "a": [1, {"c": "x"}]}, "l": [{"a": 1}, 2]}`},
		{`{{ o.missing }} {{ o.a.b }} {{ o.a.size }}{% for x in o.nope %}{% endfor %}`, `{"o": {"a": "text"}}`},
		{`{{ o | default: "d" }} {{ o.n | default: "n" }} {{ o.e | default: "e" }}`, `{"o": {"n": null, "e": ""}}`},
		{`{{ o.k | date: "%Y" }}|{{ o | date: "%Y" }}`, `{"o": {"k": "2026-01-02T00:00:00Z"}}`},
		{`{% assign c = o %}{{ c.k }}{% for x in o.l %}{% assign d = x %}{% endfor %}{{ d.z }}`, `{"o": {"k": "v", "l": [{"z": 1}, {"z": 2}]}}`},
		{`{{ o.l.first.z }} {{ o.l.last.z }} {{ o.l | first | size }}`, `{"o": {"l": [{"z": 1, "y": 0}, {"z": 2}]}}`},
	}
	rendered := 0
	for _, html := range []bool{false, true} {
		for _, c := range cases {
			tpl, err := template.Parse(c.src)
			if err != nil {
				t.Fatalf("parse %q: %v", c.src, err)
			}
			opts := template.Options{HTML: html, Now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
			asMaps := data(t, c.data)
			want, wantErr := tpl.Render(asMaps, opts)
			got, err := tpl.Render(toObjects(asMaps), opts)
			if got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("%s with %s (html %v): %q %v, with maps %q %v", c.src, c.data, html, got, err, want, wantErr)
			}
			if err == nil {
				rendered++
			}
		}
	}
	if rendered < 2*10 {
		t.Errorf("only %d of the renders succeeded: the cases no longer test outputs", rendered)
	}
	// An Object of data given as an Object, through a Set; ToMaps gives back the maps.
	set, err := template.Compile(false, "en", map[string]template.LocaleSource{"en": {Message: `{{ a.b }}`}})
	if err != nil {
		t.Fatal(err)
	}
	d := data(t, `{"a": {"b": "x", "c": [{"d": 1}]}}`)
	if out, err := set.Render("en", toObjects(d), template.Options{}); err != nil || out.Message != "x" {
		t.Fatalf("set: %+v %v", out, err)
	}
	if back := template.ToMaps(toObjects(d)); !reflect.DeepEqual(back, d) {
		t.Fatalf("ToMaps: %#v", back)
	}
}
