// Package apikey mints tenant API keys and computes the digests under which they are stored.
// A key is "hk_" followed by 43 base64url characters (256 bits of randomness); only its SHA-256 digest and
// its first characters (the prefix, to recognise a key in listings) are ever stored.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Scheme is the recognisable start of every Herald key.
const Scheme = "hk_"

// PrefixLen is how many characters of a key are kept in clear for identification ("hk_" + 8).
const PrefixLen = len(Scheme) + 8

// Key is a freshly minted key.
type Key struct {
	Secret string   // the key itself: shown once, never stored by Herald
	Digest [32]byte // SHA-256 of Secret
	Prefix string   // first PrefixLen characters of Secret
}

// New mints a key with 256 bits of randomness.
func New() Key {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("apikey: crypto/rand failed: " + err.Error())
	}
	secret := Scheme + base64.RawURLEncoding.EncodeToString(b[:])
	return Key{Secret: secret, Digest: Digest(secret), Prefix: secret[:PrefixLen]}
}

// Digest is the SHA-256 digest under which a key is stored and looked up.
func Digest(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// LooksValid reports whether s has the shape of a Herald key, so obviously malformed bearer tokens are
// rejected without a database round trip.
func LooksValid(s string) bool {
	if !strings.HasPrefix(s, Scheme) || len(s) != len(Scheme)+43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s[len(Scheme):])
	return err == nil
}
