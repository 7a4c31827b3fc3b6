package personnummer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/domain"
)

func TestParse(t *testing.T) {
	today := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		in, want string
	}{
		{"199001010017", "199001010017"},
		{"19900101-0017", "199001010017"},
		{"900101-0017", "199001010017"},
		{"121212-1212", "201212121212"},
		{"121212+1212", "191212121212"},
		{"191212121212", "191212121212"},
	}
	for _, c := range cases {
		got, err := Parse(c.in, today)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.in, err)
		}
		if got.String() != c.want {
			t.Errorf("Parse(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"", "199001010018", "19900101001", "1990010100170", "abcdefghijkl", "199013010017", "900101 0017"} {
		if _, err := Parse(bad, today); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("Parse(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestEveryPersonaIsValid(t *testing.T) {
	for _, pn := range []string{"199001010017", "191212121212", "199001010025", "199001010033", "199001010041",
		"199001010058", "199001010066", "199001010074", "199001010082", "199001010090", "199001010108",
		"199001010116", "199001010124", "199001010132", "199001010140", "199001010157", "199001010165",
		"199001010173", "199001010181", "199001010199", "199001010207"} {
		if _, err := Parse(pn, time.Now()); err != nil {
			t.Errorf("persona %s: %v", pn, err)
		}
	}
}

func TestParseErrorsNameTheRuleNotTheNumber(t *testing.T) {
	today := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for in, reason := range map[string]string{
		"199001010018":  reasonCheckDigit,
		"199013010017":  reasonDate,
		"19900101+0017": reasonFormat,
		"9001010017":    reasonFormat,
	} {
		_, err := Parse(in, today)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != field || fe.Reason != reason || !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want a field error %q", in, err, reason)
			continue
		}
		if strings.Contains(err.Error(), in) || strings.Contains(err.Error(), in[2:8]) {
			t.Errorf("Parse(%q) error %q contains the number", in, err)
		}
	}
}
