package richtext

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a markup ParseHTML refuses: where, and what is wrong (for 400 invalid_format).
type SyntaxError struct {
	Offset int    // in characters (Unicode code points) from the start of the markup, from 0
	Byte   int    // the same place in bytes
	Reason string // what is wrong, for the tenant
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("at offset %d (in characters): %s", e.Offset, e.Reason)
}

// tag is one of the subset's tags; tags that make the same entity stay apart, so that an end tag must
// name its own start tag (</strong> does not close <b>).
type tag uint8

const (
	tagUnknown tag = iota
	tagB
	tagStrong
	tagI
	tagEm
	tagU
	tagIns
	tagS
	tagStrike
	tagDel
	tagSpan
	tagTgSpoiler
	tagA
	tagCode
	tagPre
	tagBlockquote
)

var tagNames = [...]string{"", "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre", "blockquote"}

var tagTypes = [...]string{"", Bold, Bold, Italic, Italic, Underline, Underline, Strikethrough, Strikethrough, Strikethrough,
	Spoiler, Spoiler, TextLink, Code, Pre, Blockquote}

const subset = "the platform's HTML has b, strong, i, em, u, ins, s, strike, del, span class=\"tg-spoiler\", tg-spoiler, a href, code, pre and blockquote"

// lookupTag finds a tag by name, ASCII case-insensitively as HTML does.
func lookupTag(name string) tag {
	var buf [len("blockquote")]byte
	if len(name) > len(buf) {
		return tagUnknown
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "b":
		return tagB
	case "strong":
		return tagStrong
	case "i":
		return tagI
	case "em":
		return tagEm
	case "u":
		return tagU
	case "ins":
		return tagIns
	case "s":
		return tagS
	case "strike":
		return tagStrike
	case "del":
		return tagDel
	case "span":
		return tagSpan
	case "tg-spoiler":
		return tagTgSpoiler
	case "a":
		return tagA
	case "code":
		return tagCode
	case "pre":
		return tagPre
	case "blockquote":
		return tagBlockquote
	}
	return tagUnknown
}

// ParseHTML parses a message in the platform's HTML subset into its visible text and entities, in
// canonical order; the package comment has the rules. It refuses anything else with a *SyntaxError.
// One pass over the markup, and a few allocations: the text, the entities, the open tags and, when an
// attribute holds a character reference, the decoded values.
func ParseHTML(markup string) (Message, error) {
	if !utf8.ValidString(markup) {
		return Message{}, invalidUTF8(markup)
	}
	if !strings.ContainsAny(markup, "<>&") {
		return Message{Text: markup}, nil
	}
	// Eight open tags are deep enough for most markup. The text is never longer than its markup: a
	// reference is longer than its character.
	p := parser{in: markup, stack: make([]openTag, 0, 8), lastTop: -1}
	p.text.Grow(len(markup))
	if n := strings.Count(markup, "</"); n > 0 {
		// An entity needs an end tag; a markup of end tags alone is refused at the first, so the guess
		// is bounded and append grows past it.
		p.entities = make([]Entity, 0, min(n, maxPrealloc))
		p.entityAt = make([]int, 0, min(n, maxPrealloc))
	}
	if err := p.run(); err != nil {
		return Message{}, err
	}
	if len(p.entities) > MaxEntities {
		// Counted once the markup is read: an element that ends empty, or continues the span before it,
		// makes no entity (openTag, endTag).
		return Message{}, p.errorf(p.entityAt[MaxEntities], "this tag makes entity number %d: the platform refuses a message "+
			"with more than %d entities (formatting spans; a formatting inside the same formatting, and spans of the same "+
			"formatting or links to the same URL side by side, count once)", MaxEntities+1, MaxEntities)
	}
	if len(p.entities) == 0 {
		return Message{Text: p.text.String()}, nil
	}
	// Parsed in document order, entities are sorted but for equal spans, which keep the markup's
	// nesting; canonical order may want them the other way round.
	if !slices.IsSortedFunc(p.entities, compare) {
		Sort(p.entities)
	}
	return Message{Text: p.text.String(), Entities: p.entities}, nil
}

// maxPrealloc bounds the entities ParseHTML makes room for before it has read any.
const maxPrealloc = 128

