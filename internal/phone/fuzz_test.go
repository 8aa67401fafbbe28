package phone_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/phone"
)

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// FuzzNormalize: the phone number of a shared contact is the sender's text. No panic; an accepted number is
// E.164, normalising it again changes nothing, its last four digits are its last four characters, and the
// error never carries the input. `go test` runs the seeds; `make fuzz` runs it for FUZZTIME.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"+15551234567", "15551234567", "+1 (555) 123-45.67", "0015551234567", "+0123456789",
		"+1234567", "+1234567890123456", "++15551234567", "1555+1234567", "+١٥٥٥١٢٣٤٥٦٧", "+1\t555 1234567", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := phone.Normalize(raw)
		if err != nil {
			if !errors.Is(err, phone.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			if len(raw) >= 4 && strings.Contains(err.Error(), raw) {
				t.Fatalf("the error carries the number: %v", err)
			}
			return
		}
		if !e164.MatchString(n) {
			t.Fatalf("Normalize(%q) = %q, not E.164", raw, n)
		}
		if again, err := phone.Normalize(n); err != nil || again != n {
			t.Fatalf("Normalize(%q) = %q, %v; want it unchanged", n, again, err)
		}
		if l := phone.Last4(n); len(l) != 4 || !strings.HasSuffix(n, l) {
			t.Fatalf("Last4(%q) = %q", n, l)
		}
	})
}
