package richtext

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/brand"
)

// ErrInvalid is the error of Validate: a text and entities the platform would refuse or change.
var ErrInvalid = errors.New("invalid text or entities")

// ErrTooManyEntities is the error of Validate for more than MaxEntities entities, which the platform
// refuses with its own answer ("entities too long"), not "can't parse entities". It is an ErrInvalid too.
var ErrTooManyEntities = errors.New("too many entities")

// MaxEntities is the most entities the platform takes in one message (see docs/api.md, "Entities"). The
// Bot API's documentation does not state it; 100 is the limit its clients found (python-telegram-bot's
// MessageLimit.MESSAGE_ENTITIES), and past it the platform answers "entities too long" (MTProto's
// ENTITIES_TOO_LONG). The brand line has none: it is the tenant's markup's limit.
const MaxEntities = 100

// Validate checks a text and its entities as sendMessage would take them: text valid UTF-8, not empty or
// blank, at most brand.MaxLength characters; each entity of a type Herald sends, with a url for a
// text_link (only) that the platform takes, a language for a pre (only, optional), within the text and
// on UTF-16 character boundaries; entities nested by the platform's rules (see the package comment); at
// most MaxEntities of them (ErrTooManyEntities).
// Entities may come in any order. Stricter than the platform where it would silently drop or split an
// entity rather than refuse (nesting, a zero length): what the simulator refuses with this, Herald must
// never send.
func Validate(m Message) error {
	switch {
	case !utf8.ValidString(m.Text):
		return fmt.Errorf("%w: the text is not valid UTF-8", ErrInvalid)
	case m.Text == "":
		return fmt.Errorf("%w: the text is empty", ErrInvalid)
	case blank(m.Text):
		return fmt.Errorf("%w: the text is blank: the platform trims spaces and newlines and refuses what is left empty", ErrInvalid)
	}
	if n := brand.Length(m.Text); n > brand.MaxLength {
		return fmt.Errorf("%w: the text is %d characters; the platform takes at most %d", ErrInvalid, n, brand.MaxLength)
	}
	if n := len(m.Entities); n > MaxEntities {
		return fmt.Errorf("%w: %w: %d; the platform takes at most %d", ErrInvalid, ErrTooManyEntities, n, MaxEntities)
	}
	return validateEntities(m.Text, m.Entities)
}

// blank reports whether the platform would find nothing in s: it turns control characters into spaces,
// deletes '\r' and a few invisible characters (tdlib clean_input_string), then trims spaces and newlines.
func blank(s string) bool {
	for _, r := range s {
		switch {
		case r <= ' ', 0x2028 <= r && r <= 0x202E, r == 0x0333, r == 0x033F, r == 0x030A:
		default:
			return false
		}
	}
	return true
}

// validateEntities is Validate without the text's own rules, which RenderHTML does not need.
func validateEntities(text string, entities []Entity) error {
	if !utf8.ValidString(text) {
		return fmt.Errorf("%w: the text is not valid UTF-8", ErrInvalid)
	}
	if len(entities) == 0 {
		return nil
	}
	n16 := UTF16Len(text)
	var inPair []bool // inPair[k]: UTF-16 offset k falls between the two halves of a surrogate pair; n16+1 long, or none
	for i := 0; i < len(text); i++ {
		if text[i] >= 0xF0 {
			inPair = surrogateMiddles(text, n16)
			break
		}
	}
	for i, ent := range entities {
		if why := checkEntity(ent, n16, inPair); why != "" {
			return fmt.Errorf("%w: entity %d (%s at %d, length %d): %s", ErrInvalid, i, ent.Type, ent.Offset, ent.Length, why)
		}
	}
	return checkNesting(sorted(entities))
}

func surrogateMiddles(text string, n16 int) []bool {
	in := make([]bool, n16+1)
	k := 0
	for _, r := range text {
		if r > 0xFFFF {
			in[k+1] = true
			k += 2
		} else {
			k++
		}
	}
	return in
}

// checkEntity says why one entity is wrong on its own, or "".
func checkEntity(ent Entity, n16 int, inPair []bool) string {
	switch {
	case classOf(ent.Type) == classUnknown:
		return fmt.Sprintf("type %q is not one Herald sends", ent.Type)
	case ent.Offset < 0:
		return "the offset is negative"
	case ent.Length < 1:
		return "the length is not positive"
	case ent.Offset > n16 || ent.Length > n16-ent.Offset:
		return fmt.Sprintf("it runs past the end of the text (%d UTF-16 code units)", n16)
	case len(inPair) > 0 && inPair[ent.Offset]:
		return "it starts inside a surrogate pair"
	case len(inPair) > 0 && inPair[ent.Offset+ent.Length]:
		return "it ends inside a surrogate pair"
	case ent.Type == TextLink && ent.URL == "":
		return "a text_link needs a url"
	case ent.Type != TextLink && ent.URL != "":
		return "only a text_link has a url"
	case ent.Type != Pre && ent.Language != "":
		return "only a pre has a language"
	}
	if ent.Type == TextLink {
		if why := checkURL(ent.URL); why != "" {
			return "url: " + why
		}
	}
	if ent.Type == Pre && ent.Language != "" {
		return checkLanguage(ent.Language)
	}
	return ""
}

// checkNesting checks entities in canonical order against the platform's nesting rules.
func checkNesting(entities []Entity) error {
	var buf [8]*Entity
	stack := buf[:0]
	var open [classCount]int
	for i := range entities {
		ent := &entities[i]
		for len(stack) > 0 && end(stack[len(stack)-1]) <= ent.Offset {
			open[classOf(stack[len(stack)-1].Type)]--
			stack = stack[:len(stack)-1]
		}
		if n := len(stack); n > 0 && end(ent) > end(stack[n-1]) {
			return fmt.Errorf("%w: %s overlaps %s without holding it or being held by it", ErrInvalid, describe(ent), describe(stack[n-1]))
		}
		c := classOf(ent.Type)
		if blamed, why := nestingRule(c, &open); why != "" {
			var parent *Entity
			for j := len(stack) - 1; j >= 0 && parent == nil; j-- {
				if classOf(stack[j].Type) == blamed {
					parent = stack[j]
				}
			}
			return fmt.Errorf("%w: %s inside %s: %s", ErrInvalid, describe(ent), describe(parent), why)
		}
		stack = append(stack, ent)
		open[c]++
	}
	return nil
}

func end(e *Entity) int { return e.Offset + e.Length }

func describe(e *Entity) string {
	return fmt.Sprintf("%s at %d, length %d", e.Type, e.Offset, e.Length)
}
