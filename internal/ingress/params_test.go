package ingress

import (
	"net/http"
	"testing"

	"github.com/heraldhq/herald/internal/apierror"
)

// strictQuery refuses, with a message that says why, what GET /v1/notifications, /v1/usage and
// /v1/audit-events refuse: a malformed query, an unknown parameter, one given twice.
func TestStrictQueryRefusalsSayWhy(t *testing.T) {
	known := []string{"from", "to"}
	for raw, want := range map[string]string{
		"from=%ZZ":      "malformed query string",
		"since=1":       `unknown query parameter "since" (known: from, to)`,
		"from=1&from=2": `query parameter "from" given more than once`,
	} {
		_, err := strictQuery(raw, known)
		e, ok := apierror.From(err)
		if !ok || e.Code != "invalid_request" || e.Status != http.StatusBadRequest || e.Message != want {
			t.Errorf("%q: %v, want invalid_request saying %q", raw, err, want)
		}
	}
	q, err := strictQuery("from=1&to=2", known)
	if err != nil || q.Get("from") != "1" || q.Get("to") != "2" {
		t.Errorf("a good query: %v, %v", q, err)
	}
}
