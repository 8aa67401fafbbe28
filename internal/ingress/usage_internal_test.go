package ingress

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/usage"
)

// GET /v1/usage's answer, written by hand (appendUsage), is byte for byte what encoding/json writes for
// the same periods without their tenant — the contract's names, order and time format — for no periods,
// one, and 400 days by the hour with counts of every size.
func TestUsageAnswerIsWhatEncodingJSONWrites(t *testing.T) {
	type period struct {
		Start time.Time `json:"period_start"`
		usage.Counts
	}
	type answer struct {
		Data []period `json:"data"`
	}
	r := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2025, 10, 24, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, 9600} {
		periods := make([]usage.Period, n)
		want := answer{Data: []period{}}
		for i := range periods {
			p := usage.Period{TenantID: "acme", Start: start.Add(time.Duration(i) * time.Hour)}
			for j, f := range p.Fields() {
				*f = r.Int64N(int64(1) << (j * 7)) // from 0 to past 2^56
			}
			if i == n/2 {
				p.Accepted = -1 // never stored, but written as any int64 would be
			}
			periods[i] = p
			want.Data = append(want.Data, period{p.Start, p.Counts})
		}
		wantJSON, err := apierror.EncodeJSON(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendUsage(nil, periods); !bytes.Equal(got, wantJSON) {
			t.Errorf("%d periods: appendUsage wrote\n%.300s\nwant\n%.300s", n, got, wantJSON)
		}
	}
}
