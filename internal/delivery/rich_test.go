package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/internal/delivery/send"
	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/queue"
	"github.com/heraldhq/herald/internal/richtext"
	"github.com/heraldhq/herald/internal/testing/fixture"
)

// postJSON sends POST /v1/send with any body and returns the status and the body.
func (e *env) postJSON(body map[string]any) (int, []byte) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", e.api.URL+"/v1/send", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+e.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST /v1/send: %v", err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// sendBody posts /v1/send, expects 202 and returns the tracking id.
func (e *env) sendBody(body map[string]any) string {
	e.t.Helper()
	status, res := e.postJSON(body)
	if status != http.StatusAccepted {
		e.t.Fatalf("POST /v1/send: %d %s", status, res)
	}
	var out struct {
		TrackingID string `json:"tracking_id"`
	}
	_ = json.Unmarshal(res, &out)
	return out.TrackingID
}

// Every rich option, end to end: the markup parsed at the door reaches the platform as the branded text
// and its entities (offsets past the brand line, in UTF-16 units), the buttons as an inline keyboard, and
// the three flags; the simulator, which checks them as the platform does, stores them; the console's
// rendering gives back the tenant's markup after the plain brand line.
func TestRichMessageReachesThePlatformWithEntitiesButtonsAndFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user("rich", 5001, true)
	e.user("plain", 5002, true)
	e.start(e.fastOptions())

	markup := `Order <b>#1042</b> 😀 <a href="https://shop.example/o/1042">shipped</a> <tg-spoiler>soon</tg-spoiler>`
	buttons := []any{[]any{map[string]any{"text": "Track", "url": "https://shop.example/t/1042"}, map[string]any{"text": "Chat", "url": "tg://resolve?domain=acme"}}}
	id := e.sendBody(map[string]any{"user_id": "rich", "message": markup, "format": "html", "buttons": buttons,
		"silent": true, "protect_content": true, "link_preview": false})
	plainID := e.sendBody(map[string]any{"user_id": "plain", "message": "<b>not bold</b>"})
	for _, id := range []string{id, plainID} {
		if r := e.waitTerminal(id, 20*time.Second); r.Status != "delivered" || r.Attempts != 1 {
			t.Fatalf("%s ended %+v, want delivered at the first attempt", id, r)
		}
	}

	msgs := e.sim.Messages(5001)
	if len(msgs) != 1 {
		t.Fatalf("chat 5001 received %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if want := brand("Order #1042 😀 shipped soon"); m.Text != want {
		t.Errorf("text %q, want the visible text after the brand line %q", m.Text, want)
	}
	shift := richtext.UTF16Len(brand(""))
	var got []richtext.Entity
	if err := json.Unmarshal(m.Entities, &got); err != nil {
		t.Fatalf("entities %s: %v", m.Entities, err)
	}
	want := []richtext.Entity{
		{Type: richtext.Bold, Offset: shift + 6, Length: 5},
		// 😀 is two UTF-16 units: the link starts at 6+5+1+2+1.
		{Type: richtext.TextLink, Offset: shift + 15, Length: 7, URL: "https://shop.example/o/1042"},
		{Type: richtext.Spoiler, Offset: shift + 23, Length: 4},
	}
	if !jsonEqual(mustJSON(t, got), mustJSON(t, want)) {
		t.Errorf("entities %s, want %s", mustJSON(t, got), mustJSON(t, want))
	}
	wantKB := `{"inline_keyboard":[[{"text":"Track","url":"https://shop.example/t/1042"},{"text":"Chat","url":"tg://resolve?domain=acme"}]]}`
	if !jsonEqual(m.ReplyMarkup, []byte(wantKB)) {
		t.Errorf("reply_markup %s, want %s", m.ReplyMarkup, wantKB)
	}
	if !m.DisableNotification || !m.ProtectContent || m.LinkPreviewOptions == nil || !m.LinkPreviewOptions.IsDisabled {
		t.Errorf("flags disable_notification %v, protect_content %v, link_preview_options %+v; want all set", m.DisableNotification,
			m.ProtectContent, m.LinkPreviewOptions)
	}
	lines := e.sim.Transcript(5001)
	wantHTML := "A message from Acme Shop\n" + `Order <b>#1042</b> 😀 <a href="https://shop.example/o/1042">shipped</a> <tg-spoiler>soon</tg-spoiler>`
	if len(lines) == 0 || lines[len(lines)-1].HTML != wantHTML {
		t.Errorf("transcript %+v, want the last line rendered as %q", lines, wantHTML)
	}

	p := e.sim.Messages(5002)
	if len(p) != 1 || p[0].Text != brand("<b>not bold</b>") || p[0].Entities != nil || p[0].ReplyMarkup != nil ||
		p[0].DisableNotification || p[0].ProtectContent || p[0].LinkPreviewOptions != nil {
		t.Errorf("a plain send reached the platform as %+v, want its literal text and nothing else", p)
	}
	for id, format := range map[string]string{id: "html", plainID: "text"} {
		if status, res := e.call("GET", "/v1/status/"+id, nil); status != http.StatusOK || res["format"] != format {
			t.Errorf("GET %s: %d format %v, want %q", id, status, res["format"], format)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseFailures is herald_worker_entity_parse_failures_total{tenant}.
func parseFailures(t *testing.T, tenant string) float64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "herald_worker_entity_parse_failures_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == tenant {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A message the platform cannot parse (here: entities stored past the door's checks, which the door never
// lets through) ends failed at its first attempt, with the platform's description and no retry, and is
// counted for the alert. The entities are stored in the compact form the door writes, or as the JSON an
// older build wrote: both reach the platform.
func TestPlatformParseFailureEndsFailedWithoutRetryAndIsCounted(t *testing.T) {
	// Not parallel: it counts herald_worker_entity_parse_failures_total{tenant=acme}, a process-wide metric
	// another test of this kind moves too.
	e := newEnv(t, sim.Options{})
	opts := e.fastOptions()
	opts.MaxAttempts = 5
	e.start(opts)
	// An entity past the end of the text: the platform answers 400 "can't parse entities".
	for i, stored := range []string{"b0,500", `[{"type":"bold","offset":0,"length":500}]`} {
		chat := int64(5101 + i)
		user := fmt.Sprintf("broken-%d", i)
		e.user(user, chat, true)
		before := parseFailures(t, "acme")
		id := fixture.New(e.st).Notification(t, fixture.For("acme", user), fixture.Body(brand("short")))
		e.exec(`UPDATE notifications SET format = 'html', entities = $2, chat_id = $3 WHERE tracking_id = $1`, id, stored, chat)
		if err := e.producer.Publish(context.Background(), queue.NewOutgoing(id, "acme", user, chat, 5)); err != nil {
			t.Fatal(err)
		}
		r := e.waitTerminal(id, 20*time.Second)
		if r.Status != "failed" || r.Attempts != 1 || r.ErrCode != 400 || r.ErrMsg == nil ||
			!bytes.HasPrefix([]byte(*r.ErrMsg), []byte("Bad Request: can't parse entities: ")) {
			t.Fatalf("entities %s: row %+v (message %v), want failed after one attempt with the platform's 400 can't parse entities", stored, r, deref(r.ErrMsg))
		}
		if got := parseFailures(t, "acme"); got != before+1 {
			t.Errorf("entities %s: herald_worker_entity_parse_failures_total{tenant=acme} = %v, want %v", stored, got, before+1)
		}
		if n := len(e.sim.Messages(chat)); n != 0 {
			t.Errorf("chat %d received %d messages, want none", chat, n)
		}
	}
}

// Every answer that a message cannot be sent as formatted is a parse failure, not only "can't parse": a
// message of more entities than the platform takes (stored past the door, which refuses them: an older
// build's row) meets the simulator's "entities too long", as on the platform, ends failed at its first
// attempt without a retry, and is counted for HeraldEntityParseFailures (issue 35).
func TestTooManyEntitiesIsAParseFailureThroughTheWorker(t *testing.T) {
	// Not parallel: it counts herald_worker_entity_parse_failures_total{tenant=acme}, a process-wide metric
	// another test of this kind moves too.
	e := newEnv(t, sim.Options{})
	opts := e.fastOptions()
	opts.MaxAttempts = 5
	e.start(opts)
	e.user("crowded", 5301, true)
	before := parseFailures(t, "acme")
	body := brand(strings.Repeat("x ", richtext.MaxEntities+1))
	shift := richtext.UTF16Len(brand(""))
	ents := make([]richtext.Entity, richtext.MaxEntities+1)
	for i := range ents {
		ents[i] = richtext.Entity{Type: richtext.Bold, Offset: shift + 2*i, Length: 1}
	}
	stored, err := richtext.EncodeEntities(ents)
	if err != nil {
		t.Fatal(err)
	}
	id := fixture.New(e.st).Notification(t, fixture.For("acme", "crowded"), fixture.Body(body))
	e.exec(`UPDATE notifications SET format = 'html', entities = $2, chat_id = 5301 WHERE tracking_id = $1`, id, stored)
	if err := e.producer.Publish(context.Background(), queue.NewOutgoing(id, "acme", "crowded", 5301, 5)); err != nil {
		t.Fatal(err)
	}
	r := e.waitTerminal(id, 20*time.Second)
	if r.Status != "failed" || r.Attempts != 1 || r.ErrCode != 400 || deref(r.ErrMsg) != "Bad Request: entities too long" {
		t.Fatalf("row %+v (message %v), want failed after one attempt with the platform's 400 entities too long", r, deref(r.ErrMsg))
	}
	if got := parseFailures(t, "acme"); got != before+1 {
		t.Errorf("herald_worker_entity_parse_failures_total{tenant=acme} = %v, want %v", got, before+1)
	}
	if n := len(e.sim.Messages(5301)); n != 0 {
		t.Errorf("chat 5301 received %d messages, want none", n)
	}
}

// Stored entities that do not read back (a row changed past the store) are not sent without their
// formatting: the notification fails at once, without a call to the platform, and is counted.
func TestUnreadableEntitiesFailWithoutASend(t *testing.T) {
	// Not parallel: it counts herald_worker_entity_parse_failures_total{tenant=acme}, a process-wide metric
	// another test of this kind moves too.
	e := newEnv(t, sim.Options{})
	e.user("garbled", 5201, true)
	opts := e.fastOptions()
	opts.MaxAttempts = 5
	e.start(opts)
	before := parseFailures(t, "acme")

	id := fixture.New(e.st).Notification(t, fixture.For("acme", "garbled"), fixture.Body(brand("short")))
	e.exec(`UPDATE notifications SET format = 'html', entities = 'z0,1', chat_id = 5201 WHERE tracking_id = $1`, id)
	if err := e.producer.Publish(context.Background(), queue.NewOutgoing(id, "acme", "garbled", 5201, 5)); err != nil {
		t.Fatal(err)
	}
	r := e.waitTerminal(id, 20*time.Second)
	if r.Status != "failed" || r.ErrCode != 400 || deref(r.ErrMsg) != send.UnreadableMessage {
		t.Fatalf("row %+v (message %v), want failed with %q", r, deref(r.ErrMsg), send.UnreadableMessage)
	}
	if got := parseFailures(t, "acme"); got != before+1 {
		t.Errorf("herald_worker_entity_parse_failures_total{tenant=acme} = %v, want %v", got, before+1)
	}
	if n := len(e.sim.Messages(5201)); n != 0 {
		t.Errorf("chat 5201 received %d messages, want none", n)
	}
	if st := e.sim.Stats(); st.Sends != 0 {
		t.Errorf("the platform had %d sendMessage calls, want none", st.Sends)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
