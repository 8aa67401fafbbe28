package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/apierror"
)

// MaxBodyBytes limits every /v1 request body.
const MaxBodyBytes = 64 << 10

// MaxUserIDLength is the longest accepted user_id, in code points.
const MaxUserIDLength = 128

// decodeObject reads a JSON object body into dst. Unknown fields and trailing data are invalid_request (400),
// a missing or other Content-Type invalid_request with status 415: a typo in a field name must not be silently ignored. A body over MaxBodyBytes is
// invalid_request with status 413.
func decodeObject(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeObjectMax(w, r, dst, MaxBodyBytes)
}

// decodeObjectMax is decodeObject for a body of at most limit bytes.
func decodeObjectMax(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return apierror.UnsupportedMediaType
	}
	raw := r.Body
	body, err := io.ReadAll(http.MaxBytesReader(w, raw, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			drainRefused(w, raw)
			return apierror.PayloadTooLarge.With("request body exceeds %d bytes", limit)
		}
		return apierror.InvalidRequest.With("could not read the request body")
	}
	if !utf8.Valid(bytes.TrimSpace(body)) {
		return apierror.InvalidRequest.With("the body must be valid UTF-8")
	}
	return decodeStrict(body, dst, "the body")
}

// drainRefused reads and discards the rest of a body refused as too large, up to refusedDrainMax bytes
// and refusedDrainWait, before the 413 is written. The refusal stays early (nothing past the limit is
// kept), but a client that writes its whole body before reading (Python's urllib and requests) would
// otherwise be reset while writing — net/http stops reading, lingers 500 ms and closes — and never see the
// answer. A body beyond the bound still gets the answer written and the connection closed.
func drainRefused(w http.ResponseWriter, body io.Reader) {
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(refusedDrainWait)); err != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, refusedDrainMax)
}

// refusedDrainMax and refusedDrainWait bound what drainRefused reads: a few megabytes covers a mistaken
// upload (an attachment, a whole log) without letting a client stream into the server for long.
const (
	refusedDrainMax  = 8 << 20
	refusedDrainWait = 5 * time.Second
)

// decodeStrict decodes one JSON object (the body, or an item of a batch: what names it in messages) into
// dst: no unknown fields, nothing after it.
func decodeStrict(b []byte, dst any, what string) error {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return apierror.InvalidRequest.With("%s must be a JSON object", what)
	}
	// encoding/json keeps the last of two equal keys; a key given twice is as likely a mistake as an
	// unknown one, and is refused the same way.
	if key, dup := duplicateKey(trimmed); dup {
		return apierror.InvalidRequest.With("%s: the field %q is given twice", what, key)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return apierror.InvalidRequest.With("%s", describeJSONError(err, dst))
	}
	if dec.More() {
		return apierror.InvalidRequest.With("unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return apierror.InvalidRequest.With("unexpected data after the JSON object")
	}
	return nil
}

// duplicateKey reports the first key given twice in one object, at any depth, of a JSON document (a
// malformed one reports none: decoding it says what is wrong).
//
// Every request body passes here, and walking it with encoding/json's tokens cost a templated send (whose
// data is an object of objects) about 30 µs, as much as rendering it (make bench-ingress -template, CPU
// profile). So a scan of the bytes answers first; the tokens decide whenever it is unsure — a key written
// with an escape (two spellings of one key) — and whenever it finds a duplicate, so that a malformed
// document is answered exactly as before.
func duplicateKey(b []byte) (string, bool) {
	if sure, dup := scanDuplicateKey(b); sure && !dup {
		return "", false
	}
	return duplicateKeyTokens(b)
}

// scanDuplicateKey is the byte scan of duplicateKey: sure is false when it met a key with an escape; dup
// whether it saw a key twice in one object. It checks no syntax: on a well-formed prefix it sees the keys
// the tokens would, so "no duplicate" holds for the tokens too.
func scanDuplicateKey(b []byte) (sure, dup bool) {
	type frame struct {
		object bool
		from   int             // this object's first key in keys
		set    map[string]bool // its keys, once it has many
	}
	// On the stack for the common body (a few levels, a few dozen keys): every request passes here.
	var frameBuf [8]frame
	var keyBuf [48][]byte
	frames := frameBuf[:0]
	keys := keyBuf[:0] // the keys of the open objects, innermost last
	expectKey := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '{':
			frames = append(frames, frame{object: true, from: len(keys)})
			expectKey = true
		case '[':
			frames = append(frames, frame{})
			expectKey = false
		case '}', ']':
			if len(frames) > 0 {
				keys = keys[:frames[len(frames)-1].from]
				frames = frames[:len(frames)-1]
			}
			expectKey = false
		case ',':
			expectKey = len(frames) > 0 && frames[len(frames)-1].object
		case '"':
			start, escaped := i+1, false
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					escaped = true
					i++
				}
			}
			if !expectKey {
				continue
			}
			expectKey = false
			if escaped {
				return false, false
			}
			key := b[start:min(i, len(b))]
			f := &frames[len(frames)-1]
			if f.set != nil {
				if f.set[string(key)] {
					return true, true
				}
				f.set[string(key)] = true
				continue
			}
			for _, k := range keys[f.from:] {
				if bytes.Equal(k, key) {
					return true, true
				}
			}
			keys = append(keys, key)
			// Past a few keys, a set: a 64 KiB object of short keys must not cost a quadratic scan.
			if len(keys)-f.from > 16 {
				f.set = make(map[string]bool, 32)
				for _, k := range keys[f.from:] {
					f.set[string(k)] = true
				}
			}
		}
	}
	return true, false
}

