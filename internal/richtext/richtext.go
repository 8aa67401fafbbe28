// Package richtext turns a tenant's message in the messaging platform's HTML subset (spec v1-extensions
// §10) into what sendMessage takes without parse_mode: the visible text and its entities, offsets in
// UTF-16 code units. Herald parses at the door and sends text + entities, so what it validated is byte for
// byte what the platform receives, and the brand line is a plain prefix whose length shifts the entities:
// nothing a tenant writes can close or restyle it.
//
// ParseHTML parses; Message.Length counts as the platform counts its limit; Brand puts the brand line
// before a parsed message and says whether it fits; RenderHTML renders text and entities back to escaped
// HTML (the console, the simulator's transcript); Validate checks text and entities as the platform would
// take them (the simulator); EncodeEntities and DecodeEntities are the entities' compact form, which the
// store keeps between the door and the worker (compact.go).
//
// The rules, and where they come from (the Bot API's "Formatting options" and MessageEntity; for what the
// documentation leaves open, tdlib, which the Bot API server runs: td/telegram/MessageEntity.cpp
// parse_html, fix_formatted_text, are_entities_valid; td/telegram/LinkManager.cpp check_link;
// tdutils/td/utils/HttpUrl.cpp parse_url; td/telegram/MessageContent.cpp, the length check):
//
//   - Tags: b, strong, i, em, u, ins, s, strike, del, span class="tg-spoiler", tg-spoiler, a href, code,
//     pre (optionally holding one code class="language-…" that spans all its text: the pre's language),
//     blockquote (optionally expandable); <pre><code>…</code></pre> without a class is a pre. Tag and
//     attribute names are ASCII case-insensitive, as in HTML and tdlib; a value is quoted ("…" or '…') or
//     a name token (letters, digits, '.', '-'), and exact. Anything else is refused: another tag, an attribute a tag
//     does not take (the platform ignores unknown attributes; Herald refuses them, so that nothing a
//     tenant wrote is silently dropped), a self-closing tag, an end tag that does not close the innermost
//     open tag, a tag never closed, a language on a code outside pre ("Programming language can't be
//     specified for standalone code tags").
//   - Character references: &lt; &gt; &amp; &quot; and numeric ones, decimal (&#65;) or hex (&#x41;),
//     each ended by ';', naming a Unicode scalar value (not 0, not a surrogate). "All <, > and & symbols
//     that are not a part of a tag or an HTML entity must be replaced with the corresponding HTML
//     entities": a bare '&', '<' or '>' in text is refused (the platform is lenient about these; Herald
//     follows the documented rule, so that a tenant's text means one thing).
//   - Links: http:, https: or tg: only (§10), checked to be URLs the platform takes in a text_link entity
//     (it refuses the whole message otherwise): a host with a dot and no user@, a port 1-65535, no spaces
//     or control characters; an internationalised host (Unicode or xn--) mapped with IDNA (UTS 46) and
//     checked as a user sees it: letters and digits only (no look-alike of '@' or '/'), one script
//     (checkInternationalHost); a tg: link names a host of letters, digits, '_' or '-'. A tg://user link (a
//     mention by user id) is refused: the platform accepts it only for a user the bot has met, which a
//     tenant cannot know, and refuses the message otherwise.
//   - Nesting ("Message entities can be nested, providing following restrictions are met"): two entities
//     either do not overlap or one holds the other (HTML nesting gives that); bold, italic, underline,
//     strikethrough and spoiler may hold and be held by anything but code and pre; code and pre hold
//     nothing and may be held only by a blockquote; a link holds no link, code, pre or blockquote; a
//     blockquote holds no blockquote. The same formatting twice (b in b) is allowed, and makes one entity:
//     ParseHTML merges a formatting inside the same formatting, and siblings of the same formatting (or
//     links to the same URL) that touch, so that what the user sees stays and the count is the smallest
//     (code, pre and blockquotes side by side stay apart: they are separate blocks). Where an entity would break these rules the platform does not refuse: it drops or splits
//     entities (tdlib fix_entities). Herald refuses instead, so a formatting it accepted is never lost.
//   - Newlines: the platform's HTML has none of its own rules (no <br>; a newline is a newline). It trims
//     leading and trailing spaces and newlines and deletes '\r' (tdlib fix_formatted_text,
//     clean_input_string_with_entities), shifting the entities; that only shortens the text, so Herald
//     counts and validates the text as sent.
//   - An element with no text (<b></b>) gives no entity: the platform drops empty entities.
//   - Entities: at most MaxEntities (100) once merged; the platform refuses more ("entities too long").
//     Its documentation gives no number: see MaxEntities and docs/api.md.
//   - Length: "1-4096 characters after entities parsing", counted by the platform in Unicode code points
//     (tdlib checks utf8_length of the parsed text against message_text_length_max), which is how
//     internal/brand counts: Length uses it.
//
// Errors name the offset in the markup in characters (Unicode code points, from 0), the unit the API uses
// for every length, so a client can point at it in the string it sent; the platform's own parser names
// bytes, which a JSON client cannot see.
package richtext

