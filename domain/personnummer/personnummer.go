// Package personnummer validates Swedish personal identity numbers. A number is parsed once, where
// it enters (the HTTP decoder), and travels on as a Number: the rest of the code never holds an
// unchecked one.
package personnummer

import (
	"fmt"
	"strconv"
	"time"

	"github.com/samla/samla/domain"
)

// Number is a validated personal number in its canonical 12-digit form YYYYMMDDNNNN.
type Number struct{ digits string }

// String returns the 12 digits. Callers must treat it as personal data (never log it).
func (n Number) String() string { return n.digits }

// IsZero reports an unset number.
func (n Number) IsZero() bool { return n.digits == "" }

// field is the name Parse's errors give the number (domain.FieldError.Field); a caller that
// knows where the number came from reports its own path with the error's Reason.
const field = "personalNumber"

// Reasons of Parse's errors: the rule broken. None contains the number.
const (
	reasonFormat     = "must be YYYYMMDDNNNN, YYYYMMDD-NNNN, YYMMDD-NNNN or YYMMDD+NNNN"
	reasonDate       = "has no valid date"
	reasonCheckDigit = "has a wrong check digit"
)

// Parse accepts YYYYMMDDNNNN, YYYYMMDD-NNNN, YYMMDD-NNNN and YYMMDD+NNNN ('+' marks a person of
// 100 or older), checks the date and the Luhn digit, and returns the 12-digit form. today fixes
// the century of the short forms; it is a parameter so the rule stays pure. A number that breaks
// a rule is a *domain.FieldError naming field and the rule.
func Parse(s string, today time.Time) (Number, error) {
	var full string
	switch {
	case len(s) == 12 && allDigits(s):
		full = s
	case len(s) == 13 && s[8] == '-' && allDigits(s[:8]) && allDigits(s[9:]):
		full = s[:8] + s[9:]
	case len(s) == 11 && (s[6] == '-' || s[6] == '+') && allDigits(s[:6]) && allDigits(s[7:]):
		yy, _ := strconv.Atoi(s[:2])
		year := today.Year() - (today.Year()-yy)%100 // latest year ending in yy not after today
		if year > today.Year() {
			year -= 100
		}
		if s[6] == '+' {
			year -= 100
		}
		full = fmt.Sprintf("%04d", year) + s[2:6] + s[7:]
	default:
		return Number{}, &domain.FieldError{Field: field, Reason: reasonFormat}
	}
	if _, err := time.Parse("20060102", dateWithoutCoordination(full[:8])); err != nil {
		return Number{}, &domain.FieldError{Field: field, Reason: reasonDate}
	}
	if !luhnValid(full[2:]) {
		return Number{}, &domain.FieldError{Field: field, Reason: reasonCheckDigit}
	}
	return Number{digits: full}, nil
}

// dateWithoutCoordination turns a coordination number's day (day+60) back into a date.
func dateWithoutCoordination(yyyymmdd string) string {
	day, _ := strconv.Atoi(yyyymmdd[6:8])
	if day > 60 {
		day -= 60
	}
	return yyyymmdd[:6] + fmt.Sprintf("%02d", day)
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// luhnValid checks the ten digits YYMMDDNNNC with the Luhn algorithm.
func luhnValid(ten string) bool {
	sum := 0
	for i, r := range ten {
		d := int(r - '0')
		if i%2 == 0 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}
