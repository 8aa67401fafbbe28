package ingress_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/richtext"
	"github.com/heraldhq/herald/internal/testing/openapitest"
)

// richRow is what the store keeps of a send's rich options.
type richRow struct {
	Body                  string
	Format                *string
	Entities, Markup      *string
	Silent, Protect, Prev *bool
}

func (e *env) richRow(id string) richRow {
	e.t.Helper()
	row := e.fx.NotificationRow(e.t, id)
	return richRow{row.Body, row.Format, row.Entities, row.Markup, row.Silent, row.Protect, row.LinkPreview}
}

func accepted(t *testing.T, r response) string {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d %s, want 202", r.status, r.body)
	}
	return r.json(t)["tracking_id"].(string)
}

func entitiesOf(t *testing.T, raw *string) []richtext.Entity {
	t.Helper()
	if raw == nil {
		return nil
	}
	if strings.HasPrefix(*raw, "[") {
		t.Errorf("entities stored as JSON (%s), want the compact form", *raw)
	}
	out, err := richtext.DecodeEntities(*raw)
	if err != nil {
		t.Fatalf("entities %s: %v", *raw, err)
	}
	return out
}

// What was validated is what is stored: the branded visible text, the entities shifted past the plain
// brand line (UTF-16 units: an astral character before an entity counts two), the buttons as the inline
// keyboard the platform takes, and the flags; a plain send stores none of them, and its body is as before.
func TestRichSendStoresTextEntitiesButtonsAndFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr("Acme Shop"))
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)

	id := accepted(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html",
		"message": "𝄞 <b>Order &lt;#1042&gt;</b> <a href=\"https://shop.example/o?id=1&amp;x=2\">open</a>",
		"buttons": [][]map[string]string{{{"text": "Track", "url": "https://shop.example/t"}}, {{"text": "Bot", "url": "tg://resolve?domain=acme"}}},
		"silent":  true, "protect_content": true, "link_preview": false}))
	r := e.richRow(id)
	if want := "A message from Acme Shop\n𝄞 Order <#1042> open"; r.Body != want {
		t.Errorf("body %q, want %q", r.Body, want)
	}
	shift := richtext.UTF16Len("A message from Acme Shop\n")
	want := []richtext.Entity{{Type: "bold", Offset: shift + 3, Length: 13}, {Type: "text_link", Offset: shift + 17, Length: 4, URL: "https://shop.example/o?id=1&x=2"}}
	if got := entitiesOf(t, r.Entities); !equalJSON(got, want) {
		t.Errorf("entities %v, want %v", got, want)
	}
	wantKB := `{"inline_keyboard": [[{"url": "https://shop.example/t", "text": "Track"}], [{"url": "tg://resolve?domain=acme", "text": "Bot"}]]}`
	if r.Markup == nil || *r.Markup != wantKB {
		t.Errorf("reply_markup %v, want %s", r.Markup, wantKB)
	}
	if r.Format == nil || *r.Format != "html" || r.Silent == nil || !*r.Silent || r.Protect == nil || !*r.Protect || r.Prev == nil || *r.Prev {
		t.Errorf("format %v silent %v protect_content %v link_preview %v, want html true true false", r.Format, r.Silent, r.Protect, r.Prev)
	}

	plain := accepted(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "<b>as is</b>"}))
	p := e.richRow(plain)
	if p.Body != "A message from Acme Shop\n<b>as is</b>" || p.Format != nil || p.Entities != nil || p.Markup != nil || p.Silent != nil || p.Protect != nil || p.Prev != nil {
		t.Errorf("a plain send stored %+v, want its literal body and no rich option", p)
	}
	// Markup without a tag is html all the same (its references decoded), with no entities.
	bare := accepted(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html", "message": "a &amp; b"}))
	if b := e.richRow(bare); b.Body != "A message from Acme Shop\na & b" || b.Entities != nil || b.Format == nil {
		t.Errorf("tagless markup stored %+v, want the decoded text, format html, no entities", b)
	}
	for id, format := range map[string]string{id: "html", plain: "text"} {
		if got := e.do("GET", "/v1/status/"+id, key, nil).json(t)["format"]; got != format {
			t.Errorf("status of %s: format %v, want %s", id, got, format)
		}
	}
	list := e.do("GET", "/v1/notifications?limit=3", key, nil).json(t)["data"].([]any)
	formats := map[string]int{}
	for _, n := range list {
		formats[n.(map[string]any)["format"].(string)]++
	}
	if formats["html"] != 2 || formats["text"] != 1 {
		t.Errorf("list formats %v, want 2 html and 1 text", formats)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Markup outside the subset is 400 invalid_format naming the offset in characters (an astral character
// before it counts one), for a send and for a batch item (which alone is refused, in its place); nothing of
// it is stored.
func TestInvalidMarkupIsInvalidFormatNamingTheOffset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	cases := []struct{ markup, offset string }{
		{"hi <br> there", "at offset 3 "},
		{"😀😀 <b>bold", "at offset 3 "},      // never closed: where it opened
		{"<b><i>x</b></i>", "at offset 7 "}, // badly nested
		{"a < b", "at offset 2 "},           // a bare <
		{`<a href="javascript:alert(1)">x</a>`, "at offset "},
		{`<b class="x">x</b>`, "at offset "},        // an attribute b does not take
		{"</b>A message from Evil", "at offset 0 "}, // closes nothing: cannot reach the brand line
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html", "message": c.markup})
		expectError(t, r, http.StatusBadRequest, "invalid_format")
		if msg := r.json(t)["message"].(string); !strings.Contains(msg, c.offset) {
			t.Errorf("%q: message %q, want it to name the offset (%q)", c.markup, msg, c.offset)
		}
	}
	r := e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []any{
		map[string]any{"user_id": "u1", "format": "html", "message": "<b>fine</b>"},
		map[string]any{"user_id": "u1", "format": "html", "message": "ok <u>then <i>broken</u>"},
	}})
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	results := r.json(t)["results"].([]any)
	second := results[1].(map[string]any)
	if results[0].(map[string]any)["status"] != "queued" || second["error"] != "invalid_format" ||
		!strings.Contains(second["message"].(string), "at offset 20 ") {
		t.Errorf("batch results %s, want the first queued and the second invalid_format at offset 20 (its </u>)", r.body)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 1 {
		t.Errorf("%d notifications stored, want only the batch's valid item", n)
	}
}

// The platform refuses a message of more than 100 entities ("entities too long", long after a 202): the
// door refuses it with 400 invalid_format naming the tag of the 101st, in a send and in a batch item. The
// same formatting nested, or side by side, is one entity: 9,000 nested <b> are accepted, and stored as one
// bold span (issue 35).
func TestMarkupPastThePlatformsEntityLimitIsInvalidFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	tooMany := strings.Repeat("<b>x</b> ", richtext.MaxEntities+1)
	r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html", "message": tooMany})
	expectError(t, r, http.StatusBadRequest, "invalid_format")
	if msg := r.json(t)["message"].(string); !strings.Contains(msg, "at offset 900 ") || !strings.Contains(msg, "100 entities") {
		t.Errorf("message %q, want it to name the 101st tag (offset 900) and the limit of 100 entities", msg)
	}
	r = e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []any{
		map[string]any{"user_id": "u1", "format": "html", "message": strings.Repeat("<b>x</b> ", richtext.MaxEntities)},
		map[string]any{"user_id": "u1", "format": "html", "message": tooMany},
	}})
	if r.status != http.StatusOK {
		t.Fatalf("batch: %d %s", r.status, r.body)
	}
	results := r.json(t)["results"].([]any)
	if results[0].(map[string]any)["status"] != "queued" || results[1].(map[string]any)["error"] != "invalid_format" {
		t.Errorf("batch results %s, want 100 spans queued and 101 invalid_format", r.body)
	}

	deep := strings.Repeat("<b>", 9000) + "deep" + strings.Repeat("</b>", 9000)
	var body bytes.Buffer // not json.Marshal, which writes each < and > as six bytes: it must fit the body's 64 KiB
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"user_id": "u1", "format": "html", "message": deep})
	id := accepted(t, e.do("POST", "/v1/send", key, body.Bytes()))
	shift := richtext.UTF16Len("A message from Acme\n")
	if got, want := entitiesOf(t, e.richRow(id).Entities), []richtext.Entity{{Type: "bold", Offset: shift, Length: 4}}; !equalJSON(got, want) {
		t.Errorf("9,000 nested <b> stored as %d entities (first %v), want one: %v", len(got), got[:min(len(got), 3)], want)
	}
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 2 {
		t.Errorf("%d notifications stored, want the batch's valid item and the nested one", n)
	}
}

