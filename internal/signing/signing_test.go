package signing_test

import (
	"bytes"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/signing"
)

// The Standard Webhooks reference implementations publish this vector: a receiver's existing library
// verifies what Herald sends only if Herald reproduces it exactly.
func TestSignatureReproducesTheStandardWebhooksVector(t *testing.T) {
	s, err := signing.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	h := signing.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), s)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; h.Signature != want {
		t.Errorf("signature %q, want %q", h.Signature, want)
	}
	if h.Timestamp != "1614265330" || h.ID != "msg_p5jXN8AQM9LWM0D4loKWxJek" {
		t.Errorf("headers %+v", h)
	}
}

func TestNewSecretsAreWhsecAndBase64Of32RandomBytes(t *testing.T) {
	form := regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`)
	a, b := signing.NewSecret(), signing.NewSecret()
	for _, s := range []signing.Secret{a, b} {
		if !form.MatchString(s.Reveal()) {
			t.Errorf("secret %q is not whsec_ and the base64 of 32 bytes", s.Reveal())
		}
		back, err := signing.ParseSecret(s.Reveal())
		if err != nil || !back.Equal(s) {
			t.Errorf("ParseSecret(Reveal()) = %v, %v", back, err)
		}
	}
	if a.Equal(b) {
		t.Error("two new secrets are equal")
	}
	if strings.Contains(a.String(), a.Reveal()[6:]) {
		t.Error("String() shows the secret; it must be redacted")
	}
}

func TestVerifyAcceptsAnySignatureOfAKnownSecretWithinTheTolerance(t *testing.T) {
	old, cur, stranger := signing.NewSecret(), signing.NewSecret(), signing.NewSecret()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"type":"ping","timestamp":"2023-11-14T22:13:20.000Z","data":{}}`)
	signed := signing.Sign("evt_1", now, body, cur, old)
	if n := len(strings.Fields(signed.Signature)); n != 2 {
		t.Fatalf("%d signatures for two secrets: %q", n, signed.Signature)
	}
	h := http.Header{}
	signed.Set(h)
	for _, c := range []struct {
		name    string
		h       http.Header
		body    []byte
		at      time.Time
		secrets []signing.Secret
		want    error
	}{
		{"the new secret", h, body, now, []signing.Secret{cur}, nil},
		{"the old secret, during the overlap", h, body, now, []signing.Secret{old}, nil},
		{"4 minutes late", h, body, now.Add(4 * time.Minute), []signing.Secret{cur}, nil},
		{"6 minutes late: a replay", h, body, now.Add(6 * time.Minute), []signing.Secret{cur}, signing.ErrTimestamp},
		{"6 minutes early", h, body, now.Add(-6 * time.Minute), []signing.Secret{cur}, signing.ErrTimestamp},
		{"another secret", h, body, now, []signing.Secret{stranger}, signing.ErrNoMatch},
		{"an altered body", h, append([]byte{' '}, body...), now, []signing.Secret{cur}, signing.ErrNoMatch},
		{"no headers", http.Header{}, body, now, []signing.Secret{cur}, signing.ErrMissingHeaders},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := signing.Verify(c.h, c.body, c.at, signing.DefaultTolerance, c.secrets...)
			if !errors.Is(err, c.want) {
				t.Errorf("Verify = %v, want %v", err, c.want)
			}
		})
	}
	// The id and the timestamp are signed: changing either breaks every signature.
	for header, value := range map[string]string{signing.HeaderID: "evt_2", signing.HeaderTimestamp: "1700000001"} {
		h2 := h.Clone()
		h2.Set(header, value)
		if err := signing.Verify(h2, body, now, time.Hour, cur); !errors.Is(err, signing.ErrNoMatch) {
			t.Errorf("altered %s: Verify = %v, want ErrNoMatch", header, err)
		}
	}
}

