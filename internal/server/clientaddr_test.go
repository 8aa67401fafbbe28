package server_test

import (
	"net/http/httptest"
	"testing"

	"github.com/heraldhq/herald/internal/server"
)

func TestClientAddrTrustsForwardedForOnlyFromTrustedProxies(t *testing.T) {
	tp, err := server.ParseTrustedProxies([]string{"10.0.0.0/8", "192.0.2.10", "2001:db8:1::/48"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		proxies server.TrustedProxies
		peer    string
		xff     []string
		want    string
	}{
		{"no trusted proxies: the peer, whatever the header says", nil, "203.0.113.9:4000", []string{"198.51.100.1"}, "203.0.113.9"},
		{"an untrusted peer: the peer", tp, "203.0.113.9:4000", []string{"198.51.100.1"}, "203.0.113.9"},
		{"a trusted peer without the header: the peer", tp, "10.1.2.3:4000", nil, "10.1.2.3"},
		{"a trusted peer: the right-most untrusted hop", tp, "10.1.2.3:4000", []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"a spoofed left part is never reached", tp, "10.1.2.3:4000", []string{"1.1.1.1, 2.2.2.2"}, "2.2.2.2"},
		{"several headers are one list, in order", tp, "192.0.2.10:80", []string{"198.51.100.1", "10.0.0.7"}, "198.51.100.1"},
		{"every hop trusted: the left-most", tp, "10.1.2.3:4000", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"a malformed hop: the last trusted hop before it", tp, "10.1.2.3:4000", []string{"198.51.100.1, junk, 10.0.0.2"}, "10.0.0.2"},
		{"IPv6 peer and hops", tp, "[2001:db8:1::5]:443", []string{"2001:db8:ffff::1, 2001:db8:1::6"}, "2001:db8:ffff::1"},
		{"IPv4-mapped IPv6 is IPv4", tp, "[::ffff:10.0.0.3]:80", []string{"::ffff:198.51.100.4"}, "198.51.100.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := tc.proxies.ClientAddr(r).String(); got != tc.want {
				t.Errorf("ClientAddr = %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := server.ParseTrustedProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("10.0.0.0/33 parsed")
	}
	if _, err := server.ParseTrustedProxies([]string{"proxy.example"}); err == nil {
		t.Error("a host name parsed")
	}
}
