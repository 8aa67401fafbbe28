package richtext

import (
	"reflect"
	"strings"
	"testing"
)

// The compact form reads back as exactly the entities it was made from, and is far smaller than their
// JSON (the point of it: the store's rows). FuzzParseHTML checks the round trip for whatever parses.
func TestCompactEntitiesRoundTrip(t *testing.T) {
	for _, c := range []struct {
		entities []Entity
		want     string
	}{
		{nil, ""},
		{[]Entity{e(Bold, 25, 4)}, "b25,4"},
		{[]Entity{e(Bold, 0, 10), link(2, 3, "https://a.example/p?q=1,2:3;x"), pre(11, 4, "go"), e(Code, 16, 1)},
			"b0,10a2,3,29:https://a.example/p?q=1,2:3;xp11,4,2:goc16,1"},
		{[]Entity{pre(0, 3, ""), e(Italic, 0, 1), e(Underline, 1, 1), e(Strikethrough, 2, 1), e(Spoiler, 0, 3),
			e(Blockquote, 4, 1), e(ExpandableBlockquote, 6, 1)}, "p0,3i0,1u1,1s2,1h0,3q4,1e6,1"},
		{[]Entity{link(0, 1, "tg://resolve?domain=a"+strings.Repeat("é", 300))}, "a0,1,621:tg://resolve?domain=a" + strings.Repeat("é", 300)},
	} {
		got, err := EncodeEntities(c.entities)
		if err != nil || got != c.want {
			t.Errorf("EncodeEntities(%+v) = %q, %v; want %q", c.entities, got, err, c.want)
			continue
		}
		back, err := DecodeEntities(got)
		if err != nil || !reflect.DeepEqual(back, c.entities) {
			t.Errorf("DecodeEntities(%q) = %+v, %v; want %+v", got, back, err, c.entities)
		}
	}

	m, err := ParseHTML(benchMarkup)
	if err != nil {
		t.Fatal(err)
	}
	compact, _ := EncodeEntities(m.Entities)
	asJSON, _ := EntitiesJSON(compact)
	if 3*len(compact) > len(asJSON) || len(compact) > len(benchMarkup)/2 {
		t.Errorf("the compact form of the benchmark's %d entities is %d bytes, their JSON %d, the markup %d: want it under a third of the JSON and half the markup",
			len(m.Entities), len(compact), len(asJSON), len(benchMarkup))
	}
}

// The worker sends the entities as JSON: the compact form's, and the JSON form the store held before it
// (rows queued by an older build), give the same.
func TestEntitiesJSON(t *testing.T) {
	want := `[{"type":"bold","offset":25,"length":4},{"type":"text_link","offset":30,"length":5,"url":"https://a.example"}]`
	for _, stored := range []string{"b25,4a30,5,17:https://a.example", want} {
		got, err := EntitiesJSON(stored)
		if err != nil || string(got) != want {
			t.Errorf("EntitiesJSON(%q) = %s, %v; want %s", stored, got, err, want)
		}
	}
	if got, err := EntitiesJSON(""); err != nil || got != nil {
		t.Errorf("EntitiesJSON(\"\") = %s, %v; want nil", got, err)
	}
}

func TestCompactEntitiesRefuses(t *testing.T) {
	for _, s := range []string{
		"x0,1", "b", "b0", "b0,", "b,1", "b0;1", "b0,1,", "b0,1,5", "b0,1,5:abc", "b0,1,3:abc", // a bold has no string
		"a0,1,99:https://a.example", "b0,1x", "b1234567890,1", "[{", `[{"type":1}]`,
	} {
		if got, err := DecodeEntities(s); err == nil {
			t.Errorf("DecodeEntities(%q) = %+v, want an error", s, got)
		}
	}
	if _, err := EncodeEntities([]Entity{e("mention", 0, 1)}); err == nil {
		t.Error("EncodeEntities took a mention, a type Herald does not produce")
	}
}
