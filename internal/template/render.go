package template

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The bounds of one render (§12): past them, a render fails with a RenderError naming the limit.
const (
	MaxRenderTime   = 10 * time.Millisecond
	MaxRenderOutput = 64 << 10 // bytes
	// MaxLoopIterations bounds a loop over a range, whatever the clock says (a range holds no data).
	maxRangeLength = 100_000
)

// MissingError lists every path an output (or a for) read that the data does not hold, each once, in the
// order met.
type MissingError struct{ Paths []string }

func (e *MissingError) Error() string {
	return "the data misses " + strings.Join(e.Paths, ", ")
}

// RenderError is a render that cannot finish: an object or array in an output, a value a filter cannot
// take, or a bound passed.
type RenderError struct{ Msg string }

func (e *RenderError) Error() string { return e.Msg }

// Options are a render's settings.
type Options struct {
	// HTML escapes every output (& < > "), so data never adds markup (the html format of §12).
	HTML bool
	// Location is the time zone of the date filter (nil: UTC).
	Location *time.Location
	// Now is the time of "now" in the date filter (zero: the clock).
	Now time.Time
}

// absent is the value of a path the data does not hold: falsy in a test, missing in an output.
type absent struct{ path string }

// renderer holds one render's state. Renderers are reused (renderers, set.go): a templated send renders at
// every acceptance, and what a render allocates is the door's CPU twice, once to make and once to collect.
type renderer struct {
	opts    Options
	data    any            // map[string]any, *Object or nil
	vars    map[string]any // what assign and capture set (made at the first)
	loops   []loopScope    // the open for loops, innermost last
	missing []string
	started time.Time
	steps   int
	out     []byte // the output, reused from render to render
	args    []any  // the filters' arguments, a stack
}

// loopScope is an open for loop's variables: its item and forloop (built only when a path reads it).
type loopScope struct {
	name string
	item any
	loop forloop
}

// Render renders t with data (decoded JSON: map[string]any or *Object, []any, string, json.Number or
// float64, bool, nil; the whole data an object, or nil). Missing data is reported for every path at once (*MissingError); a render that cannot finish is a
// *RenderError.
func (t *Template) Render(data any, opts Options) (string, error) {
	r := newRenderer(data, opts)
	defer r.release()
	out, err := r.render(t)
	if err != nil {
		return "", err
	}
	if len(r.missing) > 0 {
		return "", &MissingError{Paths: r.missing}
	}
	return out, nil
}

// minTimedSteps: the clock is read only once a render took this many steps. A render that takes fewer is
// short by construction (each step's work is bounded by the output bound and the data's size), so a
// process descheduled for 10 ms under load does not fail a send whose template is not at fault.
const minTimedSteps = 4096

// tick counts a step and checks the clock every few steps past minTimedSteps.
func (r *renderer) tick() error {
	r.steps++
	if r.steps >= minTimedSteps && r.steps%32 == 0 && time.Since(r.started) > MaxRenderTime {
		return &RenderError{Msg: fmt.Sprintf("the render ran past %s", MaxRenderTime)}
	}
	return nil
}

func (r *renderer) write(out *[]byte, s string) error {
	if len(*out)+len(s) > MaxRenderOutput {
		return outputBound()
	}
	*out = append(*out, s...)
	return nil
}

// writeEscaped writes s escaped (escapeHTML) without making the escaped string.
func (r *renderer) writeEscaped(out *[]byte, s string) error {
	i := strings.IndexAny(s, htmlSpecials)
	if i < 0 {
		return r.write(out, s)
	}
	n := len(s)
	for _, c := range []byte(s[i:]) {
		if e := htmlEscapes[c]; e != "" {
			n += len(e) - 1
		}
	}
	if len(*out)+n > MaxRenderOutput {
		return outputBound()
	}
	b := *out
	for i >= 0 {
		b = append(b, s[:i]...)
		b = append(b, htmlEscapes[s[i]]...)
		s = s[i+1:]
		i = strings.IndexAny(s, htmlSpecials)
	}
	*out = append(b, s...)
	return nil
}

