// Package brand renders the branded body every end-user message carries, and measures lengths the way
// the messaging platform does: in Unicode code points.
package brand

import (
	"strings"
	"unicode/utf8"
)

// MaxLength is the platform's limit for a message text, in characters (code points).
const MaxLength = 4096

// MaxMessageLength is the limit of a tenant's message before branding.
const MaxMessageLength = 4096

// Render returns "A message from <label>\n<message>".
func Render(label, message string) string {
	var b strings.Builder
	b.Grow(len("A message from \n") + len(label) + len(message))
	b.WriteString("A message from ")
	b.WriteString(label)
	b.WriteByte('\n')
	b.WriteString(message)
	return b.String()
}

// Length counts code points.
func Length(s string) int { return utf8.RuneCountInString(s) }

// Fits reports whether a rendered body is within the platform's limit.
func Fits(body string) bool { return Length(body) <= MaxLength }
