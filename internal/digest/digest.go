// Package digest composes the one message of a digest (spec v1-extensions §14): the texts of its items, in
// the order accepted, separated by a blank line, their formatting kept, under one brand line; what does not
// fit the platform's limits ends the message with "… and N more".
//
// An item is stored as every notification is, branded ("A message from <label>\n" then the text; its
// entities, if any, shifted past that line: internal/richtext.Brand), so the brand line is the body's first
// line — a label holds no newline. The digest keeps the first item's line and drops the others'.
package digest

import (
	"fmt"
	"strings"

	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/richtext"
)

// Limits of the send option digest.
const (
	MinWindowSeconds = 10
	MaxWindowSeconds = 86400
	MinItems         = 2
	MaxItems         = 50 // also the default of max_items
)

// KeyPattern is the rule of a digest key.
const KeyPattern = `^[A-Za-z0-9_.:-]{1,64}$`

// separator stands between two items' texts: a blank line.
const separator = "\n\n"

// Item is one item as stored: its branded body and its entities (offsets in the branded body).
type Item struct {
	Body     string
	Entities []richtext.Entity
}

// Message is the digest's message: its text and entities, and how many items' texts it holds (the
// others are counted in "… and N more").
type Message struct {
	Text     string
	Entities []richtext.Entity
	Shown    int
}

// more is the line that ends a message whose items did not all fit.
func more(n int) string { return separator + fmt.Sprintf("… and %d more", n) }

// Compose joins items (at least one) into one message of at most brand.MaxLength code points and
// richtext.MaxEntities entities. The first item is always shown: when it does not leave room for the
// overflow line, its text is cut (and its entities with it) so that the line fits.
func Compose(items []Item) Message {
	line, _ := split(items[0].Body)
	text := line
	length := brand.Length(line)
	var ents []richtext.Entity
	shown := 0
	for i, it := range items {
		_, body := split(it.Body)
		sep := ""
		if i > 0 {
			sep = separator
		}
		// Room for the overflow line whenever another item follows.
		reserve := 0
		if i < len(items)-1 {
			reserve = brand.Length(more(len(items) - i - 1))
		}
		fits := length+brand.Length(sep)+brand.Length(body)+reserve <= brand.MaxLength &&
			len(ents)+len(it.Entities) <= richtext.MaxEntities
		if !fits {
			if i > 0 {
				break
			}
			// The first item alone is longer than what the overflow line leaves: cut it.
			body = cut(body, brand.MaxLength-length-reserve)
		}
		at := richtext.UTF16Len(text + sep)
		shift := at - richtext.UTF16Len(it.Body[:len(it.Body)-len(bodyOf(it.Body))])
		limit := at + richtext.UTF16Len(body)
		for _, e := range it.Entities {
			e.Offset += shift
			if e.Offset >= limit {
				continue
			}
			if e.Offset+e.Length > limit {
				e.Length = limit - e.Offset
			}
			ents = append(ents, e)
		}
		text += sep + body
		length += brand.Length(sep) + brand.Length(body)
		shown++
		if !fits {
			break
		}
	}
	if rest := len(items) - shown; rest > 0 {
		text += more(rest)
	}
	return Message{Text: text, Entities: ents, Shown: shown}
}

// split cuts a branded body into its brand line (with its newline) and its text.
func split(body string) (line, text string) {
	i := strings.IndexByte(body, '\n')
	if i < 0 {
		return "", body
	}
	return body[:i+1], body[i+1:]
}

func bodyOf(body string) string { _, t := split(body); return t }

// cut keeps the first n code points of s (whole code points: s stays valid UTF-8).
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
