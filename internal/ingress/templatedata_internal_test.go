package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/template"
)

// dataCases are documents decodeData must decode (or refuse) as encoding/json does.
var dataCases = []string{
	`{}`, ` {} `, "\t{\n}\r\n", `{"a":1}`, `{"a":"x"}`, `{"a":null,"b":true,"c":false}`, `{"a":[]}`, `{"a":{}}`, `{"a":[1,[2,[3]],{"b":[]}]}`,
	benchData,
	// Numbers, kept as written.
	`{"n":0}`, `{"n":-0}`, `{"n":0.5}`, `{"n":-12.50e+03}`, `{"n":1E9}`, `{"n":1e400}`, `{"n":123456789012345678901234567890}`,
	`{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":1e+}`, `{"n":+1}`, `{"n":0x1}`, `{"n":1.5.2}`, `{"n":- 1}`, `{"n":NaN}`,
	// Strings: escapes, surrogates, invalid UTF-8, control characters.
	`{"s":"a\"b\\c\/d\be\ff\ng\rh\ti"}`, `{"s":"\u00e9\u20AC\uFFFD"}`, `{"s":"\ud83d\ude00"}`, `{"s":"\ud83d"}`, `{"s":"\ude00"}`,
	`{"s":"\ud83d\u0041"}`, `{"s":"\ud83dx"}`, `{"s":"\ud83d\ud83d\ude00"}`, `{"s":"\ude00\ud83d"}`, `{"s":"\ud83d\\ude00"}`,
	"{\"s\":\"\xff\"}", "{\"s\":\"a\xc3\"}", "{\"s\":\"\xed\xa0\x80\"}", "{\"s\":\"\xef\xbf\xbd\"}", "{\"\xfe\":1}", "{\"s\":\"é€😀\"}",
	"{\"s\":\"\x7f\"}", "{\"s\":\"a\nb\"}", "{\"s\":\"\x00\"}", "{\"s\":\"\x1f\"}", `{"s":"\x"}`, `{"s":"\'"}`, `{"s":"\u12"}`, `{"s":"\u12g4"}`,
	`{"s":"\`, `{"s":"abc`, `{"s":"\u`, `{"s":"\ud83d\u`,
	// NULs, in strings and keys, at depth.
	`{"x":"a\u0000"}`, `{"y":[1,{"a\u0000":"x"}]}`, `{"\u0000":1}`, `{"a":{"b":[0,1,"\u0000"]}}`, `{"a":"\u0000","a":"x"}`, `{"a":"x","a":"\u0000"}`,
	`{"a":["ok",{"b":"\u0000"}],"c":"\u0000"}`, `{"a\u0000":{"b":"\u0000"}}`,
	// Objects past maxObjectMembers (maps), with a key given twice among many.
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15}`,
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":{"a":[{}]}}`,
	`{"a":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k1":"\u0000"}}`,
	`{"a":{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k1":"x\u0000"}}`,
	// Duplicate keys: the last wins.
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":[2]},"a":{"c":3}}`, `{"\u0061":1,"a":2}`,
	// Malformed, and what is not an object.
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{a:1}`, `{'a':1}`,
	`{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":True}`, `{"a":1}x`, `{"a":1}{}`, `{"a":1} `, `{"a":1}}`, `[]`, `[1]`, `"a"`, `1`, `null`,
	` null`, `{"a":1`, `{"a":[1`, `{"a":{"b":1}`, `{"a"::1}`, `{1:1}`, `{"a":1,"b"}`,
}

// referenceData is what parseTemplateFields did before decodeData: encoding/json with UseNumber, into a
// map[string]any (the only way into decodeData is a json.RawMessage, with nothing after the value; the
// reference says so by refusing what follows it).
func referenceData(b []byte) (map[string]any, bool) {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil, false
	}
	if len(bytes.Trim(b[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, false
	}
	return m, true
}

// nulPaths are all the places nulIn could name (it walks maps in no order).
func nulPaths(v any, path string) []string {
	var out []string
	switch x := v.(type) {
	case string:
		if !storable(x) {
			out = append(out, path)
		}
	case map[string]any:
		for k, e := range x {
			if !storable(k) {
				out = append(out, path+" key")
			}
			out = append(out, nulPaths(e, path+"."+k)...)
		}
	case *template.Object:
		for _, e := range x.Members {
			if !storable(e.Key) {
				out = append(out, path+" key")
			}
			out = append(out, nulPaths(e.Value, path+"."+e.Key)...)
		}
	case []any:
		for i, e := range x {
			out = append(out, nulPaths(e, path+"["+strconv.Itoa(i)+"]")...)
		}
	}
	return out
}

// badObject says what is wrong with an Object in v: a key given twice (a render's lookup finds the first,
// encoding/json kept the last) or more members than maxObjectMembers (past them a map: its lookup is not
// a scan).
func badObject(v any) string {
	switch x := v.(type) {
	case *template.Object:
		if len(x.Members) > maxObjectMembers {
			return fmt.Sprintf("an Object of %d members", len(x.Members))
		}
		for i, e := range x.Members {
			for _, f := range x.Members[:i] {
				if f.Key == e.Key {
					return fmt.Sprintf("an Object with the key %q twice", e.Key)
				}
			}
			if bad := badObject(e.Value); bad != "" {
				return bad
			}
		}
	case map[string]any:
		for _, e := range x {
			if bad := badObject(e); bad != "" {
				return bad
			}
		}
	case []any:
		for _, e := range x {
			if bad := badObject(e); bad != "" {
				return bad
			}
		}
	}
	return ""
}

func checkDecodeData(t *testing.T, doc []byte) {
	t.Helper()
	got, nul, ok := decodeData(doc)
	want, wantOK := referenceData(doc)
	if ok != wantOK {
		t.Fatalf("%q: accepted %v, encoding/json %v", doc, ok, wantOK)
	}
	if !ok {
		return
	}
	if !reflect.DeepEqual(template.ToMaps(got), want) {
		t.Fatalf("%q: %#v, encoding/json %#v", doc, got, want)
	}
	if bad := badObject(got); bad != "" {
		t.Fatalf("%q: %s", doc, bad)
	}
	paths := nulPaths(want, "data")
	if (nul != "") != (len(paths) > 0) || nul != "" && !slices.Contains(paths, nul) {
		t.Fatalf("%q: NUL at %q, the places are %q", doc, nul, paths)
	}
}

func TestDecodeDataAsEncodingJSON(t *testing.T) {
	accepted := 0
	for _, doc := range dataCases {
		checkDecodeData(t, []byte(doc))
		if _, _, ok := decodeData([]byte(doc)); ok {
			accepted++
		}
	}
	if accepted < 40 || accepted == len(dataCases) {
		t.Fatalf("%d of the %d cases accepted: the cases no longer test both sides", accepted, len(dataCases))
	}
	// encoding/json's nesting bound: 10,000 arrays or objects deep, not one more.
	for _, depth := range []int{maxDataDepth, maxDataDepth + 1} {
		arrays := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		objects := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
		for _, doc := range []string{arrays, objects} {
			_, _, ok := decodeData([]byte(doc))
			if _, wantOK := referenceData([]byte(doc)); ok != wantOK || ok != (depth <= maxDataDepth) {
				t.Errorf("%d deep: accepted %v, encoding/json %v", depth, ok, wantOK)
			}
		}
	}
}

// The NUL is found where nulIn found it, in the one pass, and not in a value a later duplicate replaced.
func TestDecodeDataFindsTheNUL(t *testing.T) {
	for doc, want := range map[string]string{
		`{"x":"a\u0000"}`:                             "data.x",
		`{"y":[1,{"a\u0000":"x"}]}`:                   "data.y[1] key",
		`{"a":{"b":[0,1,{"c":["\u0000"]}]}}`:          "data.a.b[2].c[0]",
		`{"a":"\u0000","a":"x"}`:                      "",
		`{"a":"x","b":{"c":"\u0000"},"b":"y"}`:        "",
		`{"a":"x","b":{"c":"\u0000"},"b":["\u0000"]}`: "data.b[0]",
		`{"a":"no NUL","b":"\\u0000"}`:                "",
	} {
		_, nul, ok := decodeData([]byte(doc))
		if !ok || nul != want {
			t.Errorf("%s: NUL at %q (ok %v), want %q", doc, nul, ok, want)
		}
	}
}

// FuzzDecodeData holds decodeData to encoding/json: the same documents accepted, the same values, and a NUL
// found exactly when the decoded data holds one, at one of its places.
func FuzzDecodeData(f *testing.F) {
	for _, doc := range dataCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkDecodeData(t, doc)
	})
}

// BenchmarkDecodeData: the benchmark's data (about 600 bytes, 30 keys) by decodeData and, for the record,
// by encoding/json as parseTemplateFields decoded it before.
func BenchmarkDecodeData(b *testing.B) {
	b.Run("decodeData", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := decodeData([]byte(benchData)); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := referenceData([]byte(benchData)); !ok {
				b.Fatal("refused")
			}
		}
	})
}

