package signing

// Secrets at rest. PostgreSQL holds every endpoint's secret sealed with AES-256-GCM under
// HERALD_CALLBACK_SECRET_KEY, which lives only in the configuration of the components that need it (the
// ingress seals, the callback sender opens), so a dump of the database alone cannot forge a signature.
// The endpoint's id is the additional data: a sealed secret copied onto another endpoint does not open.
//
// Sealed form: version byte 1 | key id (first 4 bytes of SHA-256 of the key) | 12-byte nonce | ciphertext
// and tag. The key id makes a wrong key an explicit error rather than a failed authentication, and leaves
// room for opening under several keys when the key is rotated.

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
)

// KeySize is the length of HERALD_CALLBACK_SECRET_KEY once base64-decoded.
const KeySize = 32

const sealVersion = 1

// Key seals and opens secrets.
type Key struct {
	aead cipher.AEAD
	id   [4]byte
}

// ErrKeyFormat describes what HERALD_CALLBACK_SECRET_KEY must be (without quoting it: it is a secret).
var ErrKeyFormat = errors.New("must be the standard base64 of 32 random bytes (openssl rand -base64 32)")

// ParseKey reads a key given as the standard base64 of KeySize bytes.
func ParseKey(s string) (*Key, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != KeySize {
		return nil, ErrKeyFormat
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &Key{aead: aead}
	sum := sha256.Sum256(raw)
	copy(k.id[:], sum[:])
	return k, nil
}

// GenerateKey returns a new key in the form ParseKey reads (herald dev keeps one; the Helm chart makes its
// own the same way).
func GenerateKey() string {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// Seal encrypts the secret of the endpoint endpointID.
func (k *Key) Seal(s Secret, endpointID string) []byte {
	out := make([]byte, 0, 1+len(k.id)+k.aead.NonceSize()+len(s.key)+k.aead.Overhead())
	out = append(out, sealVersion)
	out = append(out, k.id[:]...)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, s.key, []byte(endpointID))
}

// Open errors.
var (
	ErrOtherKey = errors.New("the secret was sealed with another HERALD_CALLBACK_SECRET_KEY")
	ErrSealed   = errors.New("the sealed secret does not open (altered, or sealed for another endpoint)")
)

// Open decrypts a secret Seal made for endpointID.
func (k *Key) Open(sealed []byte, endpointID string) (Secret, error) {
	head := 1 + len(k.id)
	if len(sealed) < head+k.aead.NonceSize()+k.aead.Overhead() || sealed[0] != sealVersion {
		return Secret{}, ErrSealed
	}
	if !bytes.Equal(sealed[1:head], k.id[:]) {
		return Secret{}, ErrOtherKey
	}
	nonce := sealed[head : head+k.aead.NonceSize()]
	key, err := k.aead.Open(nil, nonce, sealed[head+k.aead.NonceSize():], []byte(endpointID))
	if err != nil {
		return Secret{}, ErrSealed
	}
	return Secret{key: key}, nil
}
