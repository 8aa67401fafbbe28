// Package template is the template language of spec v1-extensions §12: a subset of Liquid, parsed once
// when a tenant saves a template and rendered at each send. It is Herald's own, small interpreter rather
// than a general Liquid library because the contract needs what those do not give: a syntax error's column,
// every missing path of a render at once, null told apart from absent, a bound on render time and output,
// outputs escaped in html templates, and no tag that reads anything but the data (docs/templates.md).
//
// The language: outputs {{ path | filter: arg }} (dotted paths, [n] and ["key"] indexes, .size, .first,
// .last), the filters of filters.go, and the tags if/elsif/else, unless, case/when, for (limit, offset,
// reversed, else), assign, capture, raw, comment; whitespace control with {{- -}} and {%- -%}.
package template

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a template that does not parse: where (line and column, from 1, columns in characters)
// and why.
type SyntaxError struct {
	Line, Column int
	Msg          string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// Template is one parsed source (a locale's message, or a button's text or url).
type Template struct {
	nodes []node
}

// Parse parses a template's source.
func Parse(src string) (*Template, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	nodes, end, err := p.block(nil)
	if err != nil {
		return nil, err
	}
	if end != nil {
		return nil, p.errAt(end.pos, "unexpected {%% %s %%}", end.name)
	}
	return &Template{nodes: nodes}, nil
}

// token kinds
const (
	tText = iota
	tOutput
	tTag
)

type token struct {
	kind int
	text string // tText: the text; tOutput: the expression; tTag: the arguments
	name string // tTag
	pos  int    // byte offset in the source of the token's content (for errors)
}

// lex splits the source into text, outputs and tags, applying whitespace control, and takes raw and
// comment blocks' contents as they are.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	trimNext := false
	for i < len(src) {
		j := nextDelim(src, i)
		text := src[i:j]
		if trimNext {
			text = strings.TrimLeft(text, " \t\r\n")
			trimNext = false
		}
		if j == len(src) {
			if text != "" {
				toks = append(toks, token{kind: tText, text: text, pos: i})
			}
			break
		}
		isTag := src[j+1] == '%'
		start := j + 2
		if start < len(src) && src[start] == '-' {
			text = strings.TrimRight(text, " \t\r\n")
			start++
		}
		if text != "" {
			toks = append(toks, token{kind: tText, text: text, pos: i})
		}
		closer := "}}"
		if isTag {
			closer = "%}"
		}
		k := closerIndex(src[start:], closer)
		if k < 0 {
			return nil, syntaxAt(src, j, "%s is not closed with %s", src[j:j+2], closer)
		}
		end := start + k
		inner := src[start:end]
		if strings.HasSuffix(inner, "-") {
			inner = inner[:len(inner)-1]
			trimNext = true
		}
		i = end + 2
		if !isTag {
			toks = append(toks, token{kind: tOutput, text: inner, pos: start})
			continue
		}
		body := strings.TrimLeft(inner, " \t\r\n")
		pos := start + len(inner) - len(body)
		name, args := body, ""
		if n := strings.IndexAny(body, " \t\r\n"); n >= 0 {
			name, args = body[:n], body[n:]
		}
		args = strings.TrimSpace(args)
		if name == "" {
			return nil, syntaxAt(src, j, "a tag without a name")
		}
		if name == "raw" || name == "comment" {
			// The content up to the closing tag is text (raw) or nothing (comment), whatever it holds.
			closeAt, after, ok := findEndTag(src, i, "end"+name)
			if !ok {
				return nil, syntaxAt(src, pos, "{%% %s %%} is not closed with {%% end%s %%}", name, name)
			}
			if name == "raw" && closeAt > i {
				toks = append(toks, token{kind: tText, text: src[i:closeAt], pos: i})
			}
			i = after
			continue
		}
		toks = append(toks, token{kind: tTag, name: name, text: args, pos: pos})
	}
	return toks, nil
}

// closerIndex is the offset in s of the first closer outside a quoted string ('…' or "…": Liquid's strings
// have no escapes), so that {{ "}}" }} outputs "}}"; -1 if none. A quote left open is looked past: the
// expression's parser then names it.
func closerIndex(s, closer string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'' || c == '"':
			if k := strings.IndexByte(s[i+1:], c); k >= 0 {
				i += k + 1
				continue
			}
			if k := strings.Index(s[i:], closer); k >= 0 {
				return i + k
			}
			return -1
		case strings.HasPrefix(s[i:], closer):
			return i
		}
	}
	return -1
}

