package personnummer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/personnummer"
)

// FuzzParse feeds arbitrary text and an arbitrary day to Parse: it never panics, refuses only
// with a *domain.FieldError (domain.ErrInvalid) that does not quote its input, and what it
// accepts is twelve digits that re-parse, in both long forms, to the same number.
func FuzzParse(f *testing.F) {
	today := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC).Unix()
	for _, s := range []string{
		"199001010017", "19900101-0017", "900101-0017", "121212-1212", "121212+1212", "191212121212",
		"199001610019", // a coordination number (day + 60)
		"", "199001010018", "19900101001", "1990010100170", "abcdefghijkl", "199013010017", "900101 0017",
		"19900101+0017", "9001010017", "١٩٩٠٠١٠١٠٠١٧", "19900101\x000017", "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4",
	} {
		f.Add(s, today)
	}
	f.Fuzz(func(t *testing.T, s string, unix int64) {
		// Parse is called with the clock's day: any day from 1900 to 2199 keeps the short forms'
		// century arithmetic in the range it is meant for.
		const span = 300 * 365 * 24 * 3600
		start := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		now := time.Unix(start+((unix%span)+span)%span, 0).UTC()

		n, err := personnummer.Parse(s, now)
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, domain.ErrInvalid) || !n.IsZero() {
				t.Fatalf("Parse(%q) = %v, %v; want a *domain.FieldError and no number", s, n, err)
			}
			if len(s) >= 6 && strings.ContainsAny(s, "0123456789") && strings.Contains(err.Error(), s) {
				t.Fatalf("Parse(%q): error %q quotes the input", s, err)
			}
			return
		}
		digits := n.String()
		if len(digits) != 12 || !allDigits(digits) || n.IsZero() {
			t.Fatalf("Parse(%q) = %q, want twelve digits", s, digits)
		}
		for _, form := range []string{digits, digits[:8] + "-" + digits[8:]} {
			again, err := personnummer.Parse(form, now)
			if err != nil || again != n {
				t.Fatalf("Parse(%q) = %s, but its form %q re-parses to %v, %v", s, digits, form, again, err)
			}
		}
	})
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
