package callback_test

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/callback"
	"github.com/heraldhq/herald/internal/egress"
	"github.com/heraldhq/herald/internal/testing/wait"
)

// resolveTo answers every name with addr: the resolver hook a test uses instead of DNS.
func resolveTo(addr string) func(context.Context, string) ([]netip.Addr, error) {
	return func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr(addr)}, nil
	}
}

// An endpoint whose name resolves to a loopback address (DNS rebinding: it may have resolved elsewhere when
// it was created) is never reached when private addresses are not allowed: the attempt fails as blocked and
// is retried like any failure. (The URL keeps http's port 80, as a port other than 80, 443 and 8443 is
// refused before any connection; nothing has to listen there: the connection is refused before it is made.)
func TestANameResolvingToLoopbackIsNotReachedWhenPrivateAddressesAreNot(t *testing.T) {
	e := newEnv(t)
	ep, _ := e.endpoint("acme", "http://hooks.rebind.test/h")
	e.pings("acme", ep, 1)
	opts := e.options()
	opts.Policy = egress.Policy{AllowInsecure: true}
	opts.LookupIP = resolveTo("127.0.0.1")
	before := value(callback.Attempts.WithLabelValues("blocked"))
	e.start(opts)
	wait.Until(t, 10*time.Second, "a blocked attempt", func() bool {
		lastErr := e.firstEvent().LastError
		return lastErr != nil && strings.Contains(*lastErr, "address 127.0.0.1 is not allowed (loopback)")
	})
	if got := value(callback.Attempts.WithLabelValues("blocked")) - before; got < 1 {
		t.Errorf("herald_callback_attempts_total{outcome=blocked} grew by %v", got)
	}
	if n := e.count(`SELECT count(*) FROM callback_events WHERE state = 'pending' AND last_status = 0`); n != 1 {
		t.Errorf("the blocked event is not waiting for a retry")
	}
}

// The HTTP(S)_PROXY of the environment is ignored: a proxy would connect in the sender's place, to
// whatever address it resolves, and the guard would never see it.
func TestAProxyFromTheEnvironmentIsNotUsed(t *testing.T) {
	e := newEnv(t)
	proxy := newReceiver(t, func(int, *http.Request) int { return http.StatusBadGateway })
	t.Setenv("HTTP_PROXY", proxy.srv.URL)
	t.Setenv("HTTPS_PROXY", proxy.srv.URL)
	t.Setenv("NO_PROXY", "")
	rc := newReceiver(t, nil)
	u, _ := url.Parse(rc.srv.URL)
	// A name, not 127.0.0.1: Go never proxies requests to loopback addresses anyway.
	ep, _ := e.endpoint("acme", "http://hooks.example.test:"+u.Port()+"/h")
	e.pings("acme", ep, 1)
	opts := e.options()
	opts.LookupIP = resolveTo("127.0.0.1")
	e.start(opts)
	wait.Until(t, 10*time.Second, "the ping, directly", func() bool { return len(rc.acknowledged()) == 1 })
	if n := len(proxy.requests()); n != 0 {
		t.Errorf("the proxy got %d requests", n)
	}
}

// A URL the policy no longer allows (the configuration changed since the endpoint was created) is not
// called.
func TestAURLThePolicyNoLongerAllowsIsNotCalled(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	ep, _ := e.endpoint("acme", rc.srv.URL) // http://127.0.0.1:…
	e.pings("acme", ep, 1)
	opts := e.options()
	opts.Policy = egress.Policy{AllowPrivate: true} // no http:// any more
	e.start(opts)
	wait.Until(t, 10*time.Second, "a refused attempt", func() bool {
		return e.count(`SELECT count(*) FROM callback_events WHERE last_error = 'url must be https'`) == 1
	})
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
}
