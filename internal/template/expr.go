package template

import (
	"encoding/json"
	"strconv"
	"strings"
)

// expr is a value: a literal, a path into the data (or a variable), or a range.
type expr interface{}

type literal struct{ v any }

// path is a dotted path: its first name, then steps (a name or an index expression).
type path struct {
	src   string // as written, for the messages: order.items[0].name
	first string
	steps []step
}

type step struct {
	name  string // .name
	index expr   // [expr]
}

type rangeExpr struct{ from, to expr }

// filtered is a value through filters.
type filtered struct {
	base    expr
	filters []filterCall
}

type filterCall struct {
	name string
	fn   filterFunc
	args []expr
}

// cond is a test: a comparison, and/or, not (unless), or a value's truth.
type cond interface{}

type truthCond struct{ e expr }
type notCond struct{ c cond }
type andCond struct{ a, b cond }
type orCond struct{ a, b cond }
type cmpCond struct {
	op   string
	a, b expr
}

// lexeme is a token of an expression.
type lexeme struct {
	kind byte // 'i' identifier, 's' string, 'n' number, 'p' punctuation or operator, 0 end
	text string
	pos  int // byte offset in the whole source
}

type exprParser struct {
	src  string
	toks []lexeme
	i    int
	end  int
}

func newExprParser(src, s string, base int) (*exprParser, error) {
	var toks []lexeme
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, syntaxAt(src, base+i, "a string is not closed")
			}
			toks = append(toks, lexeme{'s', s[i+1 : i+1+j], base + i})
			i += j + 2
		case c >= '0' && c <= '9' || c == '-' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i + 1
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' && !(j+1 < len(s) && s[j+1] == '.')) {
				j++
			}
			toks = append(toks, lexeme{'n', s[i:j], base + i})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] == '-' || s[j] == '?' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, lexeme{'i', s[i:j], base + i})
			i = j
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<>", "<=", ">=", "..", "<", ">", ".", "[", "]", "|", ":", ",", "(", ")"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, syntaxAt(src, base+i, "unexpected %q", string(c))
			}
			toks = append(toks, lexeme{'p', op, base + i})
			i += len(op)
		}
	}
	return &exprParser{src: src, toks: toks, end: base + len(s)}, nil
}

func (p *exprParser) peek() lexeme {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return lexeme{pos: p.end}
}

func (p *exprParser) next() lexeme { t := p.peek(); p.i++; return t }

func (p *exprParser) accept(text string) bool {
	if t := p.peek(); t.kind == 'p' && t.text == text {
		p.i++
		return true
	}
	return false
}

func (p *exprParser) errf(format string, args ...any) error {
	return syntaxAt(p.src, p.peek().pos, format, args...)
}

func (p *exprParser) done() error {
	if t := p.peek(); t.kind != 0 {
		return syntaxAt(p.src, t.pos, "unexpected %q", t.text)
	}
	return nil
}

// parseExpr parses a lone value (s is at byte offset base of src).
func parseExpr(src, s string, base int) (expr, error) {
	return parseWhole(src, s, base, (*exprParser).value)
}

// parseWhole parses s (at byte offset base of src) with parse, which must read all of it.
func parseWhole[T any](src, s string, base int, parse func(*exprParser) (T, error)) (T, error) {
	var none T
	p, err := newExprParser(src, s, base)
	if err != nil {
		return none, err
	}
	v, err := parse(p)
	if err != nil {
		return none, err
	}
	return v, p.done()
}

// parseFiltered parses a value and its filters: an output's, assign's, case's.
func parseFiltered(src, s string, base int) (*filtered, error) {
	return parseWhole(src, s, base, (*exprParser).filtered)
}

func (p *exprParser) filtered() (*filtered, error) {
	base, err := p.value()
	if err != nil {
		return nil, err
	}
	f := &filtered{base: base}
	for p.accept("|") {
		t := p.next()
		if t.kind != 'i' {
			return nil, syntaxAt(p.src, t.pos, "a filter name must follow |")
		}
		fn, ok := filters[t.text]
		if !ok {
			return nil, syntaxAt(p.src, t.pos, "unknown filter %q", t.text)
		}
		call := filterCall{name: t.text, fn: fn}
		if p.accept(":") {
			for {
				a, err := p.value()
				if err != nil {
					return nil, err
				}
				call.args = append(call.args, a)
				if !p.accept(",") {
					break
				}
			}
		}
		f.filters = append(f.filters, call)
	}
	return f, nil
}

func (p *exprParser) value() (expr, error) {
	t := p.peek()
	switch t.kind {
	case 's':
		p.i++
		return literal{t.text}, nil
	case 'n':
		p.i++
		if _, err := strconv.ParseFloat(t.text, 64); err != nil {
			return nil, syntaxAt(p.src, t.pos, "%q is not a number", t.text)
		}
		return literal{json.Number(t.text)}, nil
	case 'p':
		if t.text == "(" {
			p.i++
			from, err := p.value()
			if err != nil {
				return nil, err
			}
			if !p.accept("..") {
				return nil, p.errf("a range is (from..to)")
			}
			to, err := p.value()
			if err != nil {
				return nil, err
			}
			if !p.accept(")") {
				return nil, p.errf("a range is (from..to)")
			}
			return rangeExpr{from, to}, nil
		}
		return nil, syntaxAt(p.src, t.pos, "unexpected %q", t.text)
	case 'i':
		p.i++
		switch t.text {
		case "true":
			return literal{true}, nil
		case "false":
			return literal{false}, nil
		case "nil", "null":
			return literal{nil}, nil
		}
		pa := &path{first: t.text}
		start, end := t.pos, t.pos+len(t.text)
		for {
			if p.accept(".") {
				n := p.next()
				if n.kind != 'i' {
					return nil, syntaxAt(p.src, n.pos, "a name must follow .")
				}
				pa.steps = append(pa.steps, step{name: n.text})
				end = n.pos + len(n.text)
				continue
			}
			if p.accept("[") {
				ix, err := p.value()
				if err != nil {
					return nil, err
				}
				c := p.peek()
				if !p.accept("]") {
					return nil, p.errf("[ is not closed with ]")
				}
				pa.steps = append(pa.steps, step{index: ix})
				end = c.pos + 1
				continue
			}
			break
		}
		pa.src = p.src[start:end]
		return pa, nil
	}
	return nil, p.errf("a value is missing")
}

// parseCondition parses a test: comparisons joined by and/or (right to left, as Liquid reads them).
func parseCondition(src, s string, base int) (cond, error) {
	return parseWhole(src, s, base, (*exprParser).condition)
}

func (p *exprParser) condition() (cond, error) {
	a, err := p.comparison()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == 'i' && (t.text == "and" || t.text == "or") {
		p.i++
		b, err := p.condition()
		if err != nil {
			return nil, err
		}
		if t.text == "and" {
			return andCond{a, b}, nil
		}
		return orCond{a, b}, nil
	}
	return a, nil
}

func (p *exprParser) comparison() (cond, error) {
	a, err := p.value()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	op := ""
	switch {
	case t.kind == 'p' && comparisonOps[t.text]:
		op = t.text
	case t.kind == 'i' && t.text == "contains":
		op = "contains"
	}
	if op == "" {
		return truthCond{a}, nil
	}
	p.i++
	b, err := p.value()
	if err != nil {
		return nil, err
	}
	if op == "<>" {
		op = "!="
	}
	return cmpCond{op, a, b}, nil
}

var comparisonOps = map[string]bool{"==": true, "!=": true, "<>": true, "<": true, ">": true, "<=": true, ">=": true}