// The length rules count the visible text in code points, as the platform does: markup longer than 4096
// characters is fine when its text is not; 4096 astral characters (8192 UTF-16 units) are within the
// limit before branding and past it after; 4097 are too many before.
func TestHTMLLengthRulesCountTheVisibleText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr("Acme"))
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	brandLen := len([]rune("A message from Acme\n"))
	send := func(markup string) response {
		// Not json.Marshal, which writes each < and > as six bytes: the markup must fit the body's 64 KiB.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]any{"user_id": "u1", "format": "html", "message": markup})
		return e.do("POST", "/v1/send", key, b.Bytes())
	}
	// Fits exactly: brand + visible text = 4096 code points, written with far more markup than that.
	fits := strings.Repeat("<b>😀</b>", 4096-brandLen)
	id := accepted(t, send(fits))
	r := e.richRow(id)
	if n := len([]rune(r.Body)); n != 4096 {
		t.Errorf("stored body is %d code points, want 4096", n)
	}
	// The bold spans side by side are one entity (TestMarkupPastThePlatformsEntityLimitIsInvalidFormat), of 2
	// UTF-16 units per astral character.
	if ents := entitiesOf(t, r.Entities); len(ents) != 1 || ents[0].Length != 2*(4096-brandLen) {
		t.Errorf("%d entities, first %+v; want one of 2 UTF-16 units per astral character", len(ents), ents[:min(len(ents), 1)])
	}
	over := send(fits + "<i>😀</i>")
	expectError(t, over, http.StatusBadRequest, "message_too_long_after_branding")
	// It says the usable length: what the caller can act on.
	if msg, want := over.json(t)["message"].(string), fmt.Sprintf("at most %d characters (this one has %d)", 4096-brandLen, 4096-brandLen+1); !strings.Contains(msg, want) {
		t.Errorf("message %q, want it to say %q", msg, want)
	}
	expectError(t, send("<b>"+strings.Repeat("😀", 4096)+"</b>"), http.StatusBadRequest, "message_too_long_after_branding")
	r4097 := send("<b>" + strings.Repeat("😀", 4097) + "</b>")
	expectError(t, r4097, http.StatusBadRequest, "invalid_request")
	if msg := r4097.json(t)["message"].(string); !strings.Contains(msg, "visible text") || !strings.Contains(msg, "4097") {
		t.Errorf("message %q, want it to say the visible text is 4097 characters", msg)
	}
	expectError(t, send("<b></b>"), http.StatusBadRequest, "invalid_request")     // no visible text
	expectError(t, send("<b>  </b>\n"), http.StatusBadRequest, "invalid_request") // blank
	// The same characters as plain text keep today's rule on the message itself.
	expectError(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": strings.Repeat("<b>x</b>", 600)}),
		http.StatusBadRequest, "invalid_request")
}

