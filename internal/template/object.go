package template

import (
	"cmp"
	"slices"
)

// Object is a JSON object as a render reads it, besides map[string]any: its members, each key once (the
// last value given for it). A decoder that knows its data is small (the ingress's, of a send's data)
// makes these rather than maps: a map of a few keys costs a header, a group of eight slots and hashing
// at every insert, and a templated send's data is mostly such objects. Renders read both alike — a
// lookup, a loop (by key, as a map's), size, contains, ==.
type Object struct {
	Members []Member
}

// Member is one of an Object's keys and its value.
type Member struct {
	Key   string
	Value any
}

// get is the value of key: a scan, as the objects made this way are small.
func (o *Object) get(key string) (any, bool) {
	for i := range o.Members {
		if o.Members[i].Key == key {
			return o.Members[i].Value, true
		}
	}
	return nil, false
}

// sorted is the members by key, as a loop over a map takes them.
func (o *Object) sorted() []Member {
	ms := slices.Clone(o.Members)
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.Key, b.Key) })
	return ms
}

// ToMaps is v with every Object made a map[string]any: the value encoding/json would have decoded, for
// what marshals data as it marshalled maps (an Idempotency-Key's meaning). Maps and arrays are copied; nil
// ones stay nil (they marshal as null).
func ToMaps(v any) any {
	switch x := v.(type) {
	case *Object:
		if x == nil {
			return map[string]any(nil)
		}
		m := make(map[string]any, len(x.Members))
		for _, e := range x.Members {
			m[e.Key] = ToMaps(e.Value)
		}
		return m
	case map[string]any:
		if x == nil {
			return x
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = ToMaps(e)
		}
		return m
	case []any:
		if x == nil {
			return x
		}
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = ToMaps(e)
		}
		return a
	}
	return v
}
