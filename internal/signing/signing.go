// Package signing is how status callbacks are signed (docs/callbacks.md): the endpoints' secrets, the
// Standard Webhooks signature over each request, its verification (the simulator's receiver and the
// tests use it as a tenant would), and the sealing of secrets at rest under HERALD_CALLBACK_SECRET_KEY.
//
// The scheme (spec v1-extensions §7, Standard Webhooks): the headers webhook-id, webhook-timestamp (Unix
// seconds) and webhook-signature, a space-separated list of "v1,<base64 of HMAC-SHA256(key,
// id + "." + timestamp + "." + body)>", one per valid secret, where key is the base64-decoded part of the
// secret after "whsec_".
package signing

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The request headers of a callback.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret as a tenant sees it.
const SecretPrefix = "whsec_"

// SecretSize is the number of random bytes of a secret (the HMAC key).
const SecretSize = 32

// DefaultTolerance is how far a webhook-timestamp may be from the receiver's clock: the replay window
// docs/callbacks.md advises.
const DefaultTolerance = 5 * time.Minute

// Secret is an endpoint's signing secret. Its String is redacted, so it cannot leak into a log by
// accident; Reveal gives the whsec_ form, shown to the tenant once.
type Secret struct{ key []byte }

// NewSecret makes a secret of SecretSize random bytes.
func NewSecret() Secret {
	k := make([]byte, SecretSize)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return Secret{key: k}
}

// ParseSecret reads a secret in its whsec_<base64> form.
func ParseSecret(s string) (Secret, error) {
	raw, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, errors.New("a secret starts with " + SecretPrefix)
	}
	k, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(k) == 0 {
		return Secret{}, errors.New("a secret is " + SecretPrefix + " followed by base64")
	}
	return Secret{key: k}, nil
}

// Reveal is the secret as the tenant receives it: whsec_ and the base64 of its key.
func (s Secret) Reveal() string { return SecretPrefix + base64.StdEncoding.EncodeToString(s.key) }

// String is redacted.
func (s Secret) String() string { return SecretPrefix + "…" }

// Equal reports whether two secrets are the same key.
func (s Secret) Equal(o Secret) bool { return hmac.Equal(s.key, o.key) }

// signature is one "v1,<base64>" for a key.
func (s Secret) signature(id, ts string, body []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Headers are the three signature headers of one request.
type Headers struct {
	ID        string
	Timestamp string
	Signature string
}

// Set writes the headers into h.
func (s Headers) Set(h http.Header) {
	h.Set(HeaderID, s.ID)
	h.Set(HeaderTimestamp, s.Timestamp)
	h.Set(HeaderSignature, s.Signature)
}

// Sign signs body sent as webhook id at time at with every secret given (the current one first), one
// signature each.
func Sign(id string, at time.Time, body []byte, secrets ...Secret) Headers {
	ts := strconv.FormatInt(at.Unix(), 10)
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = s.signature(id, ts, body)
	}
	return Headers{ID: id, Timestamp: ts, Signature: strings.Join(sigs, " ")}
}

// Verification errors.
var (
	ErrMissingHeaders = errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	ErrTimestamp      = errors.New("webhook-timestamp is not within the tolerance of the receiver's clock")
	ErrNoMatch        = errors.New("no signature matches a known secret")
)

// Verify checks a received request as a tenant's receiver should: the three headers are present, the
// timestamp is within tolerance of now (replay protection), and at least one v1 signature matches one of
// secrets. It compares in constant time.
func Verify(h http.Header, body []byte, now time.Time, tolerance time.Duration, secrets ...Secret) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrTimestamp
	}
	for _, s := range secrets {
		want := s.signature(id, ts, body)
		for _, got := range strings.Fields(sigs) {
			if hmac.Equal([]byte(got), []byte(want)) {
				return nil
			}
		}
	}
	return ErrNoMatch
}