// The brand line is plain text before the markup, whatever the key's label or the markup hold: no entity
// starts or reaches into it, a label with tags is shown literally, and markup that tries to close or
// restyle what precedes it is refused.
func TestBrandLineCannotBeAlteredByMarkup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.tenant("acme", "Acme", ptr(`<b>Acme</b> & "Co"`))
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	line := "A message from <b>Acme</b> & \"Co\"\n"
	id := accepted(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html",
		"message": "<b>\n</b><s>x</s><blockquote expandable>quoted</blockquote>"}))
	r := e.richRow(id)
	if !strings.HasPrefix(r.Body, line) {
		t.Fatalf("body %q, want it to start with the literal brand line %q", r.Body, line)
	}
	for _, ent := range entitiesOf(t, r.Entities) {
		if ent.Offset < richtext.UTF16Len(line) {
			t.Errorf("entity %+v reaches into the brand line (%d UTF-16 units)", ent, richtext.UTF16Len(line))
		}
	}
	for _, markup := range []string{"</b>hi", "</a>hi", "</blockquote>hi", "hi</b>"} {
		expectError(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "format": "html", "message": markup}),
			http.StatusBadRequest, "invalid_format")
	}
}

// Each option's rules: a wrong type or value is 400 invalid_request saying what is wrong; nothing stored.
func TestRichOptionsAreValidated(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	button := func(text, url string) map[string]any { return map[string]any{"text": text, "url": url} }
	row := func(n int) []any {
		var r []any
		for range n {
			r = append(r, button("b", "https://a.example"))
		}
		return r
	}
	rows := func(n int) []any {
		var r []any
		for range n {
			r = append(r, row(1))
		}
		return r
	}
	cases := []struct {
		name  string
		field string
		value any
		says  string
	}{
		{"format markdown", "format", "markdown", "format"},
		{"format a number", "format", 1, "format"},
		{"silent a string", "silent", "yes", "silent"},
		{"protect_content a number", "protect_content", 1, "protect_content"},
		{"link_preview a string", "link_preview", "false", "link_preview"},
		{"buttons an object", "buttons", map[string]any{}, "buttons"},
		{"buttons a flat array", "buttons", []any{button("a", "https://a.example")}, "buttons"},
		{"nine rows", "buttons", rows(9), "at most 8 rows"},
		{"five in a row", "buttons", []any{row(5)}, "1-4 buttons"},
		{"an empty row", "buttons", []any{[]any{}}, "1-4 buttons"},
		{"an empty text", "buttons", []any{[]any{button("", "https://a.example")}}, "1-64"},
		// Positions counted from 1, as a person counts: the second button of the first row.
		{"a bad second button", "buttons", []any{[]any{button("a", "https://a.example"), button("", "https://a.example")}}, "button 2 of row 1 "},
		{"a blank text", "buttons", []any{[]any{button("  ", "https://a.example")}}, "1-64"},
		{"65 characters", "buttons", []any{[]any{button(strings.Repeat("é", 65), "https://a.example")}}, "1-64"},
		{"a NUL in the text", "buttons", []any{[]any{button("a\x00", "https://a.example")}}, "NUL"},
		{"an http url", "buttons", []any{[]any{button("a", "http://a.example")}}, "https: or tg:"},
		{"a javascript url", "buttons", []any{[]any{button("a", "javascript:alert(1)")}}, "https: or tg:"},
		{"a url without a host", "buttons", []any{[]any{button("a", "https://")}}, "host"},
		{"a url with user info", "buttons", []any{[]any{button("a", "https://me@a.example")}}, "user"},
		{"a url of 1025 characters", "buttons", []any{[]any{button("a", "https://a.example/"+strings.Repeat("x", 1025-18))}}, "1024"},
		{"a callback button", "buttons", []any{[]any{map[string]any{"text": "a", "callback_data": "x"}}}, "callback_data"},
		{"a button without url", "buttons", []any{[]any{map[string]any{"text": "a"}}}, "text"},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", c.field: c.value})
		expectError(t, r, http.StatusBadRequest, "invalid_request")
		if msg := r.json(t)["message"].(string); !strings.Contains(msg, c.says) {
			t.Errorf("%s: message %q, want it to mention %q", c.name, msg, c.says)
		}
	}
	// The limits themselves are fine: 8 rows of 4, 64 characters, 1024 for the url, nulls for defaults.
	full := []any{}
	for range 8 {
		full = append(full, []any{button(strings.Repeat("é", 64), "https://a.example/"+strings.Repeat("x", 1024-18)), button("b", "tg:resolve?domain=x"),
			button("c", "HTTPS://a.example"), button("d", "tg://resolve?domain=x")})
	}
	accepted(t, e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "buttons": full,
		"format": nil, "silent": nil, "protect_content": nil, "link_preview": nil}))
	if n := e.countRows(`SELECT count(*) FROM notifications`); n != 1 {
		t.Errorf("%d notifications stored, want only the valid one", n)
	}
}

