package ingress_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/ingress"
	"github.com/heraldhq/herald/internal/store"
)

// forgedCursor is a well-formed cursor of the unfiltered listing, with any time and tracking id: what a
// client that decoded the opaque string could send back.
func forgedCursor(at time.Time, trackingID string) string {
	return store.ListCursor{CreatedAt: at, TrackingID: trackingID}.Encode(store.ListFilter{})
}

// A cursor that this listing did not hand out is a 400 invalid_request however it is forged, never a 500
// from PostgreSQL (which holds timestamptz from 4713 BC to 294276 AD only).
func TestListRefusesForgedCursors(t *testing.T) {
	t.Parallel()
	e, key := newEnvWithUser(t)
	for range 3 {
		e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
	}
	page, r := e.list(key, "limit=2")
	if r.status != 200 || page.NextCursor == nil {
		t.Fatalf("first page: %d %s", r.status, r.body)
	}
	id := page.Data[1].TrackingID
	for name, cursor := range map[string]string{
		"after PostgreSQL's last year":    forgedCursor(time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), id),
		"before PostgreSQL's first year":  forgedCursor(time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC), id),
		"the largest time a cursor holds": forgedCursor(time.UnixMicro(math.MaxInt64), id),
		"the smallest":                    forgedCursor(time.UnixMicro(math.MinInt64), id),
		"year 10000":                      forgedCursor(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), id),
		"before 1970":                     forgedCursor(time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), id),
		"another filter's":                store.ListCursor{CreatedAt: time.Now(), TrackingID: id}.Encode(store.ListFilter{UserID: "u1"}),
		"truncated":                       (*page.NextCursor)[:20],
		"padded":                          *page.NextCursor + "==",
		"not base64":                      "!!!!",
		"empty":                           "",
	} {
		_, r := e.list(key, "cursor="+url.QueryEscape(cursor))
		t.Run(name, func(t *testing.T) { expectError(t, r, 400, "invalid_request") })
	}
	// What a listing hands out, and what a client could forge within the range it hands out, still list.
	for name, cursor := range map[string]string{
		"handed out":       *page.NextCursor,
		"the nil uuid":     forgedCursor(time.Now(), uuid.Nil.String()),
		"a time long gone": forgedCursor(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), id),
		"a far future":     forgedCursor(time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), id),
	} {
		if _, r := e.list(key, "cursor="+url.QueryEscape(cursor)); r.status != 200 {
			t.Errorf("%s: %d %s, want 200", name, r.status, r.body)
		}
	}
}

// FuzzListCursor: whatever cursor a client sends, raw or a well-formed one carrying any time and tracking
// id, GET /v1/notifications answers 200 or 400 invalid_request, never a 500. It lists from a real
// PostgreSQL, so every cursor that passes validation has been run by the database.
func FuzzListCursor(f *testing.F) {
	// Fuzzing lists faster than a tenant's default request rate (the most a Tenant may set).
	e := newEnvWith(f, func(o *ingress.Options) { o.RequestsPerSecond = 100_000 })
	key := e.tenant("acme", "Acme", nil)
	e.fx.VerifiedUser(e.t, "acme", "u1", 1001)
	for range 3 {
		e.do("POST", "/v1/send", key, map[string]any{"user_id": "u1", "message": "hi"})
	}
	valid := uuid.Must(uuid.NewV7())
	for _, s := range []struct {
		raw    string
		micros int64
		id     []byte
	}{
		{"", time.Now().UnixMicro(), valid[:]},
		{"garbage", math.MaxInt64, uuid.Nil[:]},
		{forgedCursor(time.Now(), valid.String()), math.MinInt64, []byte{1, 2, 3}},
		{"AQ", time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), valid[:]},
		{"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", -210866803200000000 - 1, valid[:]}, // a microsecond before 4713 BC
		{"%00", math.MaxInt64 - 1, valid[:]},
		{"=", 0, nil},
		{"AQ==", -1, valid[:]},
	} {
		f.Add(s.raw, s.micros, s.id)
	}
	f.Fuzz(func(t *testing.T, raw string, micros int64, id []byte) {
		var tracking uuid.UUID
		copy(tracking[:], id)
		for _, cursor := range []string{raw, forgedCursor(time.UnixMicro(micros), tracking.String())} {
			req, err := http.NewRequest("GET", e.srv.URL+"/v1/notifications?cursor="+url.QueryEscape(cursor), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var answer struct{ Error string }
			_ = json.Unmarshal(body, &answer)
			if res.StatusCode != 200 && (res.StatusCode != 400 || answer.Error != "invalid_request") {
				t.Fatalf("cursor %q: %d %s, want 200 or 400 invalid_request", cursor, res.StatusCode, body)
			}
		}
	})
}
