package ingress

import (
	"fmt"
	"strings"
	"testing"
)

// duplicateKeyCases are documents whose duplicate keys the byte scan and the tokens must judge alike.
var duplicateKeyCases = []string{
	`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":1,"b":{"a":2}}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"b":1},{"b":2}]}`,
	`{"a":[{"b":1,"b":2}]}`, `{"a":"b","b":"a"}`, `{"a\"":1,"a\"":2}`, `{"\u0061":1,"a":2}`, `{"a":"x\"y","a":1}`,
	`{"a":1 x "a":2}`, `{"a":1,"a"`, `{"a":[1,2,{"c":{"d":[{"e":1,"e":2}]}}]}`, `["a","a"]`, `{"a":["a","a"]}`,
	`{"":1,"":2}`, `{"a":{},"b":{},"a":{}}`, `{"a":1}{"a":2}`, `{"a":1,"b":2,}`, `"a"`, ``, `{`, `}`, `]]]{"a":1,"a":1}`,
	`{"k\\":1,"k\\":2}`, `{"é":1,"é":2}`, `{"a":[{"x":1}],"x":2}`,
}

func TestTheByteScanFindsTheDuplicatesTheTokensFind(t *testing.T) {
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 40 {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dup {
			b.WriteString(`"k7":0,`)
		}
		b.WriteString(`"z":{"k1":1}}`)
		return b.String()
	}
	for _, doc := range append(duplicateKeyCases, many(false), many(true)) {
		key, dup := duplicateKey([]byte(doc))
		wantKey, wantDup := duplicateKeyTokens([]byte(doc))
		if key != wantKey || dup != wantDup {
			t.Errorf("%s: %q %v, the tokens say %q %v", doc, key, dup, wantKey, wantDup)
		}
	}
	if _, dup := duplicateKey([]byte(many(true))); !dup {
		t.Error("a key given twice among 41 keys is not found")
	}
	if key, dup := duplicateKey([]byte(`{"a":{"b":1,"b":2}}`)); !dup || key != "b" {
		t.Errorf("nested duplicate: %q %v", key, dup)
	}
}

func FuzzDuplicateKey(f *testing.F) {
	for _, doc := range duplicateKeyCases {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		key, dup := duplicateKey([]byte(doc))
		wantKey, wantDup := duplicateKeyTokens([]byte(doc))
		if key != wantKey || dup != wantDup {
			t.Fatalf("%q: %q %v, the tokens say %q %v", doc, key, dup, wantKey, wantDup)
		}
	})
}
