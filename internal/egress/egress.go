// Package egress decides where status callbacks may go. A tenant chooses the URL, so a callback is a
// request Herald makes on a stranger's behalf from inside the installation's network: without a guard, a
// tenant could make Herald POST to the cloud's metadata service, to the cluster's services or to localhost
// (SSRF). The guard:
//
//   - at creation (CheckURL): https only (unless AllowInsecure), a host, no userinfo, at most MaxURLLength,
//     port 443 or 8443 (unless AllowPrivate); a host that is an address in any spelling a resolver or
//     net/http reads as one (HostAddr: 2130706433, 0x7f.1, 127.1, full-width digits, ::ffff:127.0.0.1, …) is
//     judged as that address, and refused at once when it is not allowed;
//   - at every connection (Dialer): the address actually dialled — HostAddr's for such a host, otherwise
//     each address the name resolves to — must be allowed, checked in the socket's Control function. A name
//     that resolved to a public address when the endpoint was created and to 127.0.0.1 now (DNS rebinding)
//     is refused when it matters;
//   - the sender's HTTP client (internal/callback) takes no proxy from the environment (a proxy would dial
//     in Herald's place and bypass the check) and follows no redirect (a 3xx is a failed attempt, so a
//     redirect to an internal address goes nowhere).
//
// CheckAddr is the one classification of addresses, used by both. AllowPrivate permits loopback, private,
// shared (CGNAT), link-local, unspecified and the other special-purpose unicast ranges, and any port
// (herald dev: the simulator's receiver is on 127.0.0.1). Cloud metadata addresses, multicast and reserved
// addresses are refused whatever the configuration: no callback receiver lives there.
package egress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/idna"
)

// MaxURLLength bounds an endpoint's URL.
const MaxURLLength = 2048

// Policy says which URLs and addresses callbacks may reach.
type Policy struct {
	AllowInsecure bool // http:// as well as https:// (HERALD_CALLBACK_ALLOW_INSECURE)
	AllowPrivate  bool // loopback, private, link-local, unspecified addresses, any port (HERALD_CALLBACK_ALLOW_PRIVATE)
}

// CheckURL validates an endpoint's URL under the policy and returns it parsed. Its errors are meant for
// the tenant.
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("url must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return nil, errors.New("url must be an absolute URL")
	}
	if u.Scheme != "https" && (u.Scheme != "http" || !p.AllowInsecure) {
		return nil, errors.New("url must be https")
	}
	if u.User != nil {
		return nil, errors.New("url must not contain a user name or password")
	}
	if u.Hostname() == "" {
		return nil, errors.New("url must name a host")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, errors.New("url must not contain a fragment")
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if s := u.Port(); s != "" {
		if port, err = strconv.Atoi(s); err != nil || port < 1 || port > 65535 {
			return nil, errors.New("url has an invalid port")
		}
	}
	if !p.AllowPrivate && port != 443 && port != 8443 && (port != 80 || u.Scheme != "http") {
		return nil, fmt.Errorf("url: port %d is not allowed; use 443 or 8443", port)
	}
	if ip, ok := HostAddr(u.Hostname()); ok {
		if err := p.CheckAddr(ip); err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
	} else if isLocalhost(u.Hostname()) && !p.AllowPrivate {
		// RFC 6761: localhost and its subdomains are the loopback, whatever DNS says.
		return nil, errors.New("url: localhost is not allowed (loopback)")
	}
	return u, nil
}

// isLocalhost reports whether a host name is localhost or one of its subdomains.
func isLocalhost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// HostAddr returns the address a URL's host names when it is an address in any spelling the network stack
// reads as one, rather than a name to resolve: net/http first maps a host through IDNA (full-width digits
// become ASCII ones); then an IPv6 address (brackets optional), or an IPv4 address as inet_aton reads it —
// one to four parts, each decimal, octal (a leading 0) or hex (0x), the last filling the bytes left
// (2130706433, 0x7f.1, 127.1 and 0177.0.0.1 are all 127.0.0.1) — with one trailing dot or none.
func HostAddr(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			ascii, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return netip.Addr{}, false
			}
			host = ascii
			break
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, true
	}
	return parseIPv4Forms(strings.TrimSuffix(host, "."))
}

