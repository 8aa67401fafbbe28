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
		// Cloud metadata, multicast, reserved: never.
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
	if _, err := (egress.Policy{AllowPrivate: true}).CheckURL("https://127.0.0.1:8443/h"); err != nil {
		t.Errorf("AllowPrivate refuses 127.0.0.1: %v", err)
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
		// One public address that does not answer, then a loopback one: the second is refused too.
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
	for _, host := range []string{"rebind.test", "127.0.0.1", "metadata.test", "mixed.test"} {
		c, err := strict.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
		var blocked *egress.BlockedError
		if err == nil || !errors.As(err, &blocked) {
			t.Errorf("%s (private not allowed): %v, want a BlockedError", host, err)
		}
		if c != nil {
			c.Close()
		}
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