func outputBound() error {
	return &RenderError{Msg: fmt.Sprintf("the render's output passed %d KiB", MaxRenderOutput>>10)}
}

type node interface{}

type textNode string

type outputNode struct {
	expr *filtered
	src  string
}

type branch struct {
	cond cond // nil: else
	body []node
}

type ifNode struct{ branches []branch }

type when struct {
	values []expr
	body   []node
}

type caseNode struct {
	subject  *filtered
	whens    []when
	elseBody []node
}

type forNode struct {
	name           string
	coll           expr
	limit, offset  expr
	reversed       bool
	body, elseBody []node
}

type assignNode struct {
	name string
	expr *filtered
}

type captureNode struct {
	name string
	body []node
}

func (r *renderer) nodes(out *[]byte, ns []node) error {
	for _, n := range ns {
		if err := r.tick(); err != nil {
			return err
		}
		if err := r.node(out, n); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) node(out *[]byte, n node) error {
	switch n := n.(type) {
	case textNode:
		return r.write(out, string(n))
	case *outputNode:
		v, err := r.filtered(n.expr)
		if err != nil {
			return err
		}
		s, err := r.output(v, n.src)
		if err != nil {
			return err
		}
		if r.opts.HTML && !endsEscaped(n.expr) {
			return r.writeEscaped(out, s)
		}
		return r.write(out, s)
	case *ifNode:
		for _, b := range n.branches {
			ok := true
			if b.cond != nil {
				var err error
				if ok, err = r.test(b.cond); err != nil {
					return err
				}
			}
			if ok {
				return r.nodes(out, b.body)
			}
		}
		return nil
	case *caseNode:
		subject, err := r.filtered(n.subject)
		if err != nil {
			return err
		}
		for _, w := range n.whens {
			for _, e := range w.values {
				v, err := r.eval(e)
				if err != nil {
					return err
				}
				if equal(subject, v) {
					return r.nodes(out, w.body)
				}
			}
		}
		return r.nodes(out, n.elseBody)
	case *forNode:
		return r.loop(out, n)
	case *assignNode:
		v, err := r.filtered(n.expr)
		if err != nil {
			return err
		}
		r.set(n.name, v)
		return nil
	case *captureNode:
		var inner []byte
		if err := r.nodes(&inner, n.body); err != nil {
			return err
		}
		r.set(n.name, string(inner))
		return nil
	}
	return fmt.Errorf("template: unknown node %T", n)
}

// set sets a variable (assign, capture): of the whole source, whatever loop it is in.
func (r *renderer) set(name string, v any) {
	if r.vars == nil {
		r.vars = map[string]any{}
	}
	r.vars[name] = v
}

// output renders a value as an output: absent is recorded as missing (and renders nothing), null renders
// empty, an object or array is refused.
func (r *renderer) output(v any, src string) (string, error) {
	switch v := v.(type) {
	case absent:
		r.miss(v.path)
		return "", nil
	case nil:
		return "", nil
	case map[string]any, *Object, forloop:
		return "", &RenderError{Msg: fmt.Sprintf("{{ %s }} is an object: output one of its fields", src)}
	case []any:
		return "", &RenderError{Msg: fmt.Sprintf("{{ %s }} is an array: output one of its items, or join them", src)}
	}
	return toString(v), nil
}

func (r *renderer) miss(p string) {
	if !slices.Contains(r.missing, p) {
		r.missing = append(r.missing, p)
	}
}

func (r *renderer) loop(out *[]byte, f *forNode) error {
	coll, err := r.eval(f.coll)
	if err != nil {
		return err
	}
	// The items by index: a range's are made as the loop reaches them, so a long range costs only the
	// iterations the time bound lets run.
	var n int
	var item func(i int) any
	switch c := coll.(type) {
	case absent:
		r.miss(c.path)
		return nil
	case nil:
	case []any:
		n, item = len(c), func(i int) any { return c[i] }
	case map[string]any:
		keys := slices.Sorted(maps.Keys(c))
		n, item = len(keys), func(i int) any { return []any{keys[i], c[keys[i]]} }
	case *Object:
		ms := c.sorted()
		n, item = len(ms), func(i int) any { return []any{ms[i].Key, ms[i].Value} }
	case rangeValue:
		n, item = max(c.to-c.from+1, 0), func(i int) any { return json.Number(strconv.Itoa(c.from + i)) }
	default:
		return &RenderError{Msg: fmt.Sprintf("for: %s is not a collection", toString(coll))}
	}
	first, count := 0, n
	if f.offset != nil {
		o, err := r.intOf(f.offset, "offset")
		if err != nil {
			return err
		}
		first = min(max(o, 0), n)
		count = n - first
	}
	if f.limit != nil {
		l, err := r.intOf(f.limit, "limit")
		if err != nil {
			return err
		}
		count = min(max(l, 0), count)
	}
	if count == 0 {
		return r.nodes(out, f.elseBody)
	}
	r.loops = append(r.loops, loopScope{name: f.name})
	defer func() { r.loops = r.loops[:len(r.loops)-1] }()
	for i := range count {
		ix := first + i
		if f.reversed {
			ix = first + count - 1 - i
		}
		if err := r.tick(); err != nil {
			return err
		}
		// Indexed each time: the body's own loops append to r.loops.
		r.loops[len(r.loops)-1].item = item(ix)
		r.loops[len(r.loops)-1].loop = forloop{index: i, length: count}
		if err := r.nodes(out, f.body); err != nil {
			return err
		}
	}
	return nil
}

// forloop is the forloop variable: built only when a path reads it (lookup), not at every iteration.
type forloop struct{ index, length int }

func (l forloop) get(key string) (any, bool) {
	num := number
	switch key {
	case "index":
		return num(l.index + 1), true
	case "index0":
		return num(l.index), true
	case "rindex":
		return num(l.length - l.index), true
	case "rindex0":
		return num(l.length - l.index - 1), true
	case "length":
		return num(l.length), true
	case "first":
		return l.index == 0, true
	case "last":
		return l.index == l.length-1, true
	}
	return nil, false
}

func (r *renderer) intOf(e expr, what string) (int, error) {
	v, err := r.eval(e)
	if err != nil {
		return 0, err
	}
	if a, ok := v.(absent); ok {
		r.miss(a.path)
		return 0, nil
	}
	f, ok := toNumber(v)
	if !ok {
		return 0, &RenderError{Msg: fmt.Sprintf("%s must be a number", what)}
	}
	return int(f), nil
}

type rangeValue struct{ from, to int }

// eval evaluates a value.
func (r *renderer) eval(e expr) (any, error) {
	switch e := e.(type) {
	case literal:
		return e.v, nil
	case *filtered:
		return r.filtered(e)
	case rangeExpr:
		from, err := r.intOf(e.from, "a range's start")
		if err != nil {
			return nil, err
		}
		to, err := r.intOf(e.to, "a range's end")
		if err != nil {
			return nil, err
		}
		if to-from >= maxRangeLength {
			return nil, &RenderError{Msg: fmt.Sprintf("a range may hold at most %d numbers", maxRangeLength)}
		}
		return rangeValue{from, to}, nil
	case *path:
		return r.lookup(e)
	}
	return nil, fmt.Errorf("template: unknown expression %T", e)
}

// lookup resolves a path: the variables (innermost first), then the data. A step into null is null; a step
// the value does not have is absent (the whole path is reported).
func (r *renderer) lookup(p *path) (any, error) {
	var v any
	found := false
	for i := len(r.loops) - 1; i >= 0 && !found; i-- {
		// A loop's forloop hides a loop variable named forloop, as the map of a loop's variables did.
		switch l := &r.loops[i]; p.first {
		case "forloop":
			v, found = l.loop, true
		case l.name:
			v, found = l.item, true
		}
	}
	if !found {
		v, found = r.vars[p.first]
	}
	if !found {
		if v, found = field(r.data, p.first); !found {
			return absent{p.src}, nil
		}
	}
	for _, s := range p.steps {
		if v == nil {
			return nil, nil
		}
		key := s.name
		if s.index != nil {
			ix, err := r.eval(s.index)
			if err != nil {
				return nil, err
			}
			if a, ok := ix.(absent); ok {
				return a, nil
			}
			if n, ok := toNumber(ix); ok {
				arr, isArr := v.([]any)
				if !isArr {
					return absent{p.src}, nil
				}
				i := int(n)
				if i < 0 {
					i += len(arr)
				}
				if i < 0 || i >= len(arr) {
					return absent{p.src}, nil
				}
				v = arr[i]
				continue
			}
			key = toString(ix)
		}
		switch c := v.(type) {
		case forloop:
			next, ok := c.get(key)
			if !ok {
				return absent{p.src}, nil
			}
			v = next
		case map[string]any, *Object:
			next, ok := field(c, key)
			if !ok {
				return absent{p.src}, nil
			}
			v = next
		case []any:
			switch key {
			case "size":
				v = number(len(c))
			case "first", "last":
				if len(c) == 0 {
					return nil, nil
				}
				v = c[0]
				if key == "last" {
					v = c[len(c)-1]
				}
			default:
				return absent{p.src}, nil
			}
		case string:
			if key != "size" {
				return absent{p.src}, nil
			}
			v = number(utf8.RuneCountInString(c))
		default:
			return absent{p.src}, nil
		}
	}
	return v, nil
}

// filtered evaluates a value through its filters. An absent value goes through none but default (so that
// an output still reports it missing).
func (r *renderer) filtered(f *filtered) (any, error) {
	v, err := r.eval(f.base)
	if err != nil {
		return nil, err
	}
	for _, c := range f.filters {
		if _, isAbsent := v.(absent); isAbsent && c.name != "default" {
			continue
		}
		// The arguments on r.args (a filter keeps none of them), from and back to base.
		base := len(r.args)
		for _, a := range c.args {
			x, err := r.eval(a)
			if err != nil {
				r.args = r.args[:base]
				return nil, err
			}
			if ab, ok := x.(absent); ok {
				r.miss(ab.path)
				x = nil
			}
			r.args = append(r.args, x)
		}
		v, err = c.fn(r, v, r.args[base:])
		clear(r.args[base:])
		r.args = r.args[:base]
		if err != nil {
			return nil, &RenderError{Msg: fmt.Sprintf("filter %s: %v", c.name, err)}
		}
	}
	return v, nil
}

// test evaluates a condition: an absent value is false (and compares as null), never missing.
func (r *renderer) test(c cond) (bool, error) {
	switch c := c.(type) {
	case truthCond:
		v, err := r.eval(c.e)
		return truthy(v), err
	case notCond:
		ok, err := r.test(c.c)
		return !ok, err
	case andCond:
		a, err := r.test(c.a)
		if err != nil || !a {
			return false, err
		}
		return r.test(c.b)
	case orCond:
		a, err := r.test(c.a)
		if err != nil || a {
			return a, err
		}
		return r.test(c.b)
	case cmpCond:
		a, err := r.eval(c.a)
		if err != nil {
			return false, err
		}
		b, err := r.eval(c.b)
		if err != nil {
			return false, err
		}
		return compare(c.op, present(a), present(b)), nil
	}
	return false, fmt.Errorf("template: unknown condition %T", c)
}

// present reads absent as null.
func present(v any) any {
	if _, ok := v.(absent); ok {
		return nil
	}
	return v
}

func truthy(v any) bool {
	switch v := v.(type) {
	case nil, absent:
		return false
	case bool:
		return v
	}
	return true
}

func compare(op string, a, b any) bool {
	switch op {
	case "==":
		return equal(a, b)
	case "!=":
		return !equal(a, b)
	case "contains":
		switch c := a.(type) {
		case string:
			s, ok := b.(string)
			return ok && strings.Contains(c, s)
		case []any:
			return slices.ContainsFunc(c, func(x any) bool { return equal(x, b) })
		case map[string]any, *Object:
			s, ok := b.(string)
			_, has := field(c, s)
			return ok && has
		}
		return false
	}
	x, okA := toNumber(a)
	y, okB := toNumber(b)
	if !okA || !okB {
		s, okS := a.(string)
		t, okT := b.(string)
		if !okS || !okT {
			return false
		}
		x, y = float64(strings.Compare(s, t)), 0
	}
	switch op {
	case "<":
		return x < y
	case ">":
		return x > y
	case "<=":
		return x <= y
	case ">=":
		return x >= y
	}
	return false
}

func equal(a, b any) bool {
	a, b = present(a), present(b)
	if x, ok := toNumber(a); ok {
		y, ok := toNumber(b)
		return ok && x == y
	}
	if _, isNum := toNumber(b); isNum {
		return false
	}
	return deepEqual(a, b)
}

// deepEqual is reflect.DeepEqual as equal used it on decoded JSON, an Object read as the map it stands
// for: an object equals another with the same keys and equal values, whether either is a map or an Object.
func deepEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any, *Object:
		if y, ok := b.(map[string]any); ok {
			if x, ok := x.(map[string]any); ok && (x == nil) != (y == nil) {
				return false
			}
		}
		n, ok := objectLen(a)
		m, okB := objectLen(b)
		if !ok || !okB || n != m {
			return false
		}
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if w, found := field(b, k); !found || !deepEqual(v, w) {
					return false
				}
			}
		case *Object:
			for _, e := range x.Members {
				if w, found := field(b, e.Key); !found || !deepEqual(e.Value, w) {
					return false
				}
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !deepEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// field is an object's member (a map's or an Object's); not found in anything else.
func field(v any, key string) (any, bool) {
	switch c := v.(type) {
	case map[string]any:
		x, ok := c[key]
		return x, ok
	case *Object:
		if c != nil {
			return c.get(key)
		}
	}
	return nil, false
}

// objectLen is the number of an object's keys; false for anything else.
func objectLen(v any) (int, bool) {
	switch c := v.(type) {
	case map[string]any:
		return len(c), true
	case *Object:
		if c != nil {
			return len(c.Members), true
		}
		return 0, true
	}
	return 0, false
}

// toNumber reads a number (json.Number, float64, int); strings are not numbers here.
func toNumber(v any) (float64, bool) {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case float64:
		return v, true
	case int:
		return float64(v), true
	}
	return 0, false
}