import (
	"cmp"
	"slices"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/brand"
)

// Entity types, the Bot API's MessageEntity.type values Herald produces.
const (
	Bold                 = "bold"
	Italic               = "italic"
	Underline            = "underline"
	Strikethrough        = "strikethrough"
	Spoiler              = "spoiler"
	TextLink             = "text_link"
	Code                 = "code"
	Pre                  = "pre"
	Blockquote           = "blockquote"
	ExpandableBlockquote = "expandable_blockquote"
)

// Entity is one MessageEntity as sendMessage takes it: Offset and Length in UTF-16 code units of the text.
type Entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`      // text_link only
	Language string `json:"language,omitempty"` // pre only, optional
}

// Message is a visible text and its entities, in canonical order (see Sort).
type Message struct {
	Text     string   `json:"text"`
	Entities []Entity `json:"entities,omitempty"`
}

// Length counts the visible text as the platform counts its limit: in code points.
func (m Message) Length() int { return brand.Length(m.Text) }

// UTF16Len is the length of s in UTF-16 code units, the unit of entity offsets. s must be valid UTF-8.
func UTF16Len(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c&0xC0 != 0x80 { // a leading byte: one code unit, two for a 4-byte sequence (a surrogate pair)
			n++
			if c >= 0xF0 {
				n++
			}
		}
	}
	return n
}

// class groups the entity types by the nesting rules they follow.
type class uint8

const (
	classBlockquote class = iota
	classFormatting
	classLink
	classCode // code and pre
	classCount
	classUnknown = classCount
)

func classOf(typ string) class {
	switch typ {
	case Bold, Italic, Underline, Strikethrough, Spoiler:
		return classFormatting
	case TextLink:
		return classLink
	case Code, Pre:
		return classCode
	case Blockquote, ExpandableBlockquote:
		return classBlockquote
	}
	return classUnknown
}

// nestingRule says why an entity of class child cannot sit where the open entities of each class number
// open, and which class of them is in the way; "" when it can. The one place for the platform's nesting
// rules: ParseHTML and Validate use it.
func nestingRule(child class, open *[classCount]int) (class, string) {
	const codeInside = "code and pre may be inside a blockquote only, not inside other formatting or a link"
	switch {
	case open[classCode] > 0:
		return classCode, "code and pre hold no other formatting"
	case child == classCode && open[classFormatting] > 0:
		return classFormatting, codeInside
	case child == classCode && open[classLink] > 0:
		return classLink, codeInside
	case child == classLink && open[classLink] > 0:
		return classLink, "a link cannot be inside a link"
	case child == classBlockquote && open[classLink] > 0:
		return classLink, "a blockquote cannot be inside a link"
	case child == classBlockquote && open[classBlockquote] > 0:
		return classBlockquote, "a blockquote cannot be inside a blockquote"
	}
	return 0, ""
}

// compare orders entities canonically: by offset, the longer first, and for the same span the one that
// may hold the others first (blockquote, formatting, link, code/pre), so that the order is also a valid
// nesting whenever one exists.
func compare(a, b Entity) int {
	if c := cmp.Compare(a.Offset, b.Offset); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Length, a.Length); c != 0 {
		return c
	}
	return cmp.Compare(classOf(a.Type), classOf(b.Type))
}

// Sort puts entities in canonical order (stable: the same span and class keep their order), the order
// ParseHTML returns and RenderHTML nests by.
func Sort(entities []Entity) { slices.SortStableFunc(entities, compare) }

// sorted returns entities in canonical order, copying them only when they are not.
func sorted(entities []Entity) []Entity {
	if slices.IsSortedFunc(entities, compare) {
		return entities
	}
	c := slices.Clone(entities)
	Sort(c)
	return c
}

// charOffset converts a byte offset in s to code points.
func charOffset(s string, byteOffset int) int { return utf8.RuneCountInString(s[:byteOffset]) }
