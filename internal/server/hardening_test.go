package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/heraldhq/herald/internal/server"
	"github.com/heraldhq/herald/internal/testing/httpprobe"
)

// serve runs h with ServeListener on a loopback port until the test ends and returns its address.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.ServeListener(ctx, ln, h, discard()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return ln.Addr().String()
}

// A 405 names the methods the route allows (RFC 9110 §15.5.6), in the shared error body, also under a
// component's subrouter.
func TestMethodNotAllowedNamesTheAllowedMethods(t *testing.T) {
	r := server.NewRouter(discard())
	r.Route("/v1", func(r chi.Router) {
		r.Get("/things/{id}", func(http.ResponseWriter, *http.Request) {})
		r.Delete("/things/{id}", func(http.ResponseWriter, *http.Request) {})
	})
	r.Post("/hook", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(r)
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		allow        []string
	}{
		{"PUT", "/v1/things/7", []string{"DELETE", "GET"}},
		{"GET", "/hook", []string{"POST"}},
		{"POST", "/healthz", []string{"GET"}},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d, want 405", tc.method, tc.path, res.StatusCode)
			continue
		}
		var allow []string
		for _, v := range res.Header.Values("Allow") {
			for _, m := range strings.Split(v, ",") {
				allow = append(allow, strings.TrimSpace(m))
			}
		}
		slices.Sort(allow)
		if !slices.Equal(allow, tc.allow) {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, allow, tc.allow)
		}
		var m map[string]string
		if err := json.Unmarshal(body, &m); err != nil || m["error"] != "invalid_request" || m["message"] == "" || m["request_id"] == "" || len(m) != 3 {
			t.Errorf("%s %s: body %s, want {\"error\":\"invalid_request\",\"message\":…}", tc.method, tc.path, body)
		}
	}
}

// Oversized headers and URLs are refused with a 4xx, never a 5xx or a dropped connection.
func TestOversizedHeadersAndURLsAre4xx(t *testing.T) {
	addr := serve(t, server.NewRouter(discard()))
	httpprobe.CheckOversized(t, addr, "/healthz")
}

// Slowloris: 200 connections that trickle their headers hold no request up, and the server closes them
// once the header timeout has passed.
func TestTricklingClientsDoNotDelayOthersAndAreCut(t *testing.T) {
	addr := serve(t, server.NewRouter(discard()))
	tr := httpprobe.StartTrickle(t, addr, 200, 100*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // every trickler has started its request
	start := time.Now()
	res, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != 200 || took > time.Second {
		t.Errorf("a normal request beside 200 trickling connections: status %d after %s, want 200 within 1 s", res.StatusCode, took)
	}
	took := tr.WaitClosed(t, 7*time.Second)
	t.Logf("the trickling connections were cut after %s", took)
}
