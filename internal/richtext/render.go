package richtext

import "strings"

// RenderHTML renders a text and its entities as the platform's HTML, escaped, for the dev console and
// the simulator's transcript: a spoiler as <tg-spoiler>, a pre's language as its <code class="language-…">.
// It refuses entities Validate refuses (not the text's length or blankness), so that it never renders a
// link of another scheme or tags that cross. ParseHTML gives back the same text and entities, in
// canonical order.
func RenderHTML(m Message) (string, error) {
	if err := validateEntities(m.Text, m.Entities); err != nil {
		return "", err
	}
	ents := sorted(m.Entities)
	text := m.Text
	var b strings.Builder
	b.Grow(len(text) + 24*len(ents))
	pos, pos16 := 0, 0 // how far the text is written, in bytes and in UTF-16 code units
	writeTo := func(to16 int) {
		from := pos
		for pos16 < to16 {
			c := text[pos]
			switch {
			case c >= 0xF0:
				pos, pos16 = pos+4, pos16+2
			case c >= 0xE0:
				pos, pos16 = pos+3, pos16+1
			case c >= 0xC0:
				pos, pos16 = pos+2, pos16+1
			default:
				pos, pos16 = pos+1, pos16+1
			}
		}
		escape(&b, text[from:pos], false)
	}
	var buf [8]*Entity
	stack := buf[:0]
	closeTo := func(offset int) {
		for len(stack) > 0 && end(stack[len(stack)-1]) <= offset {
			top := stack[len(stack)-1]
			writeTo(end(top))
			writeClose(&b, top)
			stack = stack[:len(stack)-1]
		}
	}
	for i := range ents {
		ent := &ents[i]
		closeTo(ent.Offset)
		writeTo(ent.Offset)
		writeOpen(&b, ent)
		stack = append(stack, ent)
	}
	closeTo(len(text) * 2) // past any end: UTF-16 is at most two units a byte
	escape(&b, text[pos:], false)
	return b.String(), nil
}

// tagOf is the tag each entity type renders as.
func tagOf(typ string) string {
	switch typ {
	case Bold:
		return "b"
	case Italic:
		return "i"
	case Underline:
		return "u"
	case Strikethrough:
		return "s"
	case Spoiler:
		return "tg-spoiler"
	case TextLink:
		return "a"
	case Code:
		return "code"
	case Pre:
		return "pre"
	}
	return "blockquote"
}

func writeOpen(b *strings.Builder, ent *Entity) {
	switch ent.Type {
	case TextLink:
		b.WriteString(`<a href="`)
		escape(b, ent.URL, true)
		b.WriteString(`">`)
	case Pre:
		b.WriteString("<pre>")
		if ent.Language != "" {
			b.WriteString(`<code class="language-`)
			escape(b, ent.Language, true)
			b.WriteString(`">`)
		}
	case ExpandableBlockquote:
		b.WriteString("<blockquote expandable>")
	default:
		b.WriteByte('<')
		b.WriteString(tagOf(ent.Type))
		b.WriteByte('>')
	}
}

func writeClose(b *strings.Builder, ent *Entity) {
	if ent.Type == Pre && ent.Language != "" {
		b.WriteString("</code>")
	}
	b.WriteString("</")
	b.WriteString(tagOf(ent.Type))
	b.WriteByte('>')
}

// escape writes s with &, < and > as references, and " too in an attribute value.
func escape(b *strings.Builder, s string, attr bool) {
	from := 0
	for i := 0; i < len(s); i++ {
		var ref string
		switch s[i] {
		case '&':
			ref = "&amp;"
		case '<':
			ref = "&lt;"
		case '>':
			ref = "&gt;"
		case '"':
			if !attr {
				continue
			}
			ref = "&quot;"
		default:
			continue
		}
		b.WriteString(s[from:i])
		b.WriteString(ref)
		from = i + 1
	}
	b.WriteString(s[from:])
}
