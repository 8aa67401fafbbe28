package ingress

// The data of a templated send (§12), decoded once into the render's values. encoding/json's Decoder with
// UseNumber did this for about a quarter of a templated send's CPU at the door (BenchmarkSendDoor's
// profile): its reflection, a string allocated for every key and string, growing maps and slices, and then
// a walk of the whole tree for NULs that built a path string at every step. This decoder does the same in
// one pass, makes the small objects template.Objects (a slice of members, not a map: most of what the
// maps cost was the maps), takes the objects' members and the arrays' items from a few shared blocks, and
// FuzzDecodeData holds it to encoding/json's answers (template.ToMaps of what it decodes).

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/template"
)

// maxDataDepth is encoding/json's bound on nesting (its scanner's maxNestingDepth): a document nested
// deeper is refused as it refuses it.
const maxDataDepth = 10000

// maxObjectMembers: an object of more keys is a map (an Object's lookup is a scan).
const maxObjectMembers = 16

// decodeData decodes a JSON object into the render's values as encoding/json does with UseNumber into a
// map[string]any — objects *template.Object, or map[string]any past maxObjectMembers (of a key given
// twice, the last value), arrays []any (never nil), strings unescaped (an unpaired surrogate and invalid
// UTF-8 read as U+FFFD), numbers json.Number as written, true, false, null — and accepts and refuses the
// same documents, with nothing but whitespace after the object. The whole data is returned as an any
// holding an *Object or a map. nul is where a string or key holds U+0000, as nulIn writes it under "data"
// (one such place, the first met; "" when none).
func decodeData(b []byte) (data any, nul string, ok bool) {
	// One copy of the document: strings without escapes and numbers are slices of it.
	d := dataDecoder{s: string(b)}
	// The blocks at the document's size: a member follows a colon, an object opens with a brace, an item
	// follows a bracket or a comma (strings holding them only make the blocks larger than needed).
	d.memberBlock = make([]template.Member, 0, min(bytes.Count(b, []byte{':'}), maxBlock))
	d.objects = make([]template.Object, 0, min(bytes.Count(b, []byte{'{'}), maxBlock))
	if arrays := bytes.Count(b, []byte{'['}); arrays > 0 {
		d.itemBlock = make([]any, 0, min(arrays+bytes.Count(b, []byte{','}), maxBlock))
	}
	scratch := dataScratches.Get().(*dataScratch)
	defer dataScratches.Put(scratch)
	d.items, d.members = scratch.items[:0], scratch.members[:0]
	defer func() {
		clear(d.items) // a refused document leaves values on the stacks
		clear(d.members)
		scratch.items, scratch.members = d.items[:0], d.members[:0]
	}()
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
	data = v
	if d.dup {
		// A key given twice: its last value is the one kept, and the NUL may have been in an earlier one.
		// (A send's body never gets here: decodeStrict refuses duplicate keys at any depth.)
		if at, found := nulIn(data, "data"); found {
			return data, at, true
		}
		return data, "", true
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
	members []template.Member
	// The blocks the finished objects and arrays are cut from: one allocation for many.
	objects     []template.Object
	memberBlock []template.Member
	itemBlock   []any
}

// dataScratch is the stacks of a decode, reused: they are empty (and cleared) when it ends.
type dataScratch struct {
	items   []any
	members []template.Member
}

var dataScratches = sync.Pool{New: func() any { return new(dataScratch) }}

// maxBlock bounds a block's first size (a 32 KiB document could ask for thousands); past it, more blocks.
const (
	maxBlock    = 256
	objectBlock = 16
	memberBlock = 64
	itemBlock   = 32
)

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
		return d.finishObject(nil), "", false, true
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
		d.members = append(d.members, template.Member{Key: key, Value: e})
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
	v = d.finishObject(d.members[from:])
	clear(d.members[from:]) // the scratch holds no value past its object
	d.members = d.members[:from]
	d.depth--
	return v, at, found, true
}

// finishObject makes an object of its members: an Object, or a map when they are many. Of a key given
// twice the last value is kept (and d.dup set).
func (d *dataDecoder) finishObject(ms []template.Member) any {
	if len(ms) > maxObjectMembers {
		m := make(map[string]any, len(ms))
		for _, e := range ms {
			m[e.Key] = e.Value
		}
		d.dup = d.dup || len(m) < len(ms)
		return m
	}
	if cap(d.memberBlock)-len(d.memberBlock) < len(ms) {
		d.memberBlock = make([]template.Member, 0, memberBlock)
	}
	start := len(d.memberBlock)
	for _, e := range ms {
		kept := d.memberBlock[start:]
		i := 0
		for i < len(kept) && kept[i].Key != e.Key {
			i++
		}
		if i < len(kept) {
			kept[i].Value = e.Value
			d.dup = true
			continue
		}
		d.memberBlock = append(d.memberBlock, e)
	}
	if len(d.objects) == cap(d.objects) {
		d.objects = make([]template.Object, 0, objectBlock)
	}
	// Capped at its length: an Object never grows into the members of the next.
	d.objects = append(d.objects, template.Object{Members: d.memberBlock[start:len(d.memberBlock):len(d.memberBlock)]})
	return &d.objects[len(d.objects)-1]
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
	n := len(d.items) - from
	if cap(d.itemBlock)-len(d.itemBlock) < n {
		d.itemBlock = make([]any, 0, max(n, itemBlock))
	}
	start := len(d.itemBlock)
	d.itemBlock = append(d.itemBlock, d.items[from:]...)
	a := d.itemBlock[start:len(d.itemBlock):len(d.itemBlock)]
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
