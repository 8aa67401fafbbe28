package egress_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/egress"
)

// The fuzz targets of the guard on callback URLs and addresses. `go test` runs their seeds; `make fuzz` runs
// each for FUZZTIME.

// spell writes the IPv4 address a the way form says: 1 to 4 parts (form's low 2 bits), each in decimal,
// octal or hex (the next bits, 2 per part), hex digits in upper case on bit 10, a trailing dot on bit 11.
func spell(a [4]byte, form uint16) string {
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	n := int(form&3) + 1
	var parts []uint32
	for i := range n - 1 {
		parts = append(parts, uint32(a[i]))
	}
	last := v
	if n > 1 {
		last = v & (1<<(8*(5-n)) - 1)
	}
	parts = append(parts, last)
	var out []string
	for i, p := range parts {
		var s string
		switch form >> (2 + 2*i) & 3 {
		case 1:
			s = fmt.Sprintf("0%o", p)
		case 2:
			s = fmt.Sprintf("0x%x", p)
			if form&(1<<10) != 0 {
				s = strings.ToUpper(s)
			}
		default:
			s = fmt.Sprint(p)
		}
		out = append(out, s)
	}
	s := strings.Join(out, ".")
	if form&(1<<11) != 0 {
		s += "."
	}
	return s
}

// Every spelling of an IPv4 address that inet_aton reads is that address, at registration and at dial time
// (HostAddr), and a URL with it is refused exactly when the address is.
func FuzzIPv4Spellings(f *testing.F) {
	for _, c := range []struct {
		a    [4]byte
		form uint16
	}{
		{[4]byte{127, 0, 0, 1}, 0}, {[4]byte{127, 0, 0, 1}, 3}, {[4]byte{127, 0, 0, 1}, 1 | 2<<2},
		{[4]byte{169, 254, 169, 254}, 3 | 2<<2 | 2<<4 | 2<<6 | 2<<8}, {[4]byte{10, 0, 0, 1}, 2 | 1<<2 | 1<<4 | 1<<6},
		{[4]byte{93, 184, 215, 14}, 0}, {[4]byte{0, 0, 0, 0}, 1<<11 | 2<<2}, {[4]byte{255, 255, 255, 255}, 3 | 1<<10},
	} {
		f.Add(c.a[0], c.a[1], c.a[2], c.a[3], c.form)
	}
	strict := egress.Policy{}
	f.Fuzz(func(t *testing.T, b0, b1, b2, b3 byte, form uint16) {
		a := [4]byte{b0, b1, b2, b3}
		host := spell(a, form)
		ip, ok := egress.HostAddr(host)
		if !ok || ip != netip.AddrFrom4(a) {
			t.Fatalf("HostAddr(%q) = %v, %v; want %v", host, ip, ok, netip.AddrFrom4(a))
		}
		_, urlErr := strict.CheckURL("https://" + host + "/h")
		addrErr := strict.CheckAddr(netip.AddrFrom4(a))
		if (urlErr == nil) != (addrErr == nil) {
			t.Fatalf("https://%s/h: %v, but its address %v: %v", host, urlErr, netip.AddrFrom4(a), addrErr)
		}
	})
}

