package queue_test

import (
	"encoding/json"
	"testing"

	"github.com/heraldhq/herald/internal/queue"
)

// FuzzParseEnvelope: whatever a topic holds (a producer of another version, a hand-written message), the
// worker's envelope parser does not panic, and what it accepts is a version-1 envelope with a tracking id
// that survives a round trip. `go test` runs the seeds; `make fuzz` runs it for FUZZTIME.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{`{"v":1,"tracking_id":"0190a1b2-0000-7000-8000-000000000000","tenant_id":"acme"}`,
		`{"v":2,"tracking_id":"x"}`, `{"v":1}`, `{"v":1,"tracking_id":""}`, `{"v":"1","tracking_id":"x"}`, `null`, `[]`, ``, `{"v":1e1000}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := queue.ParseEnvelope(b)
		if err != nil {
			return
		}
		if e.V != queue.EnvelopeVersion || e.TrackingID == "" {
			t.Fatalf("accepted %+v from %q", e, b)
		}
		again, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := queue.ParseEnvelope(again); err != nil || back != e {
			t.Fatalf("%+v does not survive a round trip: %+v %v", e, back, err)
		}
	})
}
