package ingress

// The data of a templated send (§12), decoded once into the render's values. encoding/json's Decoder with
// UseNumber did this for about a quarter of a templated send's CPU at the door (BenchmarkSendDoor's
// profile): its reflection, a string allocated for every key and string, growing maps and slices, and then
// a walk of the whole tree for NULs that built a path string at every step. This decoder does the same in
// one pass, and FuzzDecodeData holds it to encoding/json's answers.

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDataDepth is encoding/json's bound on nesting (its scanner's maxNestingDepth): a document nested
// deeper is refused as it refuses it.
const maxDataDepth = 10000

// decodeData decodes a JSON object into the render's values as encoding/json does with UseNumber into a
// map[string]any — objects map[string]any (of a key given twice, the last), arrays []any (never nil),
// strings unescaped (an unpaired surrogate and invalid UTF-8 read as U+FFFD), numbers json.Number as
// written, true, false, null — and accepts and refuses the same documents, with nothing but whitespace after
// the object. nul is where a string or key holds U+0000, as nulIn writes it under "data" (one such place,
// the first met; "" when none).
func decodeData(b []byte) (data map[string]any, nul string, ok bool) {
	// One copy of the document: strings without escapes and numbers are slices of it.
	d := dataDecoder{s: string(b)}
	d.space()
	if d.i == len(d.s) || d.s[d.i] != '{' {
		return nil, "", false
	}
	v, at, found, ok := d.object()
	if !ok {
		return nil, "", false
	}
	if d.space(); d.i != len(d.s) {
		return nil, "", false
	}
	data = v.(map[string]any)
	if d.dup {
		// A key given twice: its last value is the one kept, and the NUL may have been in an earlier one.
		// (A send's body never gets here: decodeStrict refuses duplicate keys at any depth.)
		at, found = nulIn(data, "data")
		return data, at, true
	}
	if found {
		return data, "data" + at, true
	}
	return data, "", true
}

type dataDecoder struct {
	s     string
	i     int
	depth int
	dup   bool
	// The values of the open arrays and the members of the open objects, innermost last: each array or
	// object is made at its end, at its size.
	items   []any
	members []member
}

type member struct {
	key string
	v   any
}

func (d *dataDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value decodes the value at d.i (after whitespace). at and found say where below it a NUL is: at is
// relative (".key", "[2]", " key", "" for the value itself).
func (d *dataDecoder) value() (v any, at string, found, ok bool) {
	d.space()
	if d.i == len(d.s) {
		return nil, "", false, false
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		s, ok := d.str()
		if !ok {
			return nil, "", false, false
		}
		return s, "", !storable(s), true
	case c == '-' || c >= '0' && c <= '9':
		n, ok := d.number()
		return n, "", false, ok
	case c == 't':
		return true, "", false, d.literal("true")
	case c == 'f':
		return false, "", false, d.literal("false")
	case c == 'n':
		return nil, "", false, d.literal("null")
	}
	return nil, "", false, false
}

func (d *dataDecoder) literal(word string) bool {
	if len(d.s)-d.i < len(word) || d.s[d.i:d.i+len(word)] != word {
		return false
	}
	d.i += len(word)
	return true
}

// enter and leave count the nesting as encoding/json's scanner does.
func (d *dataDecoder) enter() bool {
	d.depth++
	return d.depth <= maxDataDepth
}

func (d *dataDecoder) object() (v any, at string, found, ok bool) {
	if !d.enter() {
		return nil, "", false, false
	}
	d.i++ // {
	from := len(d.members)
	d.space()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		d.depth--
		return map[string]any{}, "", false, true
	}
	for {
		d.space()
		if d.i == len(d.s) || d.s[d.i] != '"' {
			return nil, "", false, false
		}
		key, ok := d.str()
		if !ok {
			return nil, "", false, false
		}
		if !found && !storable(key) {
			at, found = " key", true
		}
		d.space()
		if d.i == len(d.s) || d.s[d.i] != ':' {
			return nil, "", false, false
		}
		d.i++
		e, eAt, eFound, ok := d.value()
		if !ok {
			return nil, "", false, false
		}
		if !found && eFound {
			at, found = "."+key+eAt, true
		}
		d.members = append(d.members, member{key, e})
		d.space()
		if d.i == len(d.s) {
			return nil, "", false, false
		}
		if c := d.s[d.i]; c == ',' {
			d.i++
			continue
		} else if c != '}' {
			return nil, "", false, false
		}
		d.i++
		break
	}
	ms := d.members[from:]
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		m[e.key] = e.v
	}
	d.dup = d.dup || len(m) < len(ms)
	clear(ms) // the scratch holds no value past its object
	d.members = d.members[:from]
	d.depth--
	return m, at, found, true
}

func (d *dataDecoder) array() (v any, at string, found, ok bool) {
	if !d.enter() {
		return nil, "", false, false
	}
	d.i++ // [
	from := len(d.items)
	d.space()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		d.depth--
		return []any{}, "", false, true
	}
	for {
		e, eAt, eFound, ok := d.value()
		if !ok {
			return nil, "", false, false
		}
		if !found && eFound {
			at, found = "["+strconv.Itoa(len(d.items)-from)+"]"+eAt, true
		}
		d.items = append(d.items, e)
		d.space()
		if d.i == len(d.s) {
			return nil, "", false, false
		}
		if c := d.s[d.i]; c == ',' {
			d.i++
			continue
		} else if c != ']' {
			return nil, "", false, false
		}
		d.i++
		break
	}
	a := make([]any, len(d.items)-from)
	copy(a, d.items[from:])
	clear(d.items[from:])
	d.items = d.items[:from]
	d.depth--
	return a, at, found, true
}

// number reads a number as JSON writes one, kept as written.
func (d *dataDecoder) number() (json.Number, bool) {
	s, i := d.s, d.i
	start := i
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return "", false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return "", false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return "", false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	d.i = i
	return json.Number(s[start:i]), true
}

// str reads a string at d.i (its opening quote). One without escapes and of valid UTF-8 is a slice of the
// document; the others are unquoted as encoding/json does.
func (d *dataDecoder) str() (string, bool) {
	s := d.s
	start := d.i + 1
	plain := true
	i := start
	for {
		if i == len(s) {
			return "", false
		}
		c := s[i]
		switch {
		case c == '"':
			d.i = i + 1
			if plain {
				return s[start:i], true
			}
			return unquoteData(s[start:i]), true
		case c < ' ':
			return "", false
		case c == '\\':
			plain = false
			if i+1 == len(s) {
				return "", false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-i < 6 || hex4(s[i+2:i+6]) < 0 {
					return "", false
				}
				i += 6
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				plain = false
			}
			i += n
		}
	}
}

// hex4 is the value of four hex digits, or -1.
func hex4(s string) rune {
	var r rune
	for i := range 4 {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquoteData unescapes a string's contents the str scan found well formed, as encoding/json's unquote
// does: a surrogate pair is one character, a lone surrogate and each byte of invalid UTF-8 U+FFFD.
func unquoteData(s string) string {
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			switch e := s[i+1]; e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if len(s)-i >= 6 && s[i] == '\\' && s[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, hex4(s[i+2:i+6])); pair != utf8.RuneError {
							b = utf8.AppendRune(b, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
				continue
			default: // " \ /
				b = append(b, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			b = utf8.AppendRune(b, r)
			i += n
		}
	}
	return string(b)
}