// duplicateKeyTokens is duplicateKey by encoding/json's tokens.
func duplicateKeyTokens(b []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	// One set of keys per open object; nil for an open array.
	var open []map[string]bool
	expectKey := func() bool { return len(open) > 0 && open[len(open)-1] != nil }
	afterKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				open = append(open, map[string]bool{})
			case '[':
				open = append(open, nil)
			default:
				open = open[:len(open)-1]
			}
			afterKey = false
		case string:
			if expectKey() && !afterKey {
				keys := open[len(open)-1]
				if keys[v] {
					return v, true
				}
				keys[v] = true
				afterKey = true
				continue
			}
			afterKey = false
		default:
			afterKey = false
		}
		if len(open) == 0 {
			return "", false
		}
	}
}

// describeJSONError says in plain words what is wrong with a body that dst could not be decoded from:
// the caller reads it, not a Go programmer, so no decoder jargon ("json: cannot unmarshal …").
func describeJSONError(err error, dst any) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return "the body must be a JSON object"
		}
		return fmt.Sprintf("field %q must be %s", typeErr.Field, kindInWords(typeErr.Type.Kind()))
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	}
	// encoding/json has no type for an unknown field; its text is `json: unknown field "<name>"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("unknown field %s: this request accepts only %s", name, fieldList(dst))
	}
	return "malformed JSON"
}

// kindInWords names a JSON value a Go kind is decoded from.
func kindInWords(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different type"
}

// fieldList names the JSON fields of the struct dst points to, quoted: "user_id", "message" and "priority".
func fieldList(dst any) string {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	if t.Kind() == reflect.Struct {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" && f.IsExported() {
				names = append(names, strconv.Quote(name))
			}
		}
	}
	switch len(names) {
	case 0:
		return "no fields"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// storable reports whether PostgreSQL can store s, as text or inside jsonb: neither holds U+0000. It is the
// rule every string a request hands to the database meets (docs/security.md); a string decoded from JSON is
// valid UTF-8 already (encoding/json replaces what is not), so a NUL is all there is left to refuse. One
// pass over bytes in memory, no allocation: it stays off the send path's costs. The caller names the field
// in its message, followed by nulRule.
func storable(s string) bool { return strings.IndexByte(s, 0) < 0 }

// nulRule ends the message that refuses a string holding a NUL.
const nulRule = "must not contain the NUL character (U+0000)"

// blank reports whether s is nothing but white space (every code point unicode.IsSpace). It stops at the
// first other code point, which for a message is nearly always the first.
func blank(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// validUserID: 1..128 code points of valid UTF-8 (a path parameter is percent-decoded bytes), no control
// characters (so no NUL either: a user_id is always storable).
func validUserID(s string) error {
	if !utf8.ValidString(s) {
		return apierror.InvalidRequest.With("user_id must be valid UTF-8")
	}
	n := utf8.RuneCountInString(s)
	if n == 0 || n > MaxUserIDLength {
		return apierror.InvalidRequest.With("user_id must be 1-%d characters", MaxUserIDLength)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return apierror.InvalidRequest.With("user_id must not contain control characters")
		}
	}
	return nil
}

// decodeUser reads a {"user_id": …} body.
func decodeUser(w http.ResponseWriter, r *http.Request) (string, error) {
	var req struct {
		UserID *string `json:"user_id"`
	}
	if err := decodeObject(w, r, &req); err != nil {
		return "", err
	}
	return userIDField(req.UserID)
}

// userIDField validates a required user_id field that was decoded into a *string.
func userIDField(p *string) (string, error) {
	if p == nil {
		return "", apierror.InvalidRequest.With("user_id is required")
	}
	return *p, validUserID(*p)
}

var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
