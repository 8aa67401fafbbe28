package callback_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/testing/wait"
)

// What is stored of a failed attempt is the error's text, and an error can quote what the receiver sent:
// a certificate whose names hold a NUL (U+0000), which PostgreSQL's text cannot hold. The attempt is
// recorded all the same — its error without control characters — so the event is retried and, in the end,
// dropped, instead of staying leased and being sent again every lease, never recorded.
func TestAnErrorQuotingANULFromTheReceiverIsRecorded(t *testing.T) {
	e := newEnv(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "receiver"},
		DNSNames: []string{"evil\x00.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	ep, _ := e.endpoint("acme", "https://hooks.example.test:"+u.Port()+"/h")
	e.pings("acme", ep, 1)
	opts := e.options()
	opts.LookupIP = resolveTo("127.0.0.1")
	e.start(opts)
	var lastErr string
	wait.Until(t, 10*time.Second, "the failed attempt recorded", func() bool {
		s := e.firstEvent().LastError
		if s != nil {
			lastErr = *s
		}
		return s != nil
	})
	if !strings.Contains(lastErr, "evil.test") {
		t.Errorf("last_error %q, want the certificate's name without its NUL", lastErr)
	}
}
