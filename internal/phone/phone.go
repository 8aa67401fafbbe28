// Package phone turns the phone number of a shared contact into what Herald may keep: the E.164 form is
// computed only to derive a keyed digest and the last four digits, and is never stored, logged or returned.
// verification.go holds the verification's statuses, rendered as Go and as the store's SQL.
package phone

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
)

// E.164 allows at most 15 digits; 8 is the shortest number in real use (country code included).
const (
	MinDigits = 8
	MaxDigits = 15
)

// ErrInvalid says a number is not a plausible E.164 number. It never carries the number itself, so it is
// safe to log.
var ErrInvalid = errors.New("not a valid international phone number")

// Normalize returns the E.164 form "+<digits>" of a number as messaging clients send it: some omit the
// "+", some format with spaces, dashes, dots or parentheses. Anything else, a country code starting with 0,
// or a digit count outside 8..15 is ErrInvalid.
func Normalize(raw string) (string, error) {
	buf := make([]byte, 0, 1+MaxDigits)
	buf = append(buf, '+')
	seenDigit, seenPlus := false, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= '0' && c <= '9':
			if len(buf) > MaxDigits {
				return "", ErrInvalid
			}
			buf = append(buf, c)
			seenDigit = true
		case c == '+':
			// Only as the very first significant character.
			if seenDigit || seenPlus {
				return "", ErrInvalid
			}
			seenPlus = true
		case c == ' ', c == '-', c == '(', c == ')', c == '.', c == '\t':
		default:
			return "", ErrInvalid
		}
	}
	digits := len(buf) - 1
	if digits < MinDigits || digits > MaxDigits || buf[1] == '0' {
		return "", ErrInvalid
	}
	return string(buf), nil
}

// Last4 returns the last four digits of a normalised number.
func Last4(e164 string) string {
	if len(e164) < 4 {
		return e164
	}
	return e164[len(e164)-4:]
}

// Hasher computes the keyed digest under which a number is stored: HMAC-SHA256 with the server's key, so
// that a leaked table cannot be reversed by hashing every possible number.
type Hasher struct{ key []byte }

// NewHasher returns a Hasher with key (HERALD_PHONE_HASH_KEY).
func NewHasher(key []byte) Hasher { return Hasher{key: append([]byte(nil), key...)} }

// Sum returns the digest of a normalised number.
func (h Hasher) Sum(e164 string) [32]byte {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(e164))
	var out [32]byte
	copy(out[:], m.Sum(nil))
	return out
}