type parser struct {
	in       string
	text     strings.Builder
	u16      int // UTF-16 length of the text so far: the offset of the next entity
	entities []Entity
	entityAt []int // byte offset of the start tag of each entity, to name the one past MaxEntities
	stack    []openTag
	values   strings.Builder // attribute values with references, decoded
	open     [classCount]int // open entities by class, for nestingRule
	// openFormat counts the open entities of each formatting type (formatIndex): a tag of a formatting
	// already open makes no entity.
	openFormat [formatCount]int
	lastTop    int  // the entity last closed at the top level, that a tag of the same span may continue; -1 for none
	preEnd     bool // the code naming a pre's language has closed: only </pre> may follow
}

// What an openTag's entity is when it has none of its own.
const (
	entityLanguage = -1 // the code naming a pre's language
	entityMerged   = -2 // a formatting inside the same formatting: the outer entity covers it
)

type openTag struct {
	tag    tag
	at     int   // byte offset of its '<'
	entity int   // its entity's index, or entityLanguage, or entityMerged
	class  class // classUnknown when it holds no entity
	// lastChild is the entity last closed directly inside this tag, that a sibling of the same span may
	// continue; -1 for none.
	lastChild int
}

// The formatting types, for parser.openFormat.
const formatCount = 5

// formatIndex is the index of a formatting type (bold, italic, underline, strikethrough, spoiler) in
// parser.openFormat, -1 for another type.
func formatIndex(typ string) int {
	switch typ {
	case Bold:
		return 0
	case Italic:
		return 1
	case Underline:
		return 2
	case Strikethrough:
		return 3
	case Spoiler:
		return 4
	}
	return -1
}

func (p *parser) errorf(at int, format string, args ...any) error {
	return &SyntaxError{Offset: charOffset(p.in, at), Byte: at, Reason: fmt.Sprintf(format, args...)}
}

func invalidUTF8(s string) error {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return &SyntaxError{Offset: charOffset(s, i), Byte: i, Reason: "the text is not valid UTF-8"}
}

func (p *parser) run() error {
	s := p.in
	text := 0 // start of the text not yet written
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf { // valid UTF-8: the leading byte gives the length
			switch {
			case c >= 0xF0:
				p.u16 += 2 // a surrogate pair
				i += 4
			case c >= 0xE0:
				p.u16++
				i += 3
			default:
				p.u16++
				i += 2
			}
			continue
		}
		if c != '<' && c != '&' && c != '>' {
			p.u16++
			i++
			continue
		}
		if err := p.flush(text, i); err != nil {
			return err
		}
		var err error
		switch c {
		case '>':
			return p.errorf(i, "a '>' in text must be written &gt;")
		case '&':
			if p.preEnd {
				return p.errorf(i, "after the code of a <pre>, only </pre> may follow")
			}
			var r rune
			if r, i, err = p.reference(i); err != nil {
				return err
			}
			p.text.WriteRune(r)
			p.u16++
			if r > 0xFFFF {
				p.u16++
			}
		case '<':
			if i, err = p.tag(i); err != nil {
				return err
			}
		}
		text = i
	}
	if err := p.flush(text, len(s)); err != nil {
		return err
	}
	if n := len(p.stack); n > 0 {
		top := p.stack[n-1]
		return p.errorf(top.at, "<%s> is never closed", tagNames[top.tag])
	}
	return nil
}

// flush writes the markup's text from..to, already counted in u16.
func (p *parser) flush(from, to int) error {
	if from == to {
		return nil
	}
	if p.preEnd {
		return p.errorf(from, "after the code of a <pre>, only </pre> may follow")
	}
	p.text.WriteString(p.in[from:to])
	return nil
}