// The rich options join the Idempotency-Key's meaning only when given: a repeat without them replays
// (keys recorded before they existed still match), the same options written otherwise replay, and other
// options are a conflict.
func TestIdempotencyKeyMeaningOfRichOptions(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	send := func(k string, body map[string]any) response {
		body["user_id"] = "u1"
		return e.do("POST", "/v1/send", key, body, "Idempotency-Key", k)
	}
	first := accepted(t, send("plain", map[string]any{"message": "hi"}))
	if again := accepted(t, send("plain", map[string]any{"message": "hi"})); again != first {
		t.Errorf("a plain repeat got %s, want the first answer %s", again, first)
	}
	expectError(t, send("plain", map[string]any{"message": "hi", "silent": true}), http.StatusConflict, "idempotency_conflict")
	expectError(t, send("plain", map[string]any{"message": "hi", "format": "html"}), http.StatusConflict, "idempotency_conflict")

	kb := func(url string) []any { return []any{[]any{map[string]any{"text": "Go", "url": url}}} }
	rich := accepted(t, send("rich", map[string]any{"message": "<b>hi</b>", "format": "html", "buttons": kb("https://a.example"), "silent": true}))
	// The same options, in another order, with a default named: the same meaning.
	if again := accepted(t, e.do("POST", "/v1/send", key, `{"silent":true,"link_preview":true,"buttons":[[{"url":"https://a.example","text":"Go"}]],"format":"html","message":"<b>hi</b>","user_id":"u1"}`,
		"Idempotency-Key", "rich")); again != rich {
		t.Errorf("the same rich send written otherwise got %s, want %s", again, rich)
	}
	for name, body := range map[string]map[string]any{
		"another url":     {"message": "<b>hi</b>", "format": "html", "buttons": kb("https://b.example"), "silent": true},
		"not silent":      {"message": "<b>hi</b>", "format": "html", "buttons": kb("https://a.example")},
		"protected":       {"message": "<b>hi</b>", "format": "html", "buttons": kb("https://a.example"), "silent": true, "protect_content": true},
		"as text":         {"message": "<b>hi</b>", "buttons": kb("https://a.example"), "silent": true},
		"other markup":    {"message": "<i>hi</i>", "format": "html", "buttons": kb("https://a.example"), "silent": true},
		"without preview": {"message": "<b>hi</b>", "format": "html", "buttons": kb("https://a.example"), "silent": true, "link_preview": false},
	} {
		r := send("rich", body)
		if r.status != http.StatusConflict {
			t.Errorf("%s: %d %s, want 409 idempotency_conflict", name, r.status, r.body)
		}
	}
}