// nextDelim is the offset of the next "{{" or "{%" at or after i (len(src) if none).
func nextDelim(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return len(src)
		}
		if c := src[i+k+1]; c == '{' || c == '%' {
			return i + k
		}
		i += k + 1
	}
}

// findEndTag finds {% name %} (with optional whitespace control) from i: the offset where it starts and
// the one after it.
func findEndTag(src string, i int, name string) (int, int, bool) {
	for {
		k := strings.Index(src[i:], "{%")
		if k < 0 {
			return 0, 0, false
		}
		at := i + k
		rest := src[at+2:]
		end := strings.Index(rest, "%}")
		if end < 0 {
			return 0, 0, false
		}
		inner := strings.Trim(rest[:end], "- \t\r\n")
		if inner == name {
			return at, at + 2 + end + 2, true
		}
		i = at + 2
	}
}

// syntaxAt makes a SyntaxError at the byte offset pos of src.
func syntaxAt(src string, pos int, format string, args ...any) *SyntaxError {
	if pos > len(src) {
		pos = len(src)
	}
	before := src[:pos]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return &SyntaxError{Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return syntaxAt(p.src, pos, format, args...)
}

// block parses nodes until a tag in ends (returned) or the end of the source (nil end; an error when ends
// is not empty).
func (p *parser) block(ends []string) ([]node, *token, error) {
	var nodes []node
	for p.i < len(p.toks) {
		t := p.toks[p.i]
		p.i++
		switch t.kind {
		case tText:
			nodes = append(nodes, textNode(t.text))
		case tOutput:
			e, err := parseFiltered(p.src, t.text, t.pos)
			if err != nil {
				return nil, nil, err
			}
			nodes = append(nodes, &outputNode{expr: e, src: strings.TrimSpace(t.text)})
		case tTag:
			for _, end := range ends {
				if t.name == end {
					return nodes, &t, nil
				}
			}
			n, err := p.tag(t)
			if err != nil {
				return nil, nil, err
			}
			if n != nil {
				nodes = append(nodes, n)
			}
		}
	}
	if len(ends) > 0 {
		return nil, nil, p.errAt(len(p.src), "the template ends before {%% %s %%}", ends[len(ends)-1])
	}
	return nodes, nil, nil
}

// tag parses one tag (a block with its body).
func (p *parser) tag(t token) (node, error) {
	switch t.name {
	case "if", "unless":
		return p.ifTag(t)
	case "case":
		return p.caseTag(t)
	case "for":
		return p.forTag(t)
	case "assign":
		eq := strings.IndexByte(t.text, '=')
		if eq < 0 {
			return nil, p.errAt(t.pos, "assign must be {%% assign name = value %%}")
		}
		name := strings.TrimSpace(t.text[:eq])
		if !isIdent(name) {
			return nil, p.errAt(t.pos, "assign: %q is not a variable name", name)
		}
		e, err := parseFiltered(p.src, t.text[eq+1:], t.pos+len(t.name)+1+eq+1)
		if err != nil {
			return nil, err
		}
		return &assignNode{name: name, expr: e}, nil
	case "capture":
		name := strings.TrimSpace(t.text)
		if !isIdent(name) {
			return nil, p.errAt(t.pos, "capture needs a variable name")
		}
		body, _, err := p.block([]string{"endcapture"})
		if err != nil {
			return nil, err
		}
		return &captureNode{name: name, body: body}, nil
	case "include", "render", "layout", "section":
		return nil, p.errAt(t.pos, "{%% %s %%} is not available: a template reads nothing but its data", t.name)
	case "endif", "endunless", "endcase", "endfor", "endcapture", "else", "elsif", "when":
		return nil, p.errAt(t.pos, "unexpected {%% %s %%}", t.name)
	}
	return nil, p.errAt(t.pos, "unknown tag %q", t.name)
}

func (p *parser) ifTag(t token) (node, error) {
	n := &ifNode{}
	end := "end" + t.name
	cur := t
	for {
		var c cond
		if cur.name != "else" {
			var err error
			if c, err = parseCondition(p.src, cur.text, cur.pos+len(cur.name)+1); err != nil {
				return nil, err
			}
			if cur.name == "unless" {
				c = notCond{c}
			}
		}
		body, stop, err := p.block([]string{"elsif", "else", end})
		if err != nil {
			return nil, err
		}
		n.branches = append(n.branches, branch{cond: c, body: body})
		if stop.name == end {
			return n, nil
		}
		if cur.name == "else" {
			return nil, p.errAt(stop.pos, "{%% %s %%} after {%% else %%}", stop.name)
		}
		if stop.name == "elsif" && t.name == "unless" {
			return nil, p.errAt(stop.pos, "unless takes no elsif")
		}
		cur = *stop
	}
}

func (p *parser) caseTag(t token) (node, error) {
	subject, err := parseFiltered(p.src, t.text, t.pos+5)
	if err != nil {
		return nil, err
	}
	n := &caseNode{subject: subject}
	// Text before the first when is ignored, as in Liquid.
	_, stop, err := p.block([]string{"when", "else", "endcase"})
	if err != nil {
		return nil, err
	}
	for stop.name != "endcase" {
		cur := *stop
		body, next, err := p.block([]string{"when", "else", "endcase"})
		if err != nil {
			return nil, err
		}
		if cur.name == "else" {
			n.elseBody = body
			if next.name != "endcase" {
				return nil, p.errAt(next.pos, "{%% %s %%} after {%% else %%}", next.name)
			}
		} else {
			var values []expr
			for _, part := range splitWhen(cur.text) {
				e, err := parseExpr(p.src, part.text, cur.pos+5+part.off)
				if err != nil {
					return nil, err
				}
				values = append(values, e)
			}
			if len(values) == 0 {
				return nil, p.errAt(cur.pos, "when needs a value")
			}
			n.whens = append(n.whens, when{values: values, body: body})
		}
		stop = next
	}
	return n, nil
}

type part struct {
	text string
	off  int
}

// splitWhen splits "a, b or c" into its values (outside quotes).
func splitWhen(s string) []part {
	var out []part
	start, quote := 0, byte(0)
	flush := func(end int) {
		if t := strings.TrimSpace(s[start:end]); t != "" {
			out = append(out, part{t, start})
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			flush(i)
			start = i + 1
		case strings.HasPrefix(s[i:], " or "):
			flush(i)
			start = i + 4
			i += 3
		}
	}
	flush(len(s))
	return out
}

func (p *parser) forTag(t token) (node, error) {
	fields := strings.Fields(t.text)
	if len(fields) < 3 || fields[1] != "in" || !isIdent(fields[0]) {
		return nil, p.errAt(t.pos, "for must be {%% for item in collection %%}")
	}
	n := &forNode{name: fields[0]}
	// The collection, then the options: limit: n, offset: n, reversed.
	rest := t.text[strings.Index(t.text, " in ")+4:]
	restPos := t.pos + 4 + strings.Index(t.text, " in ") + 4
	coll := rest
	opts := ""
	if k := indexOption(rest); k >= 0 {
		coll, opts = rest[:k], rest[k:]
	}
	var err error
	if n.coll, err = parseExpr(p.src, coll, restPos); err != nil {
		return nil, err
	}
	optFields := strings.Fields(strings.ReplaceAll(opts, ":", " : "))
	for i := 0; i < len(optFields); i++ {
		switch optFields[i] {
		case "reversed":
			n.reversed = true
		case "limit", "offset":
			if i+2 >= len(optFields) || optFields[i+1] != ":" {
				return nil, p.errAt(t.pos, "for: %s needs a value (%s: 3)", optFields[i], optFields[i])
			}
			e, err := parseExpr(p.src, optFields[i+2], t.pos)
			if err != nil {
				return nil, err
			}
			if optFields[i] == "limit" {
				n.limit = e
			} else {
				n.offset = e
			}
			i += 2
		default:
			return nil, p.errAt(t.pos, "for: unknown option %q", optFields[i])
		}
	}
	if n.body, err = p.loopBody(&n.elseBody); err != nil {
		return nil, err
	}
	return n, nil
}

func (p *parser) loopBody(elseBody *[]node) ([]node, error) {
	body, stop, err := p.block([]string{"else", "endfor"})
	if err != nil {
		return nil, err
	}
	if stop.name == "else" {
		if *elseBody, _, err = p.block([]string{"endfor"}); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// indexOption is the offset of the first for option (limit, offset, reversed) in s, outside quotes; -1.
func indexOption(s string) int {
	best := -1
	for _, o := range []string{" limit", " offset", " reversed"} {
		if k := strings.Index(s, o); k >= 0 && (best < 0 || k < best) {
			best = k
		}
	}
	return best
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r >= '0' && r <= '9' || r == '-')) {
			return false
		}
	}
	return true
}
