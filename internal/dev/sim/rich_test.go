package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/dev/sim"
	"github.com/heraldhq/herald/internal/messenger"
)

// The simulator checks a message's entities as the platform does and refuses with its 400 "can't parse
// entities: …": out of the text, through the middle of a surrogate pair, crossing, a text_link of another
// scheme, code inside bold. Refused messages reach no chat.
func TestSendMessageRefusesEntitiesThePlatformRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 7001})
	cases := map[string]struct {
		text     string
		entities string
	}{
		"past the end":         {"hello", `[{"type":"bold","offset":2,"length":4}]`},
		"half a surrogate":     {"😀x", `[{"type":"italic","offset":1,"length":2}]`},
		"crossing":             {"abcdef", `[{"type":"bold","offset":0,"length":3},{"type":"italic","offset":2,"length":3}]`},
		"a javascript link":    {"click", `[{"type":"text_link","offset":0,"length":5,"url":"javascript:alert(1)"}]`},
		"a link without a url": {"click", `[{"type":"text_link","offset":0,"length":5}]`},
		"code inside bold":     {"abc", `[{"type":"bold","offset":0,"length":3},{"type":"code","offset":1,"length":1}]`},
		"an unknown type":      {"abc", `[{"type":"blink","offset":0,"length":3}]`},
	}
	for name, c := range cases {
		_, err := e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 7001, Text: c.text, Entities: json.RawMessage(c.entities)})
		var apiErr *messenger.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != 400 || !strings.HasPrefix(apiErr.Description, "Bad Request: can't parse entities: ") {
			t.Errorf("%s: err %v, want 400 Bad Request: can't parse entities", name, err)
			continue
		}
		if !messenger.Unparsable(err) || messenger.Classify(err) != messenger.Failed {
			t.Errorf("%s: the worker would not read %v as a parse failure that ends failed", name, err)
		}
	}
	if n := len(e.sim.Messages(7001)); n != 0 {
		t.Errorf("chat received %d messages, want none", n)
	}
}

// Past 100 entities the platform refuses a message with its own answer, 400 "Bad Request: entities too
// long" (not "can't parse entities"); the worker reads it as a message that cannot be sent as formatted
// (a parse failure, failed without a retry). 100 are taken.
func TestSendMessageRefusesTooManyEntitiesAsThePlatformDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 7003})
	entities := func(n int) json.RawMessage {
		var parts []string
		for i := range n {
			parts = append(parts, `{"type":"bold","offset":`+strconv.Itoa(2*i)+`,"length":1}`)
		}
		return json.RawMessage("[" + strings.Join(parts, ",") + "]")
	}
	text := strings.Repeat("x ", 101)
	if _, err := e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 7003, Text: text, Entities: entities(100)}); err != nil {
		t.Fatalf("100 entities: %v", err)
	}
	_, err := e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 7003, Text: text, Entities: entities(101)})
	var apiErr *messenger.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Description != "Bad Request: entities too long" {
		t.Fatalf("101 entities: err %v, want 400 Bad Request: entities too long", err)
	}
	if !messenger.Unparsable(err) || messenger.Classify(err) != messenger.Failed {
		t.Errorf("the worker would not read %v as a parse failure that ends failed", err)
	}
	if n := len(e.sim.Messages(7003)); n != 1 {
		t.Errorf("chat received %d messages, want the one of 100 entities", n)
	}
}

// A valid formatted message is kept as sent — entities, inline keyboard of URL buttons, flags — shown by the
// Bot API's answer, and rendered as the platform's HTML in the transcript; an edit re-renders it.
func TestSendMessageKeepsEntitiesButtonsAndFlags(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sim.Options{})
	e.user(t, sim.User{ID: 7002})
	entities := `[{"type":"bold","offset":3,"length":3},{"type":"text_link","offset":7,"length":4,"url":"https://a.example/x?a=1&b=2"},{"type":"spoiler","offset":12,"length":3}]`
	kb := `{"inline_keyboard":[[{"text":"Open","url":"https://a.example"}]]}`
	_, err := e.client.SendMessage(context.Background(), messenger.SendMessageRequest{ChatID: 7002, Text: "😀 <b> link pst",
		Entities: json.RawMessage(entities), ReplyMarkup: json.RawMessage(kb), DisableNotification: true, ProtectContent: true,
		LinkPreviewOptions: &messenger.LinkPreviewOptions{IsDisabled: true}})
	noError(t, err)
	msgs := e.sim.Messages(7002)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if !sameJSON(m.Entities, entities) || !sameJSON(m.ReplyMarkup, kb) || !m.DisableNotification || !m.ProtectContent ||
		m.LinkPreviewOptions == nil || !m.LinkPreviewOptions.IsDisabled {
		t.Errorf("kept %+v, want the entities, keyboard and flags as sent", m)
	}
	lines := e.sim.Transcript(7002)
	want := `😀 <b>&lt;b&gt;</b> <a href="https://a.example/x?a=1&amp;b=2">link</a> <tg-spoiler>pst</tg-spoiler>`
	if len(lines) != 1 || lines[0].HTML != want {
		t.Errorf("transcript %+v, want the line rendered as %q", lines, want)
	}
}

func sameJSON(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