// The classification of addresses: AllowPrivate never refuses what the default allows; an IPv6 address
// that carries an IPv4 one (mapped, translated, compatible, NAT64, 6to4, Teredo) is refused whenever that
// IPv4 address is, under either policy; and any 16 bytes, with or without a zone, are classified without
// a panic.
func FuzzCheckAddr(f *testing.F) {
	f.Add(netip.MustParseAddr("::1").AsSlice(), []byte{127, 0, 0, 1}, false)
	f.Add(netip.MustParseAddr("2606:2800:21f:cb07:6820:80da:af6b:8b2c").AsSlice(), []byte{169, 254, 169, 254}, true)
	f.Add(netip.MustParseAddr("fe80::1").AsSlice(), []byte{10, 1, 2, 3}, true)
	f.Add(netip.MustParseAddr("64:ff9b:1::").AsSlice(), []byte{93, 184, 215, 14}, false)
	f.Add(netip.MustParseAddr("2001:0:4136:e378:8000:63bf:80ff:fffe").AsSlice(), []byte{224, 0, 0, 1}, false)
	policies := []egress.Policy{{}, {AllowPrivate: true}}
	f.Fuzz(func(t *testing.T, b16, b4 []byte, zoned bool) {
		if len(b16) < 16 || len(b4) < 4 {
			return
		}
		ip := netip.AddrFrom16([16]byte(b16[:16]))
		if zoned {
			ip = ip.WithZone("eth0")
		}
		if policies[0].CheckAddr(ip) == nil && policies[1].CheckAddr(ip) != nil {
			t.Fatalf("%v: allowed by default, refused with AllowPrivate", ip)
		}
		v4 := netip.AddrFrom4([4]byte(b4[:4]))
		x := v4.As4()
		ib := ip.As16()
		carriers := map[string]netip.Addr{
			"mapped":     netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: x[0], 13: x[1], 14: x[2], 15: x[3]}),
			"translated": netip.AddrFrom16([16]byte{8: 0xff, 9: 0xff, 12: x[0], 13: x[1], 14: x[2], 15: x[3]}),
			"compatible": netip.AddrFrom16([16]byte{12: x[0], 13: x[1], 14: x[2], 15: x[3]}),
			"NAT64":      netip.AddrFrom16([16]byte{1: 0x64, 2: 0xff, 3: 0x9b, 12: x[0], 13: x[1], 14: x[2], 15: x[3]}),
			"local NAT64/48": netip.AddrFrom16([16]byte{1: 0x64, 2: 0xff, 3: 0x9b, 5: 1, 6: x[0], 7: x[1], 9: x[2], 10: x[3],
				11: ib[11], 12: ib[12], 13: ib[13], 14: ib[14], 15: ib[15]}),
			"local NAT64/96": netip.AddrFrom16([16]byte{1: 0x64, 2: 0xff, 3: 0x9b, 5: 1, 12: x[0], 13: x[1], 14: x[2], 15: x[3]}),
			"6to4":           netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: x[0], 3: x[1], 4: x[2], 5: x[3], 6: ib[6], 15: ib[15]}),
			"Teredo server":  netip.AddrFrom16([16]byte{0: 0x20, 1: 0x01, 4: x[0], 5: x[1], 6: x[2], 7: x[3], 8: ib[8], 12: ib[12], 13: ib[13], 14: ib[14], 15: ib[15]}),
			"Teredo client":  netip.AddrFrom16([16]byte{0: 0x20, 1: 0x01, 4: ib[4], 5: ib[5], 6: ib[6], 7: ib[7], 12: ^x[0], 13: ^x[1], 14: ^x[2], 15: ^x[3]}),
		}
		for _, p := range policies {
			if p.CheckAddr(v4) == nil {
				continue
			}
			for name, c := range carriers {
				if c == netip.IPv6Unspecified() || c == netip.IPv6Loopback() {
					continue // ::/96 without the IPv4 address: these are what they are
				}
				if err := p.CheckAddr(c); err == nil {
					t.Errorf("%+v: %v is refused, but %s %v that carries it is allowed", p, v4, name, c)
				}
			}
		}
	})
}

// A URL is judged the same when the sender reads it back: the endpoint keeps the URL CheckURL returned, in
// its String form, and the sender checks that again before every attempt.
func FuzzCheckURL(f *testing.F) {
	for _, u := range []string{
		"https://hooks.example.com/herald?x=1", "https://2130706433/h", "https://\uff11\uff12\uff17.\uff10.\uff10.\uff11/h",
		"https://[::ffff:127.0.0.1]:8443/h", "https://[fe80::1%25eth0]/h", "https://bücher.example/h", "http://0x7f.1/",
		"https://127.0.0.1./h", "https://localhost./h", "https://a.b.c.d.e/", "https://%E2%91%A0.example/",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, p := range []egress.Policy{{}, {AllowInsecure: true, AllowPrivate: true}} {
			u, err := p.CheckURL(raw)
			if err != nil {
				continue
			}
			if _, err := p.CheckURL(u.String()); err != nil {
				t.Fatalf("%+v: %q accepted, but its stored form %q refused: %v", p, raw, u.String(), err)
			}
			if ip, ok := egress.HostAddr(u.Hostname()); ok {
				if err := p.CheckAddr(ip); err != nil {
					t.Fatalf("%+v: %q accepted, but its host is %v: %v", p, raw, ip, err)
				}
			}
		}
	})
}
