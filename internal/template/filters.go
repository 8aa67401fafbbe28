package template

import (
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// filterFunc is a filter: the value, its arguments (absent ones read as null).
type filterFunc func(r *renderer, v any, args []any) (any, error)

// filters are the filters of §12 and a few of Liquid's string filters.
var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"default":    defaultFilter,
		"upcase":     stringFilter(strings.ToUpper),
		"downcase":   stringFilter(strings.ToLower),
		"capitalize": stringFilter(capitalize),
		"strip":      stringFilter(strings.TrimSpace),
		"escape":     stringFilter(escapeHTML),
		"truncate":   truncate,
		"size":       size,
		"join":       join,
		"date":       date,
		"append": func(_ *renderer, v any, args []any) (any, error) {
			return toString(v) + toString(arg(args, 0, "")), nil
		},
		"prepend": func(_ *renderer, v any, args []any) (any, error) {
			return toString(arg(args, 0, "")) + toString(v), nil
		},
		"replace": func(_ *renderer, v any, args []any) (any, error) {
			return strings.ReplaceAll(toString(v), toString(arg(args, 0, "")), toString(arg(args, 1, ""))), nil
		},
		"first": func(_ *renderer, v any, _ []any) (any, error) {
			if a, ok := v.([]any); ok && len(a) > 0 {
				return a[0], nil
			}
			return nil, nil
		},
		"last": func(_ *renderer, v any, _ []any) (any, error) {
			if a, ok := v.([]any); ok && len(a) > 0 {
				return a[len(a)-1], nil
			}
			return nil, nil
		},
	}
}

func arg(args []any, i int, def any) any {
	if i < len(args) && args[i] != nil {
		return args[i]
	}
	return def
}

// defaultFilter: the argument when the value is absent, null, false or empty ("" or []).
func defaultFilter(_ *renderer, v any, args []any) (any, error) {
	switch x := v.(type) {
	case absent, nil:
		return arg(args, 0, ""), nil
	case bool:
		if !x {
			return arg(args, 0, ""), nil
		}
	case string:
		if x == "" {
			return arg(args, 0, ""), nil
		}
	case []any:
		if len(x) == 0 {
			return arg(args, 0, ""), nil
		}
	}
	return v, nil
}

// stringFilter applies f to a scalar's text; null stays null (renders empty).
func stringFilter(f func(string) string) filterFunc {
	return func(_ *renderer, v any, _ []any) (any, error) {
		switch v.(type) {
		case nil:
			return nil, nil
		case map[string]any, *Object, []any:
			return nil, errors.New("takes a text, not an object or array")
		}
		out := f(toString(v))
		if s, ok := v.(string); ok && s == out {
			return v, nil // unchanged: not boxed again
		}
		return out, nil
	}
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || unicode.ToUpper(r) == r && r != utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// truncate: at most n characters (50 by default), the ellipsis ("..." by default) included.
func truncate(_ *renderer, v any, args []any) (any, error) {
	if v == nil {
		return nil, nil
	}
	n := 50
	if len(args) > 0 {
		f, ok := toNumber(args[0])
		if !ok {
			return nil, errors.New("the length must be a number")
		}
		n = int(f)
	}
	ellipsis := toString(arg(args, 1, "..."))
	if s := toString(v); utf8.ValidString(s) {
		// Valid UTF-8 (as a send's data always is) comes back from []rune and string unchanged: count and
		// cut it in place.
		if utf8.RuneCountInString(s) <= n {
			if _, isString := v.(string); isString {
				return v, nil
			}
			return s, nil
		}
		keep, cut := max(n-utf8.RuneCountInString(ellipsis), 0), 0
		for range keep {
			_, size := utf8.DecodeRuneInString(s[cut:])
			cut += size
		}
		return s[:cut] + ellipsis, nil
	}
	runes := []rune(toString(v))
	if len(runes) <= n {
		return string(runes), nil
	}
	keep := max(n-utf8.RuneCountInString(ellipsis), 0)
	return string(runes[:keep]) + ellipsis, nil
}

// size: the characters of a text, the items of an array, the keys of an object.
func size(_ *renderer, v any, _ []any) (any, error) {
	n := 0
	switch x := v.(type) {
	case string:
		n = utf8.RuneCountInString(x)
	case []any:
		n = len(x)
	case map[string]any:
		n = len(x)
	case *Object:
		n = len(x.Members)
	}
	return number(n), nil
}

// join: an array's items, as text, separated by the argument (" " by default).
func join(_ *renderer, v any, args []any) (any, error) {
	a, ok := v.([]any)
	if !ok {
		return v, nil
	}
	parts := make([]string, len(a))
	for i, x := range a {
		switch x.(type) {
		case map[string]any, *Object, []any:
			return nil, errors.New("an item is an object or array")
		}
		parts[i] = toString(x)
	}
	return strings.Join(parts, toString(arg(args, 0, " "))), nil
}

// date formats a time — an RFC 3339 text, "now" or "today", a number of seconds since 1970 — with a
// strftime format, in the render's time zone (the user's, when set).
func date(r *renderer, v any, args []any) (any, error) {
	var t time.Time
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		switch x {
		case "now", "today":
			t = r.opts.Now
		default:
			var err error
			if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
				if t, err = time.Parse("2006-01-02", x); err != nil {
					return nil, errors.New("the value must be an RFC 3339 time, a date (2006-01-02), \"now\" or seconds since 1970")
				}
			}
		}
	default:
		f, ok := toNumber(x)
		if !ok {
			return nil, errors.New("the value must be a time")
		}
		t = time.Unix(int64(f), 0)
	}
	format := toString(arg(args, 0, "%Y-%m-%d %H:%M"))
	return strftime(t.In(r.opts.Location), format), nil
}

// strftimeLayouts are the strftime directives that Go's time layouts write alike; strftime writes the others
// (%Y, %e, %j, %%) itself.
var strftimeLayouts = map[byte]string{
	'y': "06", 'm': "01", 'd': "02", 'H': "15", 'I': "03", 'M': "04", 'S': "05", 'p': "PM",
	'b': "Jan", 'B': "January", 'a': "Mon", 'A': "Monday", 'Z': "MST", 'z': "-0700",
}

func strftime(t time.Time, f string) string {
	var buf [64]byte // most dates fit: then the result is the only allocation
	b := buf[:0]
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b = append(b, f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			b = strconv.AppendInt(b, int64(t.Year()), 10)
		case 'e':
			b = strconv.AppendInt(b, int64(t.Day()), 10)
		case 'j':
			b = strconv.AppendInt(b, int64(t.YearDay()), 10)
		case '%':
			b = append(b, '%')
		default:
			if layout, ok := strftimeLayouts[f[i]]; ok {
				b = t.AppendFormat(b, layout)
			} else {
				b = append(b, '%', f[i])
			}
		}
	}
	return string(b)
}
