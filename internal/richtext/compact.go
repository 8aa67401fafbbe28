package richtext

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// The compact form of a message's entities: how the store keeps them between the door and the worker.
//
// A rich send's entities, as sendMessage's JSON, are several times the size of the markup they came from
// (45–80 entities of about forty bytes each for 1–2 KB of markup): stored beside the body, they made each
// row several kilobytes wider, past the size where PostgreSQL compresses a value and moves it out of line,
// and that cost the send path more than the parser (docs/benchmarks.md). The compact form is about as long
// as the markup's tags, costs no reflection to write, and is read back only by the worker, which sends the
// JSON. It is exact: DecodeEntities gives back the entities EncodeEntities was given, so what the door
// validated is still what the platform receives.
//
// Each entity in order, nothing between them: a type letter (compactTypes), the offset, ',', the length,
// and for a text_link's URL or a pre's language ',' then the string's length in bytes, ':' and its bytes.
// For example "b25,4a30,5,17:https://a.example" is a bold and a text_link.

// compactTypes are the type letters of the compact form, in the order of the entity types.
var compactTypes = [...]struct {
	letter byte
	typ    string
}{
	{'b', Bold}, {'i', Italic}, {'u', Underline}, {'s', Strikethrough}, {'h', Spoiler}, {'a', TextLink},
	{'c', Code}, {'p', Pre}, {'q', Blockquote}, {'e', ExpandableBlockquote},
}

// letterOf is the compact form's letter of an entity type, 0 for one Herald does not produce.
func letterOf(typ string) byte {
	for _, t := range compactTypes {
		if t.typ == typ {
			return t.letter
		}
	}
	return 0
}

// typeOf is the entity type of a compact letter, "" for none.
func typeOf(letter byte) string {
	for _, t := range compactTypes {
		if t.letter == letter {
			return t.typ
		}
	}
	return ""
}

// EncodeEntities is the compact form of entities ("" for none). Every entity must be of a type Herald
// produces (ParseHTML's); another is refused.
func EncodeEntities(entities []Entity) (string, error) {
	if len(entities) == 0 {
		return "", nil
	}
	b := make([]byte, 0, 12*len(entities))
	for _, ent := range entities {
		letter := letterOf(ent.Type)
		if letter == 0 {
			return "", fmt.Errorf("entity type %q has no compact form", ent.Type)
		}
		b = append(b, letter)
		b = strconv.AppendInt(b, int64(ent.Offset), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(ent.Length), 10)
		extra := ent.URL
		if ent.Type == Pre {
			extra = ent.Language
		}
		if extra != "" {
			b = append(b, ',')
			b = strconv.AppendInt(b, int64(len(extra)), 10)
			b = append(b, ':')
			b = append(b, extra...)
		}
	}
	return string(b), nil
}

// DecodeEntities reads entities in the compact form ("" is none). A value that begins with '[' is the
// entities as JSON, the form the store held before the compact one (an installation running a build of
// then may still have such rows queued).
func DecodeEntities(s string) ([]Entity, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] == '[' {
		var ents []Entity
		if err := json.Unmarshal([]byte(s), &ents); err != nil {
			return nil, fmt.Errorf("while reading entities as JSON: %w", err)
		}
		return ents, nil
	}
	var ents []Entity
	for i := 0; i < len(s); {
		typ := typeOf(s[i])
		if typ == "" {
			return nil, fmt.Errorf("at byte %d of the entities: %q is not an entity type", i, s[i])
		}
		ent := Entity{Type: typ}
		var err error
		if ent.Offset, i, err = compactInt(s, i+1); err != nil {
			return nil, err
		}
		if i >= len(s) || s[i] != ',' {
			return nil, fmt.Errorf("at byte %d of the entities: want ',' after the offset", i)
		}
		if ent.Length, i, err = compactInt(s, i+1); err != nil {
			return nil, err
		}
		if i < len(s) && s[i] == ',' {
			var n int
			if n, i, err = compactInt(s, i+1); err != nil {
				return nil, err
			}
			if i >= len(s) || s[i] != ':' || n > len(s)-i-1 {
				return nil, fmt.Errorf("at byte %d of the entities: want ':' and %d bytes", i, n)
			}
			extra := s[i+1 : i+1+n]
			i += 1 + n
			switch typ {
			case TextLink:
				ent.URL = extra
			case Pre:
				ent.Language = extra
			default:
				return nil, fmt.Errorf("a %s entity has no string", typ)
			}
		}
		ents = append(ents, ent)
	}
	return ents, nil
}

var errCompactNumber = errors.New("want a number")

// compactInt reads the decimal number at s[i:] and returns it and the index past it.
func compactInt(s string, i int) (int, int, error) {
	j := i
	for j < len(s) && '0' <= s[j] && s[j] <= '9' && j-i < 9 {
		j++
	}
	if j == i {
		return 0, i, fmt.Errorf("at byte %d of the entities: %w", i, errCompactNumber)
	}
	n, _ := strconv.Atoi(s[i:j]) // at most nine digits: cannot fail
	return n, j, nil
}

// EntitiesJSON is the stored entities (either form DecodeEntities reads) as sendMessage's entities, nil
// for none.
func EntitiesJSON(stored string) (json.RawMessage, error) {
	ents, err := DecodeEntities(stored)
	if err != nil || len(ents) == 0 {
		return nil, err
	}
	return json.Marshal(ents)
}