// reference decodes the character reference at s[i] == '&' and returns where it ends.
func (p *parser) reference(i int) (rune, int, error) {
	s := p.in
	j := i + 1
	if j < len(s) && s[j] == '#' {
		j++
		base := 10
		if j < len(s) && (s[j] == 'x' || s[j] == 'X') {
			base = 16
			j++
		}
		digits, v := j, 0
		for ; j < len(s); j++ {
			d := digitValue(s[j], base)
			if d < 0 {
				break
			}
			if v <= utf8.MaxRune { // past it the value is refused anyway; stop before it overflows
				v = v*base + d
			}
		}
		if j == digits {
			return 0, 0, p.errorf(i, "a numeric reference needs digits: &#65; or &#x41;")
		}
		if j >= len(s) || s[j] != ';' {
			return 0, 0, p.errorf(i, "a reference ends with ';': %s;", s[i:j])
		}
		if v == 0 || v > utf8.MaxRune || (0xD800 <= v && v <= 0xDFFF) {
			return 0, 0, p.errorf(i, "%s names no code point the platform takes (1 to 10FFFF hex, not a surrogate)", s[i:j+1])
		}
		return rune(v), j + 1, nil
	}
	for j < len(s) && isLetter(s[j]) {
		j++
	}
	name := s[i+1 : j]
	var r rune
	switch name {
	case "lt":
		r = '<'
	case "gt":
		r = '>'
	case "amp":
		r = '&'
	case "quot":
		r = '"'
	}
	switch {
	case r != 0 && j < len(s) && s[j] == ';':
		return r, j + 1, nil
	case r != 0:
		return 0, 0, p.errorf(i, "a reference ends with ';': &%s;", name)
	case name != "" && j < len(s) && s[j] == ';':
		return 0, 0, p.errorf(i, "unknown reference &%s;: the platform's HTML has &lt; &gt; &amp; &quot; and numeric ones (&#160;)", name)
	}
	return 0, 0, p.errorf(i, "a '&' that starts no reference must be written &amp;")
}

// attrs are the attributes of a start tag; each *At is the byte offset to name in an error.
type attrs struct {
	href, class                 string
	hasHref, hasClass           bool
	hrefAt, classAt, classNamed int
	expandable                  bool
}

// tag reads the start or end tag at s[i] == '<' and returns where it ends.
func (p *parser) tag(i int) (int, error) {
	s := p.in
	j := i + 1
	if j < len(s) && s[j] == '/' {
		return p.endTag(i)
	}
	if j >= len(s) || !isLetter(s[j]) { // as in HTML: "<3", "< b" and "<!--" are no tags
		return 0, p.errorf(i, "a '<' that starts no tag must be written &lt;")
	}
	for j < len(s) && isNameByte(s[j]) {
		j++
	}
	name := s[i+1 : j]
	t := lookupTag(name)
	if t == tagUnknown {
		return 0, p.errorf(i, "unknown tag <%s>: %s", name, subset)
	}
	var a attrs
	for {
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if j >= len(s) {
			return 0, p.errorf(i, "the tag <%s> never ends: '>' is missing", name)
		}
		if s[j] == '>' {
			j++
			break
		}
		if s[j] == '/' {
			return 0, p.errorf(j, "self-closing tags are not part of the platform's HTML: write <%s>…</%s>", name, name)
		}
		at := j
		for j < len(s) && isNameByte(s[j]) {
			j++
		}
		if j == at {
			r, _ := utf8.DecodeRuneInString(s[at:])
			return 0, p.errorf(at, "%q where an attribute of <%s> was expected", r, name)
		}
		attr := s[at:j]
		value, valueAt, hasValue := "", -1, false
		k := j
		for k < len(s) && isSpace(s[k]) {
			k++
		}
		if k < len(s) && s[k] == '=' {
			k++
			for k < len(s) && isSpace(s[k]) {
				k++
			}
			if k >= len(s) {
				return 0, p.errorf(i, "the tag <%s> never ends: '>' is missing", name)
			}
			var err error
			valueAt, hasValue = k, true
			if value, j, err = p.attrValue(i, k, name); err != nil {
				return 0, err
			}
		}
		if err := p.setAttr(&a, t, name, attr, at, value, valueAt, hasValue); err != nil {
			return 0, err
		}
	}
	return j, p.openTag(t, i, &a)
}