// The rich answers match docs/openapi.yaml: the 202, invalid_format (send and batch item), and the
// Notification with its format.
func TestRichResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	doc := openapitest.Load(t)
	e, key := newEnvWithUser(t)
	check := func(method, template string, r response, want int) {
		t.Helper()
		if r.status != want {
			t.Fatalf("%s %s: status %d, want %d: %s", method, template, r.status, want, r.body)
		}
		if err := doc.ValidateResponse(method, template, r.status, r.header.Get("Content-Type"), r.body); err != nil {
			t.Error(err)
		}
	}
	sent := e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "<b>hi</b>", "format": "html",
		"buttons": []any{[]any{map[string]any{"text": "Go", "url": "https://a.example"}}}, "silent": true, "protect_content": false, "link_preview": false})
	check("POST", "/v1/send", sent, 202)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "<b>hi", "format": "html"}), 400)
	check("POST", "/v1/send", e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi", "format": "md"}), 400)
	check("POST", "/v1/send/batch", e.do("POST", "/v1/send/batch", key, map[string]any{"notifications": []any{
		map[string]any{"user_id": "u1", "message": "<b>ok</b>", "format": "html"},
		map[string]any{"user_id": "u1", "message": "<x>", "format": "html"},
	}}), 200)
	check("GET", "/v1/status/{tracking_id}", e.do("GET", "/v1/status/"+sent.json(t)["tracking_id"].(string), key, nil), 200)
	check("GET", "/v1/notifications", e.do("GET", "/v1/notifications", key, nil), 200)
}
