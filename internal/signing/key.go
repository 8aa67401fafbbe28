package signing

// Secrets at rest. PostgreSQL holds every endpoint's secret sealed with AES-256-GCM under
// HERALD_CALLBACK_SECRET_KEY, which lives only in the configuration of the components that need it (the
// ingress seals, the callback sender opens), so a dump of the database alone cannot forge a signature.
// The endpoint's id is the additional data: a sealed secret copied onto another endpoint does not open.
//
// Sealed form: version byte 1 | key id (first 4 bytes of SHA-256 of the key) | 12-byte nonce | ciphertext
// and tag. The key id tells which key opens a secret, so that the setting can list several keys while it is
// rotated: the first seals, every one opens (docs/callbacks.md, "Rotating HERALD_CALLBACK_SECRET_KEY").

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// KeySize is the length of HERALD_CALLBACK_SECRET_KEY once base64-decoded.
const KeySize = 32

const sealVersion = 1

// Key is HERALD_CALLBACK_SECRET_KEY: one key, or several while it is rotated. It seals secrets under its
// first key and opens them under any.
type Key struct {
	keys []aeadKey // the first seals
}

type aeadKey struct {
	aead cipher.AEAD
	id   [4]byte
}

// ErrKeyFormat describes what HERALD_CALLBACK_SECRET_KEY must be (without quoting it: it is a secret).
var ErrKeyFormat = errors.New("must be the standard base64 of 32 random bytes (openssl rand -base64 32), " +
	"or while it is rotated a comma-separated list of such keys, each once, the first sealing new secrets")

// ParseKey reads a key given as the standard base64 of KeySize bytes, or a comma-separated list of them.
func ParseKey(s string) (*Key, error) {
	k := &Key{}
	for _, part := range strings.Split(s, ",") {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(part))
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
		sum := sha256.Sum256(raw)
		ak := aeadKey{aead: aead, id: [4]byte(sum[:4])}
		if k.find(ak.id[:]) != nil {
			return nil, ErrKeyFormat
		}
		k.keys = append(k.keys, ak)
	}
	return k, nil
}

// find returns the key whose id is id, nil when none is.
func (k *Key) find(id []byte) *aeadKey {
	for i := range k.keys {
		if bytes.Equal(k.keys[i].id[:], id) {
			return &k.keys[i]
		}
	}
	return nil
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

// Seal encrypts the secret of the endpoint endpointID under the first key.
func (k *Key) Seal(s Secret, endpointID string) []byte { return k.SealBytes(s.key, endpointID) }

// SealBytes encrypts plain under the first key, bound to owner (the additional data: what it belongs to,
// so that a sealed value copied onto another owner does not open). The callback endpoints' secrets are
// sealed with it (Seal), and tenants' bot tokens under HERALD_BOT_TOKEN_KEY (internal/bot).
func (k *Key) SealBytes(plain []byte, owner string) []byte {
	first := &k.keys[0]
	out := make([]byte, 0, 1+len(first.id)+first.aead.NonceSize()+len(plain)+first.aead.Overhead())
	out = append(out, k.CurrentPrefix()...)
	nonce := make([]byte, first.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out = append(out, nonce...)
	return first.aead.Seal(out, nonce, plain, []byte(owner))
}

// Open errors.
var (
	ErrOtherKey = errors.New("the secret was sealed with another HERALD_CALLBACK_SECRET_KEY")
	ErrSealed   = errors.New("the sealed secret does not open (altered, or sealed for another endpoint)")
)

// Open decrypts a secret Seal made for endpointID, under whichever of the keys sealed it.
func (k *Key) Open(sealed []byte, endpointID string) (Secret, error) {
	key, err := k.OpenBytes(sealed, endpointID)
	if err != nil {
		return Secret{}, err
	}
	return Secret{key: key}, nil
}

// OpenBytes decrypts what SealBytes sealed for owner, under whichever of the keys sealed it: ErrOtherKey
// when none of them did, ErrSealed when it does not open (altered, or sealed for another owner).
func (k *Key) OpenBytes(sealed []byte, owner string) ([]byte, error) {
	const head = 1 + 4 // version, key id
	if len(sealed) < head || sealed[0] != sealVersion {
		return nil, ErrSealed
	}
	ak := k.find(sealed[1:head])
	if ak == nil {
		return nil, ErrOtherKey
	}
	if len(sealed) < head+ak.aead.NonceSize()+ak.aead.Overhead() {
		return nil, ErrSealed
	}
	nonce := sealed[head : head+ak.aead.NonceSize()]
	plain, err := ak.aead.Open(nil, nonce, sealed[head+ak.aead.NonceSize():], []byte(owner))
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}

// Current reports whether sealed was sealed under the first key, the one that seals now.
func (k *Key) Current(sealed []byte) bool { return bytes.HasPrefix(sealed, k.CurrentPrefix()) }

// CurrentPrefix is how every secret sealed under the first key starts (version and key id): what
// PostgreSQL tells the secrets still to be sealed again by.
func (k *Key) CurrentPrefix() []byte { return append([]byte{sealVersion}, k.keys[0].id[:]...) }
