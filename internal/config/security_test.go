package config

import (
	"strings"
	"testing"
	"time"
)

var ingressBase = []string{"ingress", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-username", "herald_bot"}

func TestTrustedProxiesAreCIDRsOrAddresses(t *testing.T) {
	g, err := parse(t, append(ingressBase, "--trusted-proxies", "10.0.0.0/8, 192.0.2.1,2001:db8::/32")...)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Ingress.TrustedProxies, " "); got != "10.0.0.0/8 192.0.2.1 2001:db8::/32" {
		t.Errorf("trusted proxies %q", got)
	}
	_, err = parse(t, append(ingressBase, "--trusted-proxies", "10.0.0.0/8,lb.internal,10.0.0.0/40")...)
	msg := problemsOf(t, err)
	for _, want := range []string{
		`HERALD_TRUSTED_PROXIES (--trusted-proxies): "lb.internal" is neither a CIDR nor an IP address`,
		`HERALD_TRUSTED_PROXIES (--trusted-proxies): "10.0.0.0/40" is neither a CIDR nor an IP address`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
}

// herald dev serves an unauthenticated control API (the simulator) and prints its demo key: it listens on
// loopback unless told otherwise. The other commands keep :8080.
func TestDevListensOnLoopbackByDefault(t *testing.T) {
	unsetenv(t, "HERALD_HTTP_ADDR")
	g, err := parse(t, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if g.Dev.HTTPAddr != "127.0.0.1:8080" {
		t.Errorf("herald dev listens on %q by default, want 127.0.0.1:8080", g.Dev.HTTPAddr)
	}
	if g, _ := parse(t, "dev", "--http-addr", ":9000"); g.Dev.HTTPAddr != ":9000" {
		t.Errorf("--http-addr :9000 gives %q", g.Dev.HTTPAddr)
	}
	if g, _ := parse(t, "sim"); g.Sim.HTTPAddr != ":8080" {
		t.Errorf("herald sim listens on %q by default, want :8080", g.Sim.HTTPAddr)
	}
	if g, _ := parse(t, append(ingressBase[:0:0], ingressBase...)...); g.Ingress.HTTPAddr != ":8080" {
		t.Errorf("herald ingress listens on %q by default, want :8080", g.Ingress.HTTPAddr)
	}
}

// The platform accepts webhook secrets of 1-256 characters of A-Za-z0-9_-; Herald requires at least 16, so
// that the secret cannot be guessed. A shorter one stops the component at start, saying why.
func TestAWebhookSecretShorterThan16IsRefused(t *testing.T) {
	webhook := []string{"webhook", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--phone-hash-key", "0123456789abcdef"}
	for _, secret := range []string{"s", "s3cr3t_-", "0123456789abcde"} {
		for _, args := range [][]string{append(webhook, "--webhook-secret", secret), {"set-url", "--messenger-bot-token", "1:a", "--webhook-secret", secret},
			{"dev", "--webhook-secret", secret}} {
			_, err := parse(t, args...)
			msg := problemsOf(t, err)
			if !strings.Contains(msg, "HERALD_WEBHOOK_SECRET (--webhook-secret): must be 16-256 characters of A-Za-z0-9_-") {
				t.Errorf("herald %s with a %d-character secret: %s", args[0], len(secret), msg)
			}
			if len(secret) > 3 && strings.Contains(msg, secret) {
				t.Errorf("the error quotes the secret: %s", msg)
			}
		}
	}
	if _, err := parse(t, append(webhook, "--webhook-secret", "0123456789abcdef")...); err != nil {
		t.Errorf("a 16-character secret is refused: %v", err)
	}
}

// Retention: bodies 7 days and rows 90 days after the final state, expired tokens and sessions a day after
// expiry, callback events 7 days after they finished, by default; a row outliving its body is refused (a row
// is deleted only once its body is erased).
func TestRetentionSettings(t *testing.T) {
	worker := []string{"worker", "--database-url", "postgres://u@h/db", "--kafka-brokers", "k:9092", "--messenger-bot-token", "1:abc"}
	g, err := parse(t, worker...)
	if err != nil {
		t.Fatal(err)
	}
	r := g.Worker.Retention
	if r.RetentionBodyDays != 7 || r.RetentionNotificationDays != 90 || r.RetentionExpired != 24*time.Hour || r.RetentionCallbackDays != 7 {
		t.Errorf("worker retention defaults: %+v", r)
	}
	if g, err := parse(t, "dev"); err != nil || g.Dev.Retention != r {
		t.Errorf("herald dev retention: %+v %v, want the worker's", g.Dev.Retention, err)
	}
	_, err = parse(t, append(worker, "--retention-body-days", "30", "--retention-notification-days", "14", "--retention-expired=800h", "--retention-callback-days=-1")...)
	msg := problemsOf(t, err)
	for _, want := range []string{
		"HERALD_RETENTION_NOTIFICATION_DAYS (--retention-notification-days): must not be shorter than HERALD_RETENTION_BODY_DAYS (30)",
		"HERALD_RETENTION_EXPIRED (--retention-expired): must be between 0s and 720h",
		"HERALD_RETENTION_CALLBACK_DAYS (--retention-callback-days): must be 0..3650 days",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
}

// /metrics can move to an address of its own (the chart's :9090); empty keeps it on the HTTP address.
func TestMetricsAddress(t *testing.T) {
	g, err := parse(t, ingressBase...)
	if err != nil || g.Ingress.MetricsAddr != "" {
		t.Errorf("ingress metrics address %q (%v), want empty by default", g.Ingress.MetricsAddr, err)
	}
	g, err = parse(t, append(ingressBase, "--metrics-addr", ":9090")...)
	if err != nil || g.Ingress.MetricsAddr != ":9090" {
		t.Errorf("--metrics-addr :9090 gives %q (%v)", g.Ingress.MetricsAddr, err)
	}
	_, err = parse(t, append(ingressBase, "--metrics-addr", ":8080")...)
	if msg := problemsOf(t, err); !strings.Contains(msg, "HERALD_METRICS_ADDR (--metrics-addr): must differ from HERALD_HTTP_ADDR") {
		t.Errorf("the metrics address on the API port: %s", msg)
	}
}

// The ingress's admission bounds have defaults and refuse values that would not bound anything, or would
// leave a tenant's half of the in-flight bytes short of a full batch.
func TestAdmissionBounds(t *testing.T) {
	g, err := parse(t, append(ingressBase[:0:0], ingressBase...)...)
	if err != nil || g.Ingress.MaxConnections != 1024 || g.Ingress.MaxInFlight != 512 || g.Ingress.MaxInFlightBytes != 16<<20 {
		t.Fatalf("defaults: %+v (%v), want 1024 connections, 512 requests, 16 MiB", g.Ingress.Admission, err)
	}
	_, err = parse(t, append(ingressBase[:0:0], append(ingressBase, "--max-connections=-1", "--max-in-flight", "0", "--max-in-flight-bytes", "13107199")...)...)
	msg := problemsOf(t, err)
	for _, want := range []string{"HERALD_MAX_CONNECTIONS (--max-connections):", "HERALD_MAX_IN_FLIGHT (--max-in-flight):",
		"HERALD_MAX_IN_FLIGHT_BYTES (--max-in-flight-bytes): must be at least 13107200"} {
		if !strings.Contains(msg, want) {
			t.Errorf("problems %q lack %q", msg, want)
		}
	}
}
