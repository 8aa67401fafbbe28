package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the load balancers and proxies in front of Herald (HERALD_TRUSTED_PROXIES). Only a
// request that reaches Herald from one of them may say, in X-Forwarded-For, who the client is: anyone else
// could write any address there.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads CIDRs ("10.0.0.0/8") and single addresses ("192.0.2.10", "2001:db8::1").
func ParseTrustedProxies(list []string) (TrustedProxies, error) {
	var tp TrustedProxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			tp = append(tp, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", s)
		}
		a = a.Unmap()
		tp = append(tp, netip.PrefixFrom(a, a.BitLen()))
	}
	return tp, nil
}

func (tp TrustedProxies) contains(a netip.Addr) bool {
	for _, p := range tp {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the address of the client that sent r. Without trusted proxies, or when the TCP peer is
// not one of them, it is the peer. When the peer is trusted, X-Forwarded-For (every such header, in order)
// is read from the right — each proxy appends the address it received the request from — and the first
// address that is not a trusted proxy is the client: entries further left were written by the client or by
// proxies Herald does not trust, and could be anything. When every entry is trusted, the left-most is the
// client; when an entry does not parse, the last trusted hop before it is. The zero Addr means the peer's
// address could not be read (not a TCP connection).
func (tp TrustedProxies) ClientAddr(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if len(tp) == 0 || !peer.IsValid() || !tp.contains(peer) {
		return peer
	}
	hops := r.Header.Values("X-Forwarded-For")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			e := strings.TrimSpace(entries[j])
			if e == "" {
				continue
			}
			a, err := netip.ParseAddr(e)
			if err != nil {
				return client
			}
			a = a.Unmap().WithZone("") // a zone means nothing beyond the host that wrote it
			if !tp.contains(a) {
				return a
			}
			client = a
		}
	}
	return client
}

// UntrustedForwarder reports the TCP peer of a request that carries X-Forwarded-For although the peer is not
// a trusted proxy: most likely a load balancer missing from HERALD_TRUSTED_PROXIES (or a client writing the
// header itself). ClientAddr ignores that header, so every client behind such a balancer shares its address.
func (tp TrustedProxies) UntrustedForwarder(r *http.Request) (netip.Addr, bool) {
	if len(r.Header.Values("X-Forwarded-For")) == 0 {
		return netip.Addr{}, false
	}
	peer := remoteAddr(r)
	return peer, peer.IsValid() && !tp.contains(peer)
}

func remoteAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap().WithZone("")
}