// attrValue reads the attribute value at s[k], quoted or not, decoding references, and returns where it
// ends; i is the tag's '<'.
func (p *parser) attrValue(i, k int, tagName string) (string, int, error) {
	s := p.in
	if q := s[k]; q == '"' || q == '\'' {
		n := strings.IndexByte(s[k+1:], q)
		if n < 0 {
			return "", 0, p.errorf(i, "the tag <%s> never ends: a quoted value is never closed", tagName)
		}
		from, to := k+1, k+1+n
		if strings.IndexByte(s[from:to], '&') < 0 {
			return s[from:to], to + 1, nil
		}
		// Decoded values share one buffer, grown once for the rest of the markup (longer than what it
		// decodes to): one allocation for them all. A Builder never rewrites what it wrote, so the strings
		// cut from it stay valid.
		b := &p.values
		if b.Cap() == 0 {
			b.Grow(len(s) - from)
		}
		start := b.Len()
		for x := from; x < to; {
			if s[x] != '&' {
				b.WriteByte(s[x])
				x++
				continue
			}
			r, next, err := p.reference(x)
			if err != nil {
				return "", 0, err
			}
			b.WriteRune(r)
			x = next
		}
		return b.String()[start:], to + 1, nil
	}
	// An unquoted value is an HTML name token, as the platform reads it.
	end := k
	for end < len(s) && (isNameByte(s[end]) || s[end] == '.') {
		end++
	}
	if end == k || (end < len(s) && !isSpace(s[end]) && s[end] != '>' && s[end] != '/') {
		return "", 0, p.errorf(k, "an unquoted value holds only letters, digits, '.' and '-': quote it")
	}
	return s[k:end], end, nil
}

// setAttr records the attribute of tag t at byte at, refusing what t does not take.
func (p *parser) setAttr(a *attrs, t tag, tagName, attr string, at int, value string, valueAt int, hasValue bool) error {
	twice := false
	switch {
	case t == tagA && strings.EqualFold(attr, "href"):
		twice, a.href, a.hasHref, a.hrefAt = a.hasHref, value, true, valueAt
		if !hasValue {
			return p.errorf(at, "href needs a value: href=\"https://…\"")
		}
	case (t == tagSpan || t == tagCode) && strings.EqualFold(attr, "class"):
		twice, a.class, a.hasClass, a.classAt, a.classNamed = a.hasClass, value, true, valueAt, at
		if !hasValue {
			return p.errorf(at, "class needs a value")
		}
	case t == tagBlockquote && strings.EqualFold(attr, "expandable"):
		twice, a.expandable = a.expandable, true
		if value != "" {
			return p.errorf(at, "expandable takes no value: <blockquote expandable>")
		}
	default:
		return p.errorf(at, "the platform's HTML has no attribute %q on <%s>", attr, tagName)
	}
	if twice {
		return p.errorf(at, "the attribute %q is given twice", attr)
	}
	return nil
}

// openTag opens tag t whose '<' is at byte at.
func (p *parser) openTag(t tag, at int, a *attrs) error {
	if p.preEnd {
		return p.errorf(at, "after the code of a <pre>, only </pre> may follow")
	}
	if n := len(p.stack); n > 0 && p.stack[n-1].tag == tagPre {
		top := &p.stack[n-1]
		pre := &p.entities[top.entity]
		if t != tagCode || p.u16 != pre.Offset {
			return p.errorf(at, "<pre> holds text, or one <code class=\"language-…\"> around all its text, and no other tag")
		}
		// The code names the pre's language and makes no entity of its own.
		if a.hasClass {
			lang, ok := strings.CutPrefix(a.class, "language-")
			if !ok {
				return p.errorf(a.classAt, "the class of a code in a <pre> is \"language-…\", naming its programming language")
			}
			if why := checkLanguage(lang); why != "" {
				return p.errorf(a.classAt, "%s", why)
			}
			pre.Language = lang
		}
		p.stack = append(p.stack, openTag{tag: t, at: at, entity: entityLanguage, class: classUnknown, lastChild: -1})
		return nil
	}
	typ := tagTypes[t]
	switch {
	case t == tagCode && a.hasClass:
		return p.errorf(a.classNamed, "a language (class=\"language-…\") is given only to a code inside <pre>, the platform has none for inline code")
	case t == tagSpan && (!a.hasClass || a.class != "tg-spoiler"):
		return p.errorf(at, "<span> is the platform's spoiler only: <span class=\"tg-spoiler\">")
	case t == tagA && !a.hasHref:
		return p.errorf(at, "<a> needs an href: <a href=\"https://…\">")
	case t == tagA:
		if why := checkURL(a.href); why != "" {
			return p.errorf(a.hrefAt, "href: %s", why)
		}
	case t == tagBlockquote && a.expandable:
		typ = ExpandableBlockquote
	}
	c := classOf(typ)
	if blamed, why := nestingRule(c, &p.open); why != "" {
		return p.errorf(at, "<%s> inside <%s>: %s", tagNames[t], tagNames[p.innermost(blamed)], why)
	}
	// Identical spans make one entity (issue 35: the platform refuses more than MaxEntities, and 9,000
	// nested <b> are one bold). A formatting inside the same formatting adds nothing; a formatting, or a
	// link, that starts where its previous sibling of the same type (and URL) ended continues it. Only
	// siblings: merged, they hold what each held and sit inside what held both, so no two spans cross.
	// Code, pre and blockquotes side by side stay apart: the platform shows them as separate blocks.
	f := formatIndex(typ)
	if f >= 0 && p.openFormat[f] > 0 {
		p.stack = append(p.stack, openTag{tag: t, at: at, entity: entityMerged, class: classUnknown, lastChild: -1})
		return nil
	}
	index := -1
	if k := p.lastClosed(); *k >= 0 && (c == classFormatting || c == classLink) {
		prev := &p.entities[*k]
		if prev.Type == typ && prev.URL == a.href && prev.Offset+prev.Length == p.u16 {
			index = *k
		}
	}
	if index < 0 {
		p.entities = append(p.entities, Entity{Type: typ, Offset: p.u16, URL: a.href})
		p.entityAt = append(p.entityAt, at)
		index = len(p.entities) - 1
	}
	p.stack = append(p.stack, openTag{tag: t, at: at, entity: index, class: c, lastChild: -1})
	p.open[c]++
	if f >= 0 {
		p.openFormat[f]++
	}
	return nil
}

