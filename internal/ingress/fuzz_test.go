package ingress

import (
	"bytes"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/brand"
	"github.com/heraldhq/herald/internal/notification"
	"github.com/heraldhq/herald/internal/store"
)

// The fuzz targets of the tenant API's parsers of outside input: bodies, path parameters, headers. `go
// test` runs their seeds (below and in testdata/fuzz); `make fuzz` runs each for FUZZTIME.

// decodeRequest runs decodeObject on a body as a handler would.
func decodeRequest(body []byte, contentType string, dst any) error {
	r := httptest.NewRequest("POST", "/v1/send", bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	return decodeObject(httptest.NewRecorder(), r, dst)
}

// checkRefusal: a refused body is a catalogued invalid_request, 413 past the size limit (once the
// Content-Type, checked first, is JSON), else 400, with a message that does not echo the body.
func checkRefusal(t *testing.T, body []byte, contentType string, err error) {
	t.Helper()
	e, ok := apierror.From(err)
	if !ok || e.Code != "invalid_request" {
		t.Fatalf("refused with %v, want invalid_request", err)
	}
	mt, _, mterr := mime.ParseMediaType(contentType)
	json := mterr == nil && mt == "application/json"
	if want := http.StatusBadRequest; !json {
		if e.Status != http.StatusUnsupportedMediaType {
			t.Fatalf("Content-Type %q: status %d, want 415", contentType, e.Status)
		}
	} else if len(body) > MaxBodyBytes {
		if e.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("a body of %d bytes: status %d, want 413", len(body), e.Status)
		}
	} else if e.Status != want {
		t.Fatalf("status %d, want %d", e.Status, want)
	}
	if len(body) >= 16 && strings.Contains(e.Message, string(body)) {
		t.Fatalf("the message repeats the body: %q", e.Message)
	}
}

func checkUserID(t *testing.T, id string) {
	t.Helper()
	if n := utf8.RuneCountInString(id); n < 1 || n > MaxUserIDLength || !utf8.ValidString(id) {
		t.Fatalf("accepted user_id %q (%d code points)", id, n)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			t.Fatalf("accepted user_id %q with a control character", id)
		}
	}
}

// FuzzSendBody: POST /v1/send bodies. No panic; an accepted body has a valid user_id, a message of 1..4096
// code points, not blank, and a priority 0..9, and holds no NUL where it is stored; anything else is a 400
// (413 past 64 KiB) invalid_request, or message_too_long_after_branding.
func FuzzSendBody(f *testing.F) {
	for _, s := range []string{
		`{"user_id":"u1","message":"hi"}`,
		`{"user_id":"u1","message":"hi","priority":7}`,
		`{"user_id":"u1","message":"hi","priority":null}`,
		`{"user_id":"u1","message":"hi","priority":5.0}`,
		`{"user_id":"u1","message":"hi","priority":"5"}`,
		`{"user_id":"u1","message":"hi","priorty":5}`,
		`{"user_id":"u\u0000","message":"hi"}`,
		`{"user_id":"u1","message":"hi"} {}`,
		`{"user_id":"u1","message":"\ud800"}`,
		`{"user_id":"u1","message":"hi\u0000"}`,
		`{"user_id":"u1","message":" \n\t"}`,
		`{"user_id":"u1","message":"hi","metadata":{"k":"\u0000"}}`,
		`[]`, `{`, ``, `null`, `{"user_id":1e400}`,
	} {
		f.Add([]byte(s), "application/json")
	}
	f.Add([]byte(`{"user_id":"u1","message":"hi"}`), "text/plain")
	f.Add([]byte(`{"user_id":"u1","message":"hi"}`), "application/json; charset=utf-8")
	f.Add(append([]byte(`{"user_id":"u1","message":"`), append(bytes.Repeat([]byte("a"), MaxBodyBytes), '"', '}')...), "application/json")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		var req sendRequest
		if err := decodeRequest(body, contentType, &req); err != nil {
			checkRefusal(t, body, contentType, err)
			return
		}
		userID, err := userIDField(req.UserID)
		if err != nil {
			checkRefusal(t, body, contentType, err)
			return
		}
		checkUserID(t, userID)
		if req.Message == nil {
			return
		}
		if n := brand.Length(*req.Message); n < 1 || n > brand.MaxMessageLength {
			return // send refuses it: a 400
		}
		p, err := parsePriority(req.Priority)
		if err != nil {
			checkRefusal(t, body, contentType, err)
			return
		}
		if p < 0 || p > 9 {
			t.Fatalf("priority %d from %s", p, req.Priority)
		}
		if len(req.Priority) == 0 || string(req.Priority) == "null" {
			if p != DefaultPriority {
				t.Fatalf("absent priority gave %d", p)
			}
		}
		// What validateSend accepts, PostgreSQL can store: no NUL in the body or the metadata.
		v, err := validateSend(req, "Acme", time.Now())
		if err != nil {
			if e, _ := apierror.From(err); e.Code != "message_too_long_after_branding" {
				checkRefusal(t, body, contentType, err)
			}
			return
		}
		if blank(*req.Message) || strings.ContainsRune(v.item.Body, 0) {
			t.Fatalf("accepted message %q", *req.Message)
		}
		for k, val := range v.item.Metadata {
			if strings.ContainsRune(k+val, 0) {
				t.Fatalf("accepted metadata %q: %q", k, val)
			}
		}
	})
}

