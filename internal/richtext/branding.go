package richtext

import "github.com/heraldhq/herald/internal/brand"

// Brand puts internal/brand's line ("A message from <label>\n") before a tenant's parsed message, as
// plain text: the entities move by the line's UTF-16 length, so none reaches into it, and whatever the
// label or the markup hold, the tenant cannot close or restyle it. fits reports whether the branded
// text is within the platform's limit (brand.MaxLength characters). m is left as it was.
func Brand(label string, m Message) (branded Message, fits bool) {
	text := brand.Render(label, m.Text) // the line, then the message
	shift := UTF16Len(text[:len(text)-len(m.Text)])
	var ents []Entity
	if len(m.Entities) > 0 {
		ents = make([]Entity, len(m.Entities))
		for i, ent := range m.Entities {
			ent.Offset += shift
			ents[i] = ent
		}
	}
	return Message{Text: text, Entities: ents}, brand.Fits(text)
}
