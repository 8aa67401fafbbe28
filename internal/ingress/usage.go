package ingress

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/apierror"
	"github.com/heraldhq/herald/internal/usage"
)

// usageParams are the query parameters of GET /v1/usage; any other is refused.
var usageParams = []string{"from", "to", "granularity"}

// usagePeriod is one period of GET /v1/usage: its start and its counts, without the tenant (the caller's).
type usagePeriod struct {
	Start time.Time `json:"period_start"`
	usage.Counts
}

// usageResponse is GET /v1/usage's answer.
type usageResponse struct {
	Data []usagePeriod `json:"data"`
}

// getUsage is GET /v1/usage (v1 extensions §15): the caller's tenant's counts per hour or UTC day of the
// window, the periods with nothing left out, read from the counts kept as the notifications changed
// (store.Usage) — never from the notifications themselves.
func (a *API) getUsage(w http.ResponseWriter, r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return apierror.InvalidRequest.With("malformed query string")
	}
	for name, values := range q {
		if !slices.Contains(usageParams, name) {
			return apierror.InvalidRequest.With("unknown query parameter %q (known: %s)", truncate(name, 64), strings.Join(usageParams, ", "))
		}
		if len(values) > 1 {
			return apierror.InvalidRequest.With("query parameter %q given more than once", name)
		}
	}
	win, err := usage.ParseWindow(q.Get("from"), q.Get("to"), q.Get("granularity"), time.Now())
	if errors.Is(err, usage.ErrWindow) {
		return apierror.InvalidRequest.With("%s", err.Error())
	}
	periods, err := a.store.Usage(r.Context(), principalOf(r.Context()).TenantID, win)
	if err != nil {
		return err
	}
	out := usageResponse{Data: make([]usagePeriod, len(periods))}
	for i, p := range periods {
		out.Data[i] = usagePeriod{Start: p.Start, Counts: p.Counts}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