// FuzzUserBody: POST /v1/link-token and /v1/phone-verification/start bodies, {"user_id": …}.
func FuzzUserBody(f *testing.F) {
	for _, s := range []string{`{"user_id":"u1"}`, `{"user_id":""}`, `{"user_id":null}`, `{"user_id":"a","x":1}`,
		`{"user_id":"` + strings.Repeat("é", 129) + `"}`, `{"user_id":"\u2028"}`, `{}`, `{"user_id":["u"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/link-token", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		userID, err := decodeUser(httptest.NewRecorder(), r)
		if err != nil {
			checkRefusal(t, body, "application/json", err)
			return
		}
		checkUserID(t, userID)
	})
}

// FuzzPathParams: {tracking_id} and {user_id} as chi hands them over, from any request path. No panic; an
// accepted tracking_id is a canonical UUID, an accepted user_id a valid one that escapes back to a path
// segment naming it.
func FuzzPathParams(f *testing.F) {
	for _, s := range []string{"/v1/status/0190a1b2-0000-7000-8000-000000000000", "/v1/status/{0190A1B2-0000-7000-8000-000000000000}",
		"/v1/status/urn:uuid:0190a1b2-0000-7000-8000-000000000000", "/v1/status/nope", "/v1/phone-verification/status/u1",
		"/v1/phone-verification/status/u%2F1", "/v1/phone-verification/status/%ZZ", "/v1/phone-verification/status/%00",
		"/v1/phone-verification/status/%E2%80%A8", "/v1/phone-verification/status/" + strings.Repeat("%C3%A9", 129)} {
		f.Add(s)
	}
	var gotTracking, gotUser string
	var okTracking, okUser bool
	r := chi.NewRouter()
	r.Get("/v1/status/{tracking_id}", func(_ http.ResponseWriter, r *http.Request) {
		gotTracking, okTracking = trackingIDParam(chi.URLParam(r, "tracking_id"))
	})
	r.Get("/v1/phone-verification/status/{user_id}", func(_ http.ResponseWriter, r *http.Request) {
		gotUser, okUser = userIDParam(chi.URLParam(r, "user_id"))
	})
	f.Fuzz(func(t *testing.T, path string) {
		u, err := url.Parse(path)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return // not a request path a server would route
		}
		okTracking, okUser = false, false
		req := &http.Request{Method: "GET", URL: u, Header: http.Header{}}
		r.ServeHTTP(httptest.NewRecorder(), req)
		if okTracking && (len(gotTracking) != 36 || strings.ToLower(gotTracking) != gotTracking) {
			t.Fatalf("tracking_id %q accepted as %q", path, gotTracking)
		}
		if okUser {
			checkUserID(t, gotUser)
			if back, ok := userIDParam(url.PathEscape(gotUser)); !ok || back != gotUser {
				t.Fatalf("user_id %q does not survive escaping: %q %v", gotUser, back, ok)
			}
		}
	})
}

// FuzzIdempotencyKeyHeader: an accepted key is 1..255 printable ASCII characters.
func FuzzIdempotencyKeyHeader(f *testing.F) {
	for _, s := range []string{"k", "order-7781", strings.Repeat("k", 255), strings.Repeat("k", 256), "a b", "ключ", "\x7f", "tab\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if !validIdempotencyKey(key) {
			return
		}
		if len(key) > 255 {
			t.Fatalf("accepted a key of %d bytes", len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				t.Fatalf("accepted %q with byte %#x", key, key[i])
			}
		}
	})
}

// FuzzAuthorizationHeader: the Bearer key in any Authorization header. No panic; a key that passes the shape
// check is "hk_" and 43 base64url characters (32 bytes), so a lookup is never made for anything else.
func FuzzAuthorizationHeader(f *testing.F) {
	for _, s := range []string{"Bearer " + apikey.New().Secret, "bearer " + apikey.New().Secret, "Bearer hk_short", "Basic dXNlcjpwYXNz",
		"Bearer  " + apikey.New().Secret + " ", "Bearer", "", "Bearer hk_" + strings.Repeat("=", 43)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		secret, ok := bearerKey(header)
		if !ok {
			return
		}
		if len(secret) != len(apikey.Scheme)+43 || !strings.HasPrefix(secret, apikey.Scheme) {
			t.Fatalf("key %q passed the shape check", secret)
		}
		if apikey.Digest(secret) == apikey.Digest(secret+"x") {
			t.Fatal("digest collision")
		}
	})
}

// FuzzListQuery: GET /v1/notifications query strings. No panic; a refusal is a 400 invalid_request; an
// accepted query has a limit within 1..MaxListLimit, only known states, a valid user_id, and a cursor only
// when the query carried one.
func FuzzListQuery(f *testing.F) {
	for _, s := range []string{"", "limit=2", "limit=0", "limit=201", "limit=+5", "limit=5&limit=6", "status=queued,retrying",
		"status=nope", "status=", "user_id=u1", "user_id=%00", "created_after=2026-01-02T15:04:05Z", "created_before=yesterday",
		"cursor=AAAA", "cursor=%ZZ", "a=b", "limit=1&cursor=" + strings.Repeat("A", 44), "status=scheduled&user_id=" + strings.Repeat("é", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		filter, limit, cursor, err := listQuery(raw)
		if err != nil {
			e, ok := apierror.From(err)
			if !ok || e.Code != "invalid_request" || e.Status != http.StatusBadRequest {
				t.Fatalf("%q refused with %v, want a 400 invalid_request", raw, err)
			}
			if utf8.RuneCountInString(e.Message) > 512 {
				t.Fatalf("a message of %d characters for %q", utf8.RuneCountInString(e.Message), raw)
			}
			return
		}
		if limit < 1 || limit > store.MaxListLimit {
			t.Fatalf("%q: limit %d", raw, limit)
		}
		for _, st := range filter.Statuses {
			if _, ok := notification.ParseStatus(string(st)); !ok {
				t.Fatalf("%q: state %q", raw, st)
			}
		}
		if filter.UserID != "" {
			checkUserID(t, filter.UserID)
		}
		if cursor != nil && !strings.Contains(raw, "cursor=") {
			t.Fatalf("%q: a cursor from nowhere", raw)
		}
	})
}
