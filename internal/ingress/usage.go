package ingress

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/usage"
)

// usageParams are the query parameters of GET /v1/usage; any other is refused.
var usageParams = []string{"from", "to", "granularity"}

// getUsage is GET /v1/usage (v1 extensions §15): the caller's tenant's counts per hour or UTC day of the
// window, the periods with nothing left out, read from the counts kept as the notifications changed
// (store.Usage) — never from the notifications themselves.
func (a *API) getUsage(w http.ResponseWriter, r *http.Request) error {
	q, err := strictQuery(r.URL.RawQuery, usageParams)
	if err != nil {
		return err
	}
	win, err := usage.ParseWindow(q.Get("from"), q.Get("to"), q.Get("granularity"), time.Now())
	if errors.Is(err, usage.ErrWindow) {
		return apierror.InvalidRequest.With("%s", err.Error())
	}
	// The answer is written as the rows arrive, into a buffer kept from one request to the next, and
	// sent with its length: no slice of the periods, no second copy of them (400 days by the hour are
	// 9,600 periods, about 2 MB). A read that fails half-way answers its error, never half an answer.
	bp := usageBuffers.Get().(*[]byte)
	b := append((*bp)[:0], `{"data":[`...)
	first := true
	err = a.store.EachUsage(r.Context(), principalOf(r.Context()).TenantID, win, func(p *usage.Period) error {
		if !first {
			b = append(b, ',')
		}
		first, b = false, appendPeriod(b, p)
		return nil
	})
	if err == nil {
		b = append(b, "]}\n"...)
		server.WriteJSONBytes(w, http.StatusOK, b)
	}
	if cap(b) <= maxUsageBuffer {
		*bp = b
		usageBuffers.Put(bp)
	}
	return err
}

// usageBuffers are the buffers of GET /v1/usage's answers; one larger than maxUsageBuffer (a window of
// many tenants' periods cannot be asked for: a tenant reads its own) is left to the collector.
var usageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxUsageBuffer = 4 << 20

// appendUsage appends GET /v1/usage's answer, {"data": [{"period_start": …, "accepted": …, …}, …]}, without
// the periods' tenant (the caller's): by hand, as encoding/json would write it (a test compares the two),
// because 400 days by the hour is 9,600 periods, about 2 MB, which reflection took ~20 ms to write.
func appendUsage(b []byte, periods []usage.Period) []byte {
	b = append(b, `{"data":[`...)
	for i := range periods {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPeriod(b, &periods[i])
	}
	return append(b, "]}\n"...)
}

// appendPeriod appends one period of the answer, {"period_start": …, "accepted": …, …}.
func appendPeriod(b []byte, p *usage.Period) []byte {
	b = append(b, `{"period_start":"`...)
	b = p.Start.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"', ',')
	b = p.AppendJSON(b)
	return append(b, '}')
}