// lastClosed is where the entity last closed directly inside the innermost open tag (or at the top level)
// is kept: the one a tag opening now may continue.
func (p *parser) lastClosed() *int {
	if n := len(p.stack); n > 0 {
		return &p.stack[n-1].lastChild
	}
	return &p.lastTop
}

// innermost is the tag of the innermost open entity of class c.
func (p *parser) innermost(c class) tag {
	for i := len(p.stack) - 1; i >= 0; i-- {
		if p.stack[i].class == c {
			return p.stack[i].tag
		}
	}
	return tagUnknown
}

// endTag reads the end tag at s[i] == '<', s[i+1] == '/', closes the innermost open tag and returns where
// the end tag ends.
func (p *parser) endTag(i int) (int, error) {
	s := p.in
	j := i + 2
	for j < len(s) && isNameByte(s[j]) {
		j++
	}
	name := s[i+2 : j]
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	switch {
	case j >= len(s):
		return 0, p.errorf(i, "the end tag </%s never ends: '>' is missing", name)
	case name == "":
		return 0, p.errorf(i, "an end tag names its tag: </b>")
	case s[j] != '>':
		return 0, p.errorf(i, "an end tag has no attributes: </%s>", name)
	case len(p.stack) == 0:
		return 0, p.errorf(i, "</%s> closes nothing: nothing is open", name)
	}
	top := p.stack[len(p.stack)-1]
	if lookupTag(name) != top.tag {
		return 0, p.errorf(i, "</%s> does not close <%s>, opened at offset %d: tags close in the reverse order of opening",
			name, tagNames[top.tag], charOffset(s, top.at))
	}
	p.stack = p.stack[:len(p.stack)-1]
	switch {
	case top.entity == entityLanguage:
		p.preEnd = true
	case top.tag == tagPre:
		p.preEnd = false
	}
	if top.entity >= 0 {
		p.open[top.class]--
		ent := &p.entities[top.entity]
		if f := formatIndex(ent.Type); f >= 0 {
			p.openFormat[f]--
		}
		ent.Length = p.u16 - ent.Offset
		if ent.Length == 0 {
			// The platform drops an empty entity. Whatever opened inside it was empty too, and is gone
			// already: it is the last one. (An entity continued by a sibling is not empty.)
			p.entities = p.entities[:top.entity]
			p.entityAt = p.entityAt[:top.entity]
		} else {
			*p.lastClosed() = top.entity
		}
	}
	return j + 1, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isNameByte: tag and attribute names are letters, digits and '-' (tg-spoiler).
func isNameByte(c byte) bool { return isLetter(c) || isDigit(c) || c == '-' }

func digitValue(c byte, base int) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case base == 16 && 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case base == 16 && 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
