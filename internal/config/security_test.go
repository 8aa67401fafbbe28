package config

import (
	"strings"
	"testing"
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