func TestSealedSecretsOpenOnlyWithTheKeyAndForTheirEndpoint(t *testing.T) {
	k, err := signing.ParseKey(signing.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	other, _ := signing.ParseKey(signing.GenerateKey())
	s := signing.NewSecret()
	sealed := k.Seal(s, "endpoint-1")
	if strings.Contains(string(sealed), s.Reveal()) {
		t.Fatal("the sealed form contains the secret")
	}
	got, err := k.Open(sealed, "endpoint-1")
	if err != nil || !got.Equal(s) {
		t.Fatalf("Open = %v, %v", got, err)
	}
	if _, err := other.Open(sealed, "endpoint-1"); !errors.Is(err, signing.ErrOtherKey) {
		t.Errorf("another key: %v, want ErrOtherKey", err)
	}
	if _, err := k.Open(sealed, "endpoint-2"); !errors.Is(err, signing.ErrSealed) {
		t.Errorf("another endpoint: %v, want ErrSealed", err)
	}
	tampered := append([]byte{}, sealed...)
	tampered[len(tampered)-1] ^= 1
	if _, err := k.Open(tampered, "endpoint-1"); !errors.Is(err, signing.ErrSealed) {
		t.Errorf("altered: %v, want ErrSealed", err)
	}
	if a, b := k.Seal(s, "endpoint-1"), k.Seal(s, "endpoint-1"); string(a) == string(b) {
		t.Error("sealing twice gives the same bytes: the nonce is not random")
	}
}

func TestKeysAreTheBase64Of32Bytes(t *testing.T) {
	for _, bad := range []string{"", "short", strings.Repeat("A", 43), "AAAA" + signing.GenerateKey(), "not base64 at all, not at all!!!!!!!!!!!!!!"} {
		if _, err := signing.ParseKey(bad); !errors.Is(err, signing.ErrKeyFormat) {
			t.Errorf("ParseKey(%q) = %v, want ErrKeyFormat", bad, err)
		}
	}
	if _, err := signing.ParseKey("0DWOf8Sl5yhEBDaqE1T0mhK7G8EH5lbSQ2f06vZAUVs="); err != nil {
		t.Errorf("openssl rand -base64 32 output refused: %v", err)
	}
}

// HERALD_CALLBACK_SECRET_KEY may list several keys, so that it can be rotated: the first seals new secrets,
// every one opens what it sealed, and Current tells a secret sealed under another key than the first (to be
// sealed again under it, so that the old key can go).
func TestAKeyListSealsWithTheFirstKeyAndOpensWithEvery(t *testing.T) {
	newer, older := signing.GenerateKey(), signing.GenerateKey()
	oldKey, _ := signing.ParseKey(older)
	newKey, _ := signing.ParseKey(newer)
	s := signing.NewSecret()
	sealedOld := oldKey.Seal(s, "ep")
	for _, list := range []string{newer + "," + older, newer + " , " + older} {
		both, err := signing.ParseKey(list)
		if err != nil {
			t.Fatalf("a list of two keys: %v", err)
		}
		if got, err := both.Open(sealedOld, "ep"); err != nil || !got.Equal(s) {
			t.Errorf("a secret sealed under the second key does not open: %v", err)
		}
		if both.Current(sealedOld) {
			t.Error("a secret sealed under the second key is reported current")
		}
		sealedNew := both.Seal(s, "ep")
		if got, err := newKey.Open(sealedNew, "ep"); err != nil || !got.Equal(s) || !both.Current(sealedNew) {
			t.Errorf("a new secret is not sealed under the first key: %v", err)
		}
		if _, err := oldKey.Open(sealedNew, "ep"); !errors.Is(err, signing.ErrOtherKey) {
			t.Errorf("a new secret opens under the second key: %v", err)
		}
		if !bytes.HasPrefix(sealedNew, both.CurrentPrefix()) || bytes.HasPrefix(sealedOld, both.CurrentPrefix()) || len(both.CurrentPrefix()) == 0 {
			t.Errorf("CurrentPrefix %x does not tell the secrets apart", both.CurrentPrefix())
		}
	}
	third, _ := signing.ParseKey(signing.GenerateKey())
	if _, err := third.Open(sealedOld, "ep"); !errors.Is(err, signing.ErrOtherKey) {
		t.Errorf("a key not in the list: %v, want ErrOtherKey", err)
	}
	for _, bad := range []string{newer + ",", "," + newer, newer + ",," + older, newer + ",short", newer + "," + newer} {
		if _, err := signing.ParseKey(bad); !errors.Is(err, signing.ErrKeyFormat) || strings.Contains(err.Error(), newer) {
			t.Errorf("ParseKey(%q) = %v, want ErrKeyFormat without the key", bad, err)
		}
	}
}
