package server_test

import (
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/server"
)

// FuzzClientAddr: X-Forwarded-For is whatever the client (or a proxy) wrote. No panic; without a trusted
// peer the header changes nothing; with one, the client is an address the header or the peer names, and
// never a trusted proxy unless every hop is one. `go test` runs the seeds; `make fuzz` runs it for FUZZTIME.
func FuzzClientAddr(f *testing.F) {
	for _, s := range []string{"198.51.100.1", "1.1.1.1, 10.0.0.2", "junk", "", " , ,", "2001:db8::1, 10.0.0.3", "::ffff:1.2.3.4",
		"10.0.0.1, 10.0.0.2", "fe80::1%eth0", strings.Repeat("1.1.1.1,", 1000)} {
		f.Add(s, "10.0.0.9:443")
		f.Add(s, "203.0.113.9:443")
	}
	tp, err := server.ParseTrustedProxies([]string{"10.0.0.0/8", "2001:db8:1::/48"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, xff, remote string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		got := tp.ClientAddr(r)
		peer, perr := netip.ParseAddrPort(remote)
		if perr != nil {
			return
		}
		p := peer.Addr().Unmap()
		if !netip.MustParsePrefix("10.0.0.0/8").Contains(p) && !netip.MustParsePrefix("2001:db8:1::/48").Contains(p) {
			if got != p {
				t.Fatalf("an untrusted peer %s became %s", p, got)
			}
			return
		}
		if !got.IsValid() {
			t.Fatalf("no client address for peer %s and X-Forwarded-For %q", p, xff)
		}
		if got.Zone() != "" {
			t.Fatalf("client %s keeps a zone", got)
		}
		named := got == p.WithZone("")
		for _, e := range strings.Split(xff, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(e)); err == nil && a.Unmap().WithZone("") == got {
				named = true
			}
		}
		if !named {
			t.Fatalf("client %s is neither the peer nor in X-Forwarded-For %q", got, xff)
		}
	})
}
