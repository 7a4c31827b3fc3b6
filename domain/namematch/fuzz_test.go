package namematch_test

import (
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/samla/samla/domain/namematch"
)

// FuzzSame feeds arbitrary pairs of names to Same and OtherInsuredPerson. Neither panics; Same
// is symmetric (it compares two sets of parts, either way round); a name that holds a letter or
// a digit has a part and so matches itself, and an ASCII name matches its upper-case spelling
// (case is ignored); a name that matches anything matches itself; and OtherInsuredPerson without
// the company's word is "no conclusion" exactly when a name is blank, else the negation of Same.
func FuzzSame(f *testing.F) {
	for _, pair := range [][2]string{
		{"Tolvan Tolvansson", "Tolvan Tolvansson"},
		{"TOLVANSSON, TOLVAN", "Tolvan Tolvansson"},
		{"Anna-Karin Svensson", "Anna Karin Svensson"},
		{"Sean O'Brien", "Sean OBrien"},
		{"Tolvan Karl Tolvansson", "Tolvan Tolvansson"},
		{"Tolvan Tolvanson", "Tolvan Tolvansson"},
		{"Søren Ørsted", "Soren Orsted"},
		{"Þórunn", "Thorunn"},
		{"STRAẞE", "Strasse"},
		{"Đorđe Đukić", "Dorde Dukic"},
		{"Yıldız", "Yildiz"},
		{"", "Tolvan Tolvansson"},
		{" ,-'’ ", "-"},
		{"a\u0301\u0301\u0301\u0301", "á"},
		{"\xff\xfe Tolvan", "Tolvan"},
		{strings.Repeat("Anna-", 200), strings.Repeat("anna ", 200)},
	} {
		f.Add(pair[0], pair[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := namematch.Same(a, b), namematch.Same(b, a)
		if ab != ba {
			t.Fatalf("Same(%q, %q) = %v but Same(%q, %q) = %v", a, b, ab, b, a, ba)
		}
		for _, name := range []string{a, b} {
			self := namematch.Same(name, name)
			if strings.IndexFunc(name, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0 && !self {
				t.Fatalf("%q has a letter or digit but does not match itself", name)
			}
			if ab && !self {
				t.Fatalf("Same(%q, %q) but %q does not match itself", a, b, name)
			}
			if isASCII(name) && self && !namematch.Same(name, strings.ToUpper(name)) {
				t.Fatalf("%q does not match its upper case", name)
			}
		}
		other := namematch.OtherInsuredPerson(nil, a, b)
		blank := strings.TrimSpace(a) == "" || strings.TrimSpace(b) == ""
		switch {
		case blank && other != nil:
			t.Fatalf("OtherInsuredPerson(nil, %q, %q) = %v, want no conclusion", a, b, *other)
		case !blank && (other == nil || *other == ab):
			t.Fatalf("OtherInsuredPerson(nil, %q, %q) = %v, want %v", a, b, other, !ab)
		}
		for _, says := range []bool{false, true} {
			if got := namematch.OtherInsuredPerson(&says, a, b); got == nil || *got != says {
				t.Fatalf("OtherInsuredPerson(%v, …) = %v; the company's word wins", says, got)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// TestSameIsSafeForConcurrentUse matches names from several goroutines at once, as aggregates
// loaded in parallel do (run it with -race): Same keeps no state between calls.
func TestSameIsSafeForConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if !namematch.Same("Åsa Öberg-Ärlemalm", "Asa Oberg Arlemalm") || namematch.Same("Émile Zola", "Emil Zola") {
					t.Error("a concurrent match answered wrongly")
					return
				}
			}
		})
	}
	wg.Wait()
}
