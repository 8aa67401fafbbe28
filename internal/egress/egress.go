// Package egress decides where status callbacks may go. A tenant chooses the URL, so a callback is a
// request Herald makes on a stranger's behalf from inside the installation's network: without a guard, a
// tenant could make Herald POST to the cloud's metadata service, to the cluster's services or to localhost
// (SSRF). The guard:
//
//   - at creation (CheckURL): https only (unless AllowInsecure), a host, no userinfo, at most MaxURLLength;
//     an IP literal that is not allowed is refused at once;
//   - at every connection (Dialer): the address actually dialled — after DNS, for each address tried —
//     must be allowed, checked in the socket's Control function. A name that resolved to a public address
//     when the endpoint was created and to 127.0.0.1 now (DNS rebinding) is refused when it matters;
//   - the sender's HTTP client (internal/callback) takes no proxy from the environment (a proxy would dial
//     in Herald's place and bypass the check) and follows no redirect (a 3xx is a failed attempt, so a
//     redirect to an internal address goes nowhere).
//
// AllowPrivate permits loopback, private, shared (CGNAT), link-local and unspecified addresses (herald dev:
// the simulator's receiver is on 127.0.0.1). Cloud metadata addresses, multicast, broadcast and reserved
// addresses are refused whatever the configuration: no callback receiver lives there.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// MaxURLLength bounds an endpoint's URL.
const MaxURLLength = 2048

// Policy says which URLs and addresses callbacks may reach.
type Policy struct {
	AllowInsecure bool // http:// as well as https:// (HERALD_CALLBACK_ALLOW_INSECURE)
	AllowPrivate  bool // loopback, private, link-local, unspecified addresses (HERALD_CALLBACK_ALLOW_PRIVATE)
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
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, errors.New("url has an invalid port")
		}
	}
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if err := p.CheckAddr(ip); err != nil {
			return nil, fmt.Errorf("url: %v", err)
		}
	}
	return u, nil
}

// BlockedError is a connection the guard refused.
type BlockedError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("address %s is not allowed (%s)", e.Addr, e.Reason)
}

var (
	// metadata are the cloud providers' instance metadata services: AWS, GCP, Azure, OpenStack, Oracle
	// (169.254.169.254), AWS over IPv6 (fd00:ec2::254), Alibaba (100.100.100.200).
	metadata = []netip.Prefix{
		netip.MustParsePrefix("169.254.169.254/32"),
		netip.MustParsePrefix("fd00:ec2::254/128"),
		netip.MustParsePrefix("100.100.100.200/32"),
	}
	// nonPublic are the ranges AllowPrivate opens besides loopback, RFC 1918 / ULA, link-local and
	// unspecified: shared address space (CGNAT, used inside some clusters), "this network", IETF protocol
	// assignments, benchmarking.
	nonPublic = []netip.Prefix{
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("198.18.0.0/15"),
	}
	// never are addresses no receiver can be at.
	never = []netip.Prefix{
		netip.MustParsePrefix("240.0.0.0/4"), // reserved, and 255.255.255.255
	}
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixto4 = netip.MustParsePrefix("2002::/16")
)

// CheckAddr reports whether a callback may connect to ip.
func (p Policy) CheckAddr(ip netip.Addr) error {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	// An IPv6 address that carries an IPv4 one reaches it: judge the IPv4 address.
	if nat64.Contains(ip) {
		b := ip.As16()
		if err := p.CheckAddr(netip.AddrFrom4([4]byte(b[12:16]))); err != nil {
			return err
		}
	} else if sixto4.Contains(ip) {
		b := ip.As16()
		if err := p.CheckAddr(netip.AddrFrom4([4]byte(b[2:6]))); err != nil {
			return err
		}
	}
	for _, m := range metadata {
		if m.Contains(ip) {
			return &BlockedError{ip, "a cloud metadata service"}
		}
	}
	for _, n := range never {
		if n.Contains(ip) {
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
		if n.Contains(ip) {
			return &BlockedError{ip, "not a public address"}
		}
	}
	return nil
}

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
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
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
