package main

import (
	"strings"
	"testing"
)

// The chart sets HERALD_BEHIND_PROXY with its Kubernetes Ingress: an ingress told it stands behind a proxy,
// with no trusted proxy listed, says so at start (every client would share the proxy's address for the
// failed-authentication throttle). The database is unreachable on purpose: the warning comes before it is
// needed.
func TestTheIngressWarnsAtStartOfAnUntrustedProxy(t *testing.T) {
	const warning = "HERALD_TRUSTED_PROXIES is empty"
	for _, c := range []struct {
		behind, trusted string
		warn            bool
	}{
		{"true", "", true},
		{"true", "10.0.0.0/8", false},
		{"false", "", false},
	} {
		t.Setenv("HERALD_DATABASE_URL", "postgres://herald@127.0.0.1:1/herald?connect_timeout=1")
		t.Setenv("HERALD_KAFKA_BROKERS", "127.0.0.1:1")
		t.Setenv("HERALD_MESSENGER_BOT_USERNAME", "herald_bot")
		t.Setenv("HERALD_BEHIND_PROXY", c.behind)
		t.Setenv("HERALD_TRUSTED_PROXIES", c.trusted)
		code, _, stderr := herald(t, "ingress")
		if code == 0 {
			t.Fatalf("behind %s, trusted %q: the ingress ran without a database", c.behind, c.trusted)
		}
		if got := strings.Contains(stderr, warning); got != c.warn {
			t.Errorf("behind %s, trusted %q: warned %v, want %v; the log:\n%s", c.behind, c.trusted, got, c.warn, stderr)
		}
	}
}
