package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldhq/herald/internal/server"
)

// seriesOf counts the series of a metric family in the default registry, and returns the label values seen
// under one label name.
func seriesOf(t *testing.T, family, label string) (int, map[string]bool) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					values[lp.GetValue()] = true
				}
			}
		}
		return len(mf.GetMetric()), values
	}
	return 0, values
}

func randomToken(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Random method tokens and paths must not grow /metrics: every label value comes from a closed set (the
// route pattern, never the raw path; a known method, else "other").
func TestMetricLabelsStayBoundedUnderRandomMethodsAndPaths(t *testing.T) {
	r := server.NewRouter(discard())
	r.Get("/items/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := httptest.NewServer(r)
	defer srv.Close()

	before, _ := seriesOf(t, "herald_http_requests_total", "method")
	const n = 2000
	sent := map[string]bool{}
	for i := range n {
		method := "X" + randomToken(t)
		seg := randomToken(t)
		path := "/" + seg + "/" + randomToken(t)
		switch i % 4 {
		case 1:
			method = http.MethodGet
		case 2:
			path = "/items/" + seg
		}
		sent[seg] = true
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		res.Body.Close()
	}
	after, methods := seriesOf(t, "herald_http_requests_total", "method")
	if grown := after - before; grown > 20 {
		t.Errorf("%d requests with random methods and paths added %d series to herald_http_requests_total, want a handful", n, grown)
	}
	known := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
		"OPTIONS": true, "CONNECT": true, "TRACE": true, "other": true}
	for m := range methods {
		if !known[m] {
			t.Errorf("method label %q is outside the closed set", m)
			break
		}
	}
	_, routes := seriesOf(t, "herald_http_requests_total", "route")
	for route := range routes {
		for _, part := range strings.Split(route, "/") {
			if sent[part] {
				t.Fatalf("route label %q holds a path segment of a request, not a route pattern", route)
			}
		}
	}
	durations, _ := seriesOf(t, "herald_http_request_duration_seconds", "method")
	if durations > 40 {
		t.Errorf("herald_http_request_duration_seconds has %d series after random methods, want a handful", durations)
	}
}
