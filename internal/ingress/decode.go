package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"unicode"
	"unicode/utf8"

	"github.com/heraldhq/herald/internal/apierror"
)

// MaxBodyBytes limits every /v1 request body.
const MaxBodyBytes = 64 << 10

// MaxUserIDLength is the longest accepted user_id, in code points.
const MaxUserIDLength = 128

// decodeObject reads a JSON object body into dst. Unknown fields, trailing data, a wrong Content-Type and
// bodies over MaxBodyBytes are invalid_request: a typo in a field name must not be silently ignored.
func decodeObject(w http.ResponseWriter, r *http.Request, dst any) error {
	return decodeObjectMax(w, r, dst, MaxBodyBytes)
}

// decodeObjectMax is decodeObject for a body of at most limit bytes.
func decodeObjectMax(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return apierror.InvalidRequest.With("Content-Type must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return apierror.InvalidRequest.With("request body exceeds %d bytes", limit)
		}
		return apierror.InvalidRequest.With("could not read the request body")
	}
	if !utf8.Valid(bytes.TrimSpace(body)) {
		return apierror.InvalidRequest.With("the body must be valid UTF-8")
	}
	return decodeStrict(body, dst, "the body")
}

// decodeStrict decodes one JSON object (the body, or an item of a batch: what names it in messages) into
// dst: no unknown fields, nothing after it.
func decodeStrict(b []byte, dst any, what string) error {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return apierror.InvalidRequest.With("%s must be a JSON object", what)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return apierror.InvalidRequest.With("%s", describeJSONError(err))
	}
	if dec.More() {
		return apierror.InvalidRequest.With("unexpected data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return apierror.InvalidRequest.With("unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %s must be a %s", typeErr.Field, typeErr.Type.Kind())
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d", syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	default:
		// json's messages for unknown fields name the field, which is what the caller needs.
		return "malformed request: " + err.Error()
	}
}

// validUserID: 1..128 code points, no control characters.
func validUserID(s string) error {
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
