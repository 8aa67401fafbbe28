package egress_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/egress"
)

func TestAddressesByPolicy(t *testing.T) {
	strict, dev := egress.Policy{}, egress.Policy{AllowInsecure: true, AllowPrivate: true}
	for _, c := range []struct {
		addr          string
		strict, allow bool // allowed without, and with AllowPrivate
	}{
		{"93.184.215.14", true, true},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", true, true},
		{"127.0.0.1", false, true},
		{"127.10.0.5", false, true},
		{"::1", false, true},
		{"10.1.2.3", false, true},
		{"172.16.0.1", false, true},
		{"172.31.255.255", false, true},
		{"172.32.0.1", true, true},
		{"192.168.1.1", false, true},
		{"fc00::1", false, true},
		{"fd12:3456::1", false, true},
		{"169.254.1.1", false, true},
		{"fe80::1", false, true},
		{"0.0.0.0", false, true},
		{"::", false, true},
		{"100.64.0.1", false, true}, // shared address space (CGNAT)
		{"::ffff:127.0.0.1", false, true},
		{"::ffff:10.0.0.1", false, true},
		{"64:ff9b::7f00:1", false, true}, // NAT64 of 127.0.0.1
		{"2002:7f00:1::1", false, true},  // 6to4 of 127.0.0.1
		{"2002:5db8:d70e::1", true, true},
		{"::ffff:0:7f00:1", false, true},                      // IPv4-translated (SIIT) 127.0.0.1
		{"::7f00:1", false, false},                            // IPv4-compatible (deprecated, ::/96) 127.0.0.1
		{"::a00:1", false, false},                             // IPv4-compatible 10.0.0.1
		{"::5db8:d70e", false, false},                         // IPv4-compatible, even of a public address: not routed
		{"64:ff9b::a00:1", false, true},                       // NAT64 of 10.0.0.1
		{"64:ff9b::5db8:d70e", true, true},                    // NAT64 of a public address: an IPv6-only cluster's way out
		{"64:ff9b:1::a00:1", false, true},                     // local-use NAT64 (/96) of 10.0.0.1
		{"64:ff9b:1:5db8:d7:e00::", false, true},              // local-use NAT64 (/48) of a public address: still local use
		{"2002:a00:1::1", false, true},                        // 6to4 of 10.0.0.1
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", false, true}, // Teredo, client 127.0.0.1
		{"2001:0:4136:e378:8000:63bf:a2db:28f1", false, true}, // Teredo, client 93.36.215.14: Teredo is not a receiver's address
		{"2001:0:a00:1:8000:63bf:a2db:28f1", false, true},     // Teredo, server 10.0.0.1
		{"fec0::1", false, true},                              // site-local (deprecated)
		{"192.0.2.1", false, true},                            // documentation
		{"198.51.100.7", false, true},                         // documentation
		{"203.0.113.9", false, true},                          // documentation
		{"198.18.0.1", false, true},                           // benchmarking
		{"192.0.0.8", false, true},                            // IETF protocol assignments
		{"192.88.99.1", false, true},                          // 6to4 relay anycast (deprecated)
		{"100.127.255.255", false, true},                      // CGNAT, its last address
		{"100.128.0.1", true, true},                           // past CGNAT
		{"0.1.2.3", false, true},                              // "this network"
		{"2001:db8::1", false, true},                          // documentation
		{"3fff::1", false, true},                              // documentation (RFC 9637)
		{"2001:2::1", false, true},                            // benchmarking
		{"fe80::1%eth0", false, true},                         // link-local, with a zone
		// Cloud metadata, multicast, reserved: never.
		{"169.254.170.2", false, false},                        // ECS task metadata and credentials
		{"169.254.170.23", false, false},                       // EKS Pod Identity
		{"fd00:ec2::23", false, false},                         // EKS Pod Identity over IPv6
		{"168.63.129.16", false, false},                        // Azure's host (WireServer)
		{"64:ff9b::a9fe:a9fe", false, false},                   // NAT64 of 169.254.169.254
		{"64:ff9b:1:a9fe:a9:fe00::", false, false},             // local-use NAT64 (/48) of 169.254.169.254
		{"64:ff9b:1:0:a9:fea9:fe00:0", false, false},           // local-use NAT64 (/64) of 169.254.169.254
		{"2002:a9fe:a9fe::1", false, false},                    // 6to4 of 169.254.169.254
		{"2001:0:4136:e378:8000:63bf:5601:5601", false, false}, // Teredo, client 169.254.169.254 (obfuscated)
		{"::ffff:0:a9fe:a9fe", false, false},                   // IPv4-translated 169.254.169.254
		{"100::1", false, false},                               // discard-only
		{"::ffff:240.0.0.1", false, false},
		{"169.254.169.254", false, false},
		{"::ffff:169.254.169.254", false, false},
		{"fd00:ec2::254", false, false},
		{"100.100.100.200", false, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
		{"255.255.255.255", false, false},
		{"240.0.0.1", false, false},
	} {
		ip := netip.MustParseAddr(c.addr)
		var blocked *egress.BlockedError
		if err := strict.CheckAddr(ip); (err == nil) != c.strict || (err != nil && !errors.As(err, &blocked)) {
			t.Errorf("%s by default: %v, want allowed=%v", c.addr, err, c.strict)
		}
		if err := dev.CheckAddr(ip); (err == nil) != c.allow {
			t.Errorf("%s with AllowPrivate: %v, want allowed=%v", c.addr, err, c.allow)
		}
	}
}

func TestEndpointURLs(t *testing.T) {
	strict, insecure := egress.Policy{}, egress.Policy{AllowInsecure: true}
	for _, c := range []struct {
		url              string
		strict, insecure string // "" when accepted, else a part of the error
	}{
		{"https://hooks.example.com/herald?x=1", "", ""},
		{"https://hooks.example.com:8443/h", "", ""},
		{"http://hooks.example.com/h", "must be https", ""},
		{"ftp://hooks.example.com/h", "must be https", "must be https"},
		{"hooks.example.com/h", "absolute", "absolute"},
		{"/relative", "absolute", "absolute"},
		{"https://user:pass@hooks.example.com/h", "user name", "user name"},
		{"https://user@hooks.example.com/h", "user name", "user name"},
		{"https:///path", "host", "host"},
		{"https://hooks.example.com/h#frag", "fragment", "fragment"},
		{"https://hooks.example.com:0/", "port", "port"},
		{"https://hooks.example.com:99999/", "port", "port"},
		{"https://127.0.0.1/h", "loopback", "loopback"},
		{"https://[::1]/h", "loopback", "loopback"},
		{"https://169.254.169.254/latest/meta-data", "metadata", "metadata"},
		{"https://10.0.0.8/h", "private", "private"},
		// Other spellings of internal addresses: the forms inet_aton reads (one to four parts, decimal,
		// octal or hex), IDNA's full-width digits (net/http maps them), a trailing dot, IPv6 forms.
		{"https://2130706433/h", "loopback", "loopback"},
		{"https://0x7f000001/h", "loopback", "loopback"},
		{"https://0X7F.1/h", "loopback", "loopback"},
		{"https://0x7f.1/h", "loopback", "loopback"},
		{"https://127.1/h", "loopback", "loopback"},
		{"https://127.0.1/h", "loopback", "loopback"},
		{"https://017700000001/h", "loopback", "loopback"},
		{"https://0177.0.0.01/h", "loopback", "loopback"},
		{"https://127.0.0.1./h", "loopback", "loopback"},
		{"https://\uff11\uff12\uff17.\uff10.\uff10.\uff11/h", "loopback", "loopback"},
		{"https://localhost/h", "loopback", "loopback"},
		{"https://api.LocalHost./h", "loopback", "loopback"},
		{"https://0/h", "unspecified", "unspecified"},
		{"https://167772161/h", "private", "private"},
		{"https://0xa9.0xfe.0xa9.0xfe/h", "metadata", "metadata"},
		{"https://2852039166/h", "metadata", "metadata"},
		{"https://169.254.170.2/v2/credentials", "metadata", "metadata"},
		{"https://[::ffff:127.0.0.1]/h", "loopback", "loopback"},
		{"https://[::ffff:7f00:1]/h", "loopback", "loopback"},
		{"https://[::127.0.0.1]/h", "not allowed", "not allowed"},
		{"https://[64:ff9b::10.0.0.1]/h", "private", "private"},
		{"https://[64:ff9b:1::a00:1]/h", "not allowed", "not allowed"},
		{"https://[2002:a00:1::]/h", "private", "private"},
		{"https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/h", "loopback", "loopback"},
		{"https://[fd00:ec2::23]/h", "metadata", "metadata"},
		{"https://[fe80::1%25eth0]/h", "link-local", "link-local"},
		{"https://100.64.0.1/h", "not allowed", "not allowed"},
		{"https://224.0.0.1/h", "multicast", "multicast"},
		{"https://[ff02::1]/h", "multicast", "multicast"},
		{"https://[::]/h", "unspecified", "unspecified"},
		// Numbers that are not addresses stay names (resolved, and checked, when dialled).
		{"https://1.2.3.4.5/h", "", ""},
		{"https://0x1g/h", "", ""},
		{"https://08.1/h", "", ""},
		{"https://4294967296/h", "", ""},
		{"https://123.example.com/h", "", ""},
		{"https://93.184.215.14/h", "", ""},
		{"https://1572394766/h", "", ""}, // 93.184.215.14 in one number: public
		// Ports: 443 and 8443 only (and http's 80 where http is allowed).
		{"https://hooks.example.com:443/h", "", ""},
		{"https://hooks.example.com:8080/h", "port", "port"},
		{"https://hooks.example.com:22/h", "port", "port"},
		{"http://hooks.example.com:80/h", "must be https", ""},
		{"http://hooks.example.com:8443/h", "must be https", ""},
		{"http://hooks.example.com:8080/h", "must be https", "port"},
		{"https://hooks.example.com/" + strings.Repeat("a", egress.MaxURLLength), "at most", "at most"},
		{"mailto:ops@example.com", "absolute", "absolute"},
	} {
		for _, p := range []struct {
			name   string
			policy egress.Policy
			want   string
		}{{"strict", strict, c.strict}, {"insecure", insecure, c.insecure}} {
			_, err := p.policy.CheckURL(c.url)
			switch {
			case p.want == "" && err != nil:
				t.Errorf("%s %q refused: %v", p.name, c.url, err)
			case p.want != "" && (err == nil || !strings.Contains(err.Error(), p.want)):
				t.Errorf("%s %q: %v, want an error about %q", p.name, c.url, err, p.want)
			}
		}
	}
	private := egress.Policy{AllowPrivate: true}
	for _, u := range []string{"https://127.0.0.1:8443/h", "https://0x7f.1:9000/h", "https://localhost:3000/h", "https://hooks.example.com:8080/h"} {
		if _, err := private.CheckURL(u); err != nil {
			t.Errorf("AllowPrivate refuses %s: %v", u, err)
		}
	}
	for _, u := range []string{"https://0xa9fea9fe/latest", "https://[64:ff9b::169.254.169.254]/", "https://240.1/"} {
		if _, err := private.CheckURL(u); err == nil {
			t.Errorf("AllowPrivate accepts %s", u)
		}
	}
}

// The check is on the address actually dialled, after DNS: a name that resolves to a forbidden address
// (DNS rebinding, or a name like localhost.example) is refused when connecting, whatever it resolved to
// when the endpoint was created.
func TestTheDialerChecksTheAddressItConnectsTo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	resolves := map[string][]netip.Addr{
		"rebind.test":   {netip.MustParseAddr("127.0.0.1")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		// A documentation address, then a loopback one: each address tried is checked.
		"mixed.test": {netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("127.0.0.1")},
	}
	lookups := 0
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups++
		if a, ok := resolves[host]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}
	strict := &egress.Dialer{Policy: egress.Policy{AllowInsecure: true}, LookupIP: lookup, Timeout: 300 * time.Millisecond}
	dev := &egress.Dialer{Policy: egress.Policy{AllowInsecure: true, AllowPrivate: true}, LookupIP: lookup}
	// The other spellings of 127.0.0.1 are the address they decode to, as at registration (the resolver, which
	// knows none of them, is not asked).
	for _, host := range []string{"rebind.test", "127.0.0.1", "metadata.test", "mixed.test", "2130706433", "0x7f.1", "127.1", "017700000001"} {
		c, err := strict.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
		var blocked *egress.BlockedError
		if err == nil || !errors.As(err, &blocked) {
			t.Errorf("%s (private not allowed): %v, want a BlockedError", host, err)
		}
		if c != nil {
			c.Close()
		}
	}
	if _, err := strict.DialContext(context.Background(), "tcp", net.JoinHostPort("mixed.test", port)); err == nil ||
		!strings.Contains(err.Error(), "192.0.2.1") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("mixed.test: %v, want both addresses refused", err)
	}
	for _, host := range []string{"2130706433", "0x7f.1"} {
		c, err := dev.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Errorf("%s with AllowPrivate: %v, want a connection to 127.0.0.1", host, err)
			continue
		}
		c.Close()
	}
	c, err := dev.DialContext(context.Background(), "tcp", net.JoinHostPort("rebind.test", port))
	if err != nil {
		t.Fatalf("rebind.test with AllowPrivate: %v", err)
	}
	c.Close()
	if _, err := dev.DialContext(context.Background(), "tcp", net.JoinHostPort("metadata.test", port)); err == nil {
		t.Error("the metadata address was dialled with AllowPrivate")
	}
	if lookups == 0 {
		t.Error("the injected resolver was not used")
	}
}