// An Idempotency-Key's meaning of a templated send is what it was when the data was decoded into maps by
// encoding/json: a key stored before keeps matching its retry.
func TestTemplatedMeaningAsBefore(t *testing.T) {
	for _, doc := range []string{benchData, `{}`, `{"b":[{"y":1,"x":"<&>"}],"a":"é\u2028"}`} {
		data, _, ok := decodeData([]byte(doc))
		want, wantOK := referenceData([]byte(doc))
		if !ok || !wantOK {
			t.Fatalf("%s refused", doc)
		}
		f := &templateFields{name: "order.shipped", version: 2, locale: "pt-br", data: data}
		before, _ := json.Marshal([]any{"template", f.name, f.version, f.locale, want})
		now, _ := json.Marshal((&templated{fields: f}).meaning())
		if !bytes.Equal(now, before) {
			t.Errorf("%s: meaning %s, before %s", doc, now, before)
		}
	}
	before, _ := json.Marshal([]any{"template", "t", 0, "", map[string]any(nil)})
	if now, _ := json.Marshal((&templated{fields: &templateFields{name: "t"}}).meaning()); !bytes.Equal(now, before) {
		t.Errorf("without data: meaning %s, before %s", now, before)
	}
}

// validTemplateName is the regexp it replaced.
func TestValidTemplateNameIsTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	names := []string{"", "a", "0", "_a", ".a", "-a", "a_b.c-d", "A", "aB", "a b", "a\n", "é", "a/b", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"order.shipped", "x" + strings.Repeat("-", 63), "a\x00", "a%2F", "a~", "a+b"}
	for _, n := range names {
		if got, want := validTemplateName(n), re.MatchString(n); got != want {
			t.Errorf("%q: %v, the regexp %v", n, got, want)
		}
	}
}

func FuzzValidTemplateName(f *testing.F) {
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	f.Add("order.shipped")
	f.Add("a\n")
	f.Fuzz(func(t *testing.T, n string) {
		if got, want := validTemplateName(n), re.MatchString(n); got != want {
			t.Fatalf("%q: %v, the regexp %v", n, got, want)
		}
	})
}