// toString renders a scalar as an output shows it.
func toString(v any) string {
	switch v := v.(type) {
	case nil, absent:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case rangeValue:
		return fmt.Sprintf("%d..%d", v.from, v.to)
	}
	return fmt.Sprint(ToMaps(v)) // an Object prints as the map it stands for
}

// escapeHTML escapes the four characters that could make markup of data in the §10 subset.
func escapeHTML(s string) string {
	if !strings.ContainsAny(s, htmlSpecials) {
		return s
	}
	return htmlEscaper.Replace(s)
}

const htmlSpecials = `<>&"`

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// htmlEscapes are the escapes of htmlSpecials, by byte (writeEscaped).
var htmlEscapes = [256]string{'&': "&amp;", '<': "&lt;", '>': "&gt;", '"': "&quot;"}

// smallNumbers are the numbers .size, size and forloop give most often, made once: a json.Number in an any
// is an allocation each time.
var smallNumbers = func() (n [256]any) {
	for i := range n {
		n[i] = json.Number(strconv.Itoa(i))
	}
	return n
}()

// number is n as a render's value (a json.Number, as the data's numbers).
func number(n int) any {
	if n >= 0 && n < len(smallNumbers) {
		return smallNumbers[n]
	}
	return json.Number(strconv.Itoa(n))
}

// endsEscaped: an output whose last filter is escape is escaped once, not twice.
func endsEscaped(f *filtered) bool {
	return len(f.filters) > 0 && f.filters[len(f.filters)-1].name == "escape"
}
