package server_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/server"
)

// With a metrics address of its own, /metrics is served there and nowhere else: the API port (the one an
// Ingress publishes) answers 404 for it. Both listeners stop together.
func TestMetricsCanBeServedOnAPortOfTheirOwn(t *testing.T) {
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := probe.Addr().String()
	probe.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.ServeListener(ctx, api, server.NewRouter(discard()), discard(), server.ServeOptions{MetricsAddr: metricsAddr})
	}()
	get := func(url string) (int, string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			res, err := http.Get(url)
			if err == nil {
				var b strings.Builder
				buf := make([]byte, 32<<10)
				for {
					n, err := res.Body.Read(buf)
					b.Write(buf[:n])
					if err != nil {
						break
					}
				}
				res.Body.Close()
				return res.StatusCode, b.String()
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", url, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if code, _ := get("http://" + api.Addr().String() + "/healthz"); code != 200 {
		t.Errorf("GET /healthz on the API address: %d, want 200 (probes stay there)", code)
	}
	if code, _ := get("http://" + api.Addr().String() + "/metrics"); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the API address: %d, want 404", code)
	}
	if code, body := get("http://" + metricsAddr + "/metrics"); code != 200 || !strings.Contains(body, `herald_http_requests_total{method="GET",route="/healthz",status="200"}`) {
		t.Errorf("GET /metrics on the metrics address: %d, want 200 with the API listener's request metrics", code)
	}
	if code, _ := get("http://" + metricsAddr + "/v1/send"); code != http.StatusNotFound {
		t.Errorf("the metrics address serves more than /metrics: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if _, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
		t.Error("the metrics listener is still open after shutdown")
	}
}

// Without one, /metrics stays on the one listener, as before (herald dev, and installs that set nothing).
func TestMetricsStayOnTheHTTPAddressByDefault(t *testing.T) {
	addr := serve(t, server.NewRouter(discard()))
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("GET /metrics: %d, want 200", res.StatusCode)
	}
}
