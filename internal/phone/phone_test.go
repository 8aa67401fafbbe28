package phone_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/phone"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	valid := []struct{ in, want string }{
		{"+15551230001", "+15551230001"},
		{"15551230001", "+15551230001"}, // some clients omit the +
		{"+1 (555) 123-0001", "+15551230001"},
		{" 44 20 7946 0958 ", "+442079460958"},
		{"+49.30.123456", "+4930123456"},
		{"12345678", "+12345678"},               // 8 digits: the shortest accepted
		{"123456789012345", "+123456789012345"}, // 15 digits: the longest
	}
	for _, c := range valid {
		got, err := phone.Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	invalid := []string{
		"", "+", "1234567", "1234567890123456", "+0123456789", "0044207946095",
		"+1555abc0001", "1+5551230001", "++15551230001", "+1555123000١", "tel:+15551230001",
	}
	for _, in := range invalid {
		got, err := phone.Normalize(in)
		if !errors.Is(err, phone.ErrInvalid) {
			t.Errorf("Normalize(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
		if err != nil && in != "" && strings.Contains(err.Error(), in) {
			t.Errorf("the error for %q contains the number: %v", in, err)
		}
	}
}

func TestLast4(t *testing.T) {
	t.Parallel()
	if got := phone.Last4("+15551230001"); got != "0001" {
		t.Fatalf("Last4 = %q, want 0001", got)
	}
}

func TestHasherIsKeyedHMAC(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef")
	h := phone.NewHasher(key)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("+15551230001"))
	got := h.Sum("+15551230001")
	if !hmac.Equal(got[:], m.Sum(nil)) {
		t.Fatal("Sum is not HMAC-SHA256 of the E.164 number under the key")
	}
	other := phone.NewHasher([]byte("fedcba9876543210"))
	if o := other.Sum("+15551230001"); o == got {
		t.Fatal("two keys gave the same digest")
	}
	if h.Sum("+15551230002") == got {
		t.Fatal("two numbers gave the same digest")
	}
}
