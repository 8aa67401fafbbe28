package template

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// LocaleSource is one locale of a template as the tenant gives it: the message and the optional link
// buttons, whose text and url are templates too.
type LocaleSource struct {
	Message string
	Buttons [][]ButtonSource
}

// ButtonSource is a link button's sources.
type ButtonSource struct{ Text, URL string }

// Button is a rendered link button.
type Button struct{ Text, URL string }

// Rendered is what a render of a locale made: the message (markup, for an html template) and the buttons.
type Rendered struct {
	Locale  string // the locale's tag as the template gives it
	Message string
	Buttons [][]Button
}

// InvalidError is a source that does not parse, naming where: the locale, the field (message, or a
// button's text or url) and the SyntaxError's line and column.
type InvalidError struct {
	Locale, Field string
	Err           *SyntaxError
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("locale %q, %s: %v", e.Locale, e.Field, e.Err)
}

// Set is a template version, parsed: its locales, ready to render.
type Set struct {
	HTML          bool
	DefaultLocale string
	// ReadsZone: a source uses the date filter, which renders in the user's time zone — so a send needs
	// its user's setting even when its locale is decided without the user.
	ReadsZone bool
	locales   map[string]*compiled // by normalised tag
}

type compiled struct {
	tag     string
	message *Template
	buttons [][][2]*Template // text, url
}

// invalid is a parse error of one field of a locale, as Compile reports it (Parse's errors are
// *SyntaxError).
func invalid(tag, field string, err error) *InvalidError {
	var se *SyntaxError
	if !errors.As(err, &se) {
		se = &SyntaxError{Msg: err.Error()}
	}
	return &InvalidError{Locale: tag, Field: field, Err: se}
}

// dateFilter finds a use of the date filter in a source; a text that only looks like one (in a raw block,
// a string) counts too: ReadsZone may be true of a template that needs no zone, never false of one that does.
var dateFilter = regexp.MustCompile(`\|\s*date\b`)

// Compile parses every locale's sources; the first that does not parse is an *InvalidError.
func Compile(html bool, defaultLocale string, locales map[string]LocaleSource) (*Set, error) {
	s := &Set{HTML: html, DefaultLocale: defaultLocale, locales: make(map[string]*compiled, len(locales))}
	for _, tag := range sortedKeys(locales) {
		src := locales[tag]
		s.ReadsZone = s.ReadsZone || dateFilter.MatchString(src.Message)
		for _, row := range src.Buttons {
			for _, b := range row {
				s.ReadsZone = s.ReadsZone || dateFilter.MatchString(b.Text) || dateFilter.MatchString(b.URL)
			}
		}
		c := &compiled{tag: tag}
		var err error
		if c.message, err = Parse(src.Message); err != nil {
			return nil, invalid(tag, "message", err)
		}
		for i, row := range src.Buttons {
			c.buttons = append(c.buttons, make([][2]*Template, len(row)))
			for j, b := range row {
				for k, field := range []string{b.Text, b.URL} {
					t, err := Parse(field)
					if err != nil {
						name := [2]string{"text", "url"}[k]
						return nil, invalid(tag, fmt.Sprintf("the %s of button %d of row %d", name, j, i), err)
					}
					c.buttons[i][j][k] = t
				}
			}
		}
		s.locales[NormalizeTag(tag)] = c
	}
	return s, nil
}

func sortedKeys(m map[string]LocaleSource) []string {
	// Sorted, so that the error of a template with two bad locales is always the same one.
	return slices.Sorted(maps.Keys(m))
}

// NormalizeTag is a locale tag as tags are compared (§12): lower case, "_" read as "-".
func NormalizeTag(tag string) string {
	return strings.ReplaceAll(strings.ToLower(tag), "_", "-")
}

// Choose picks the locale for the candidates in order (§12: the send's, the tenant's setting for the user,
// the messenger's report, then the template's default_locale): each tried exactly, then by its primary
// language (pt-br → pt); "" candidates are skipped. It returns the template's tag.
func (s *Set) Choose(candidates ...string) string {
	for _, c := range candidates {
		if tag, ok := s.Match(c); ok {
			return tag
		}
	}
	return s.DefaultLocale
}

// Match finds the template's locale for one candidate: exactly, then by its primary language; "" matches
// nothing.
func (s *Set) Match(candidate string) (string, bool) {
	if candidate == "" {
		return "", false
	}
	n := NormalizeTag(candidate)
	if l, ok := s.locales[n]; ok {
		return l.tag, true
	}
	if i := strings.IndexByte(n, '-'); i > 0 {
		if l, ok := s.locales[n[:i]]; ok {
			return l.tag, true
		}
	}
	return "", false
}

// Locales is the number of locales: one locale needs no user's locale to choose.
func (s *Set) Locales() int { return len(s.locales) }

// Render renders a locale (a tag Choose returned) with data (a map[string]any or an *Object, as
// Template.Render): the message, then the buttons, sharing one time bound; the missing paths of all of them
// are reported at once.
func (s *Set) Render(locale string, data any, opts Options) (Rendered, error) {
	c, ok := s.locales[NormalizeTag(locale)]
	if !ok {
		return Rendered{}, fmt.Errorf("template: no locale %q", locale)
	}
	opts.HTML = s.HTML
	r := newRenderer(data, opts)
	defer r.release()
	out := Rendered{Locale: c.tag}
	var err error
	if out.Message, err = r.render(c.message); err != nil {
		return Rendered{}, err
	}
	// Buttons are not markup: their text and url are inserted as they are (the platform takes them as text).
	r.opts.HTML = false
	for _, row := range c.buttons {
		rendered := make([]Button, len(row))
		for j, b := range row {
			if rendered[j].Text, err = r.render(b[0]); err != nil {
				return Rendered{}, err
			}
			if rendered[j].URL, err = r.render(b[1]); err != nil {
				return Rendered{}, err
			}
		}
		out.Buttons = append(out.Buttons, rendered)
	}
	if len(r.missing) > 0 {
		return Rendered{}, &MissingError{Paths: r.missing}
	}
	return out, nil
}

// renderers are renderers done with, to be reused: their output buffer and stacks keep their capacity.
var renderers = sync.Pool{New: func() any { return new(renderer) }}

// maxPooledOutput: a renderer whose output buffer grew past this is not kept (one large render should not
// hold its memory for good).
const maxPooledOutput = 16 << 10

func newRenderer(data any, opts Options) *renderer {
	r := renderers.Get().(*renderer)
	r.opts, r.data, r.started = opts, data, time.Now()
	if r.opts.Now.IsZero() {
		r.opts.Now = r.started
	}
	if r.opts.Location == nil {
		r.opts.Location = time.UTC
	}
	return r
}

// release returns r to the pool, holding nothing of its render: the missing paths belong to the
// MissingError made of them.
func (r *renderer) release() {
	if cap(r.out) > maxPooledOutput {
		return
	}
	clear(r.loops[:cap(r.loops)])
	*r = renderer{out: r.out[:0], args: r.args[:0], loops: r.loops[:0]}
	renderers.Put(r)
}

// render renders one source, its variables its own; the missing paths accumulate.
func (r *renderer) render(t *Template) (string, error) {
	r.vars = nil
	r.out = r.out[:0]
	if err := r.nodes(&r.out, t.nodes); err != nil {
		return "", err
	}
	return string(r.out), nil
}
