package richtext

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateAccepts(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Message
	}{
		{"plain", Message{Text: "hello"}},
		{"each type", Message{Text: "abcdefghij", Entities: []Entity{
			e(Bold, 0, 1), e(Italic, 1, 1), e(Underline, 2, 1), e(Strikethrough, 3, 1), e(Spoiler, 4, 1),
			link(5, 1, "https://a.example/"), e(Code, 6, 1), pre(7, 1, "go"), e(Blockquote, 8, 1), e(ExpandableBlockquote, 9, 1),
		}}},
		{"whole text", Message{Text: "x", Entities: []Entity{e(Bold, 0, 1)}}},
		{"around an emoji", Message{Text: "a😀b", Entities: []Entity{e(Bold, 1, 2)}}},
		{"after an emoji", Message{Text: "😀b", Entities: []Entity{e(Bold, 2, 1)}}},
		{"nested", Message{Text: "abc", Entities: []Entity{e(Bold, 0, 3), e(Italic, 1, 1)}}},
		{"order does not matter", Message{Text: "abc", Entities: []Entity{e(Italic, 1, 1), e(Bold, 0, 3)}}},
		{"pre in blockquote, same span, either order", Message{Text: "x", Entities: []Entity{pre(0, 1, ""), e(Blockquote, 0, 1)}}},
		{"link and bold, same span", Message{Text: "x", Entities: []Entity{link(0, 1, "tg://resolve?domain=a"), e(Bold, 0, 1)}}},
		{"b in b", Message{Text: "ab", Entities: []Entity{e(Bold, 0, 2), e(Bold, 1, 1)}}},
		{"adjacent", Message{Text: "ab", Entities: []Entity{e(Code, 0, 1), e(Code, 1, 1)}}},
		{"4096 characters", Message{Text: strings.Repeat("😀", 4096), Entities: []Entity{e(Bold, 8190, 2)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Validate(c.m); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		m      Message
		reason string
	}{
		{"empty text", Message{Text: ""}, "empty"},
		{"blank text", Message{Text: " \n\t\r\u2028"}, "blank"},
		{"too long", Message{Text: strings.Repeat("a", 4097)}, "4096"},
		{"invalid UTF-8", Message{Text: "a\xffb"}, "UTF-8"},
		{"unknown type", Message{Text: "x", Entities: []Entity{e("mention", 0, 1)}}, `type "mention"`},
		{"no type", Message{Text: "x", Entities: []Entity{e("", 0, 1)}}, `type ""`},
		{"negative offset", Message{Text: "x", Entities: []Entity{e(Bold, -1, 1)}}, "offset"},
		{"zero length", Message{Text: "x", Entities: []Entity{e(Bold, 0, 0)}}, "length"},
		{"past the end", Message{Text: "x", Entities: []Entity{e(Bold, 0, 2)}}, "end of the text"},
		{"offset past the end", Message{Text: "x", Entities: []Entity{e(Bold, 1, 1)}}, "end of the text"},
		{"overflowing length", Message{Text: "x", Entities: []Entity{e(Bold, 1, int(^uint(0)>>1))}}, "end of the text"},
		{"starts inside a surrogate pair", Message{Text: "😀b", Entities: []Entity{e(Bold, 1, 2)}}, "surrogate pair"},
		{"ends inside a surrogate pair", Message{Text: "a😀", Entities: []Entity{e(Bold, 0, 2)}}, "surrogate pair"},
		{"link without url", Message{Text: "x", Entities: []Entity{e(TextLink, 0, 1)}}, "url"},
		{"link with a bad scheme", Message{Text: "x", Entities: []Entity{link(0, 1, "javascript:alert(1)")}}, "https:, http: or tg:"},
		{"link mentioning a user", Message{Text: "x", Entities: []Entity{link(0, 1, "tg://user?id=1")}}, "tg://user"},
		{"url on bold", Message{Text: "x", Entities: []Entity{{Type: Bold, Offset: 0, Length: 1, URL: "https://a.example"}}}, "url"},
		{"language on code", Message{Text: "x", Entities: []Entity{{Type: Code, Offset: 0, Length: 1, Language: "go"}}}, "language"},
		{"bad language on pre", Message{Text: "x", Entities: []Entity{pre(0, 1, "a b")}}, "language"},
		{"overlap", Message{Text: "abc", Entities: []Entity{e(Bold, 0, 2), e(Italic, 1, 2)}}, "overlap"},
		{"code in bold", Message{Text: "abc", Entities: []Entity{e(Bold, 0, 3), e(Code, 1, 1)}}, "inside a blockquote only"},
		{"code and bold, same span", Message{Text: "x", Entities: []Entity{e(Code, 0, 1), e(Bold, 0, 1)}}, "code and pre"},
		{"bold in pre", Message{Text: "abc", Entities: []Entity{pre(0, 3, ""), e(Bold, 1, 1)}}, "hold no other formatting"},
		{"pre in link", Message{Text: "abc", Entities: []Entity{link(0, 3, "https://a.example"), pre(1, 1, "")}}, "inside a blockquote only"},
		{"link in link", Message{Text: "abc", Entities: []Entity{link(0, 3, "https://a.example"), link(1, 1, "https://b.example")}}, "link cannot be inside a link"},
		{"blockquote in blockquote", Message{Text: "abc", Entities: []Entity{e(Blockquote, 0, 3), e(ExpandableBlockquote, 1, 1)}}, "blockquote cannot be inside a blockquote"},
		{"blockquote in link", Message{Text: "abc", Entities: []Entity{link(0, 3, "https://a.example"), e(Blockquote, 1, 1)}}, "blockquote cannot be inside a link"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.m)
			if err == nil {
				t.Fatalf("Validate accepted %+v", c.m)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q, want it to say %q", err, c.reason)
			}
		})
	}
}

// Validate does not change the caller's entities, even when it has to order them.
func TestValidateKeepsTheCallersOrder(t *testing.T) {
	ents := []Entity{e(Italic, 1, 1), e(Bold, 0, 3)}
	if err := Validate(Message{Text: "abc", Entities: ents}); err != nil {
		t.Fatal(err)
	}
	if ents[0].Type != Italic || ents[1].Type != Bold {
		t.Fatalf("entities reordered: %+v", ents)
	}
}

// More than MaxEntities entities is what the platform refuses as "entities too long" (the simulator's
// answer): ErrTooManyEntities, an ErrInvalid too. MaxEntities are fine.
func TestValidateRefusesTooManyEntities(t *testing.T) {
	text := strings.Repeat("x ", MaxEntities+1)
	var ents []Entity
	for i := range MaxEntities + 1 {
		ents = append(ents, e(Bold, 2*i, 1))
	}
	if err := Validate(Message{Text: text, Entities: ents[:MaxEntities]}); err != nil {
		t.Fatalf("%d entities: %v", MaxEntities, err)
	}
	err := Validate(Message{Text: text, Entities: ents})
	if !errors.Is(err, ErrTooManyEntities) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("%d entities: %v, want ErrTooManyEntities and ErrInvalid", len(ents), err)
	}
}