// parseIPv4Forms reads the IPv4 forms of inet_aton.
func parseIPv4Forms(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, part := range parts {
		n, ok := parseIPv4Part(part)
		if !ok {
			return netip.Addr{}, false
		}
		bits := 8
		if i == len(parts)-1 {
			bits = 8 * (5 - len(parts)) // the last part fills the bytes left
		}
		if n >= 1<<bits {
			return netip.Addr{}, false
		}
		v = v<<bits | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Part reads one part: 0x and hex digits, 0 and octal digits, or decimal digits.
func parseIPv4Part(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
		if s == "" {
			return 0, true // inet_aton-like readers differ on a bare 0x; reading it as 0 refuses more
		}
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	n, err := strconv.ParseUint(s, base, 64) // with a base given, it takes digits only: no sign, prefix or _
	if err != nil || n > math.MaxUint32 {
		return 0, false
	}
	return n, true
}

// BlockedError is a connection the guard refused.
type BlockedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("address %s is not allowed (%s)", e.Addr, e.Reason)
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

var (
	// metadata are the cloud providers' instance metadata and credential services: AWS, GCP, Azure,
	// OpenStack, Oracle (169.254.169.254; fd00:ec2::254 over IPv6), AWS ECS task credentials (169.254.170.2),
	// EKS Pod Identity (169.254.170.23, fd00:ec2::23), Alibaba (100.100.100.200), Azure's host endpoint
	// (WireServer, 168.63.129.16: a public address every Azure VM reaches), Oracle's former address
	// (192.0.0.192).
	metadata = prefixes("169.254.169.254/32", "fd00:ec2::254/128", "169.254.170.2/32", "169.254.170.23/32",
		"fd00:ec2::23/128", "100.100.100.200/32", "168.63.129.16/32", "192.0.0.192/32")
	// nonPublic are the special-purpose unicast ranges AllowPrivate opens besides loopback, RFC 1918 / ULA,
	// link-local and unspecified (the IANA special-purpose registries): shared address space (CGNAT, used
	// inside some clusters), "this network", IETF protocol assignments, documentation, benchmarking, AS112,
	// AMT, the deprecated 6to4 relay anycast; in IPv6 the local-use NAT64 prefix, the IETF protocol
	// assignments (Teredo among them), documentation, benchmarking, SRv6 SIDs, deprecated site-local.
	nonPublic = prefixes(
		"100.64.0.0/10", "0.0.0.0/8", "192.0.0.0/24", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",
		"198.18.0.0/15", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.175.48.0/24",
		"64:ff9b:1::/48", "2001::/23", "2001:db8::/32", "3fff::/20", "2001:2::/48", "5f00::/16", "fec0::/10")
	// never are addresses no receiver can be at: reserved IPv4 (and 255.255.255.255), IPv6's discard-only
	// prefix.
	never = prefixes("240.0.0.0/4", "100::/64")

	// IPv6 addresses that carry an IPv4 one: a packet to them reaches (or is translated to) the IPv4
	// address, so that address is judged too.
	nat64         = netip.MustParsePrefix("64:ff9b::/96")   // well-known NAT64 prefix: the IPv4 address in the last 4 bytes
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64: where the IPv4 address sits depends on the prefix length used
	sixto4        = netip.MustParsePrefix("2002::/16")      // 6to4: bytes 2-5
	teredo        = netip.MustParsePrefix("2001::/32")      // Teredo: the server in bytes 4-7, the client inverted in bytes 12-15
	ipv4Mapped    = netip.MustParsePrefix("::ffff:0:0/96")
	ipv4Translate = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT
	ipv4Compat    = netip.MustParsePrefix("::/96")           // deprecated (RFC 4291); :: and ::1 aside
)

// embedded returns the IPv4 addresses an IPv6 address carries.
func embedded(ip netip.Addr) []netip.Addr {
	b := ip.As16()
	v4 := func(x []byte) netip.Addr { return netip.AddrFrom4([4]byte(x)) }
	switch {
	case nat64.Contains(ip), ipv4Translate.Contains(ip), ipv4Compat.Contains(ip):
		return []netip.Addr{v4(b[12:16])}
	case nat64Local.Contains(ip):
		// RFC 6052's formats for a /48, /56, /64 and /96 prefix (byte 8 is reserved, skipped).
		return []netip.Addr{
			v4([]byte{b[6], b[7], b[9], b[10]}), v4([]byte{b[7], b[9], b[10], b[11]}), v4(b[9:13]), v4(b[12:16]),
		}
	case sixto4.Contains(ip):
		return []netip.Addr{v4(b[2:6])}
	case teredo.Contains(ip):
		return []netip.Addr{v4(b[4:8]), v4([]byte{^b[12], ^b[13], ^b[14], ^b[15]})}
	}
	return nil
}

// CheckAddr reports whether a callback may connect to ip: the one classification of addresses, for the URLs
// at creation and for every connection.
func (p Policy) CheckAddr(ip netip.Addr) error {
	if ipv4Mapped.Contains(ip.WithZone("")) {
		ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	}
	plain := ip.WithZone("")
	if plain.Is6() && plain != netip.IPv6Unspecified() && plain != netip.IPv6Loopback() {
		for _, v4 := range embedded(plain) {
			var blocked *BlockedError
			if err := p.CheckAddr(v4); errors.As(err, &blocked) {
				return &BlockedError{ip, "carries " + blocked.describe()}
			}
		}
		if ipv4Compat.Contains(plain) {
			return &BlockedError{ip, "reserved"}
		}
	}
	for _, m := range metadata {
		if m.Contains(plain) {
			return &BlockedError{ip, "a cloud metadata service"}
		}
	}
	for _, n := range never {
		if n.Contains(plain) {
			return &BlockedError{ip, "reserved"}
		}
	}
	if ip.IsMulticast() {
		return &BlockedError{ip, "multicast"}
	}
	if p.AllowPrivate {
		return nil
	}
	switch {
	case ip.IsLoopback():
		return &BlockedError{ip, "loopback"}
	case ip.IsPrivate():
		return &BlockedError{ip, "private"}
	case ip.IsLinkLocalUnicast():
		return &BlockedError{ip, "link-local"}
	case ip.IsUnspecified():
		return &BlockedError{ip, "unspecified"}
	}
	for _, n := range nonPublic {
		if n.Contains(plain) {
			return &BlockedError{ip, "not a public address"}
		}
	}
	return nil
}

// describe is the address and the reason, for an address that carries this one.
func (e *BlockedError) describe() string { return fmt.Sprintf("%s: %s", e.Addr, e.Reason) }

// Dialer connects callbacks to allowed addresses only.
type Dialer struct {
	Policy Policy
	// LookupIP resolves a host name (tests inject names that resolve to forbidden addresses); the system
	// resolver when nil.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
	// Timeout bounds one connection attempt; 5 s when zero.
	Timeout time.Duration
}

// DialContext resolves the host, then connects to its addresses in turn; each connection is checked in
// its Control function, on the address the socket actually connects to.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, ok := HostAddr(host); ok {
		addrs = []netip.Addr{ip} // the address CheckURL judged, whatever a resolver would make of its spelling
	} else {
		lookup := d.LookupIP
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		if addrs, err = lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%s has no address", host)
		}
	}
	nd := net.Dialer{Timeout: d.Timeout, Control: d.control}
	if nd.Timeout == 0 {
		nd.Timeout = 5 * time.Second
	}
	var errs []error
	for _, ip := range addrs {
		conn, err := nd.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// control is the last word on every connection: address is the ip:port being connected to.
func (d *Dialer) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("unexpected address %q", address)
	}
	return d.Policy.CheckAddr(ap.Addr())
}
