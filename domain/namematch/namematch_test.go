package namematch

import "testing"

func TestSame(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
		rule string
	}{
		{"Tolvan Tolvansson", "Tolvan Tolvansson", true, "identical"},
		{"tolvan TOLVANSSON", "Tolvan Tolvansson", true, "case ignored"},
		{"Tölvan Tolvånsson", "Tolvan Tolvansson", true, "diacritics ignored"},
		{"Émile Zola", "Emile Zola", true, "diacritics ignored (French)"},
		{"TOLVANSSON, TOLVAN", "Tolvan Tolvansson", true, "comma ignored, order ignored"},
		{"Anna-Karin Svensson", "AnnaKarin Svensson", true, "hyphen ignored (vanishes)"},
		{"Anna-Karin Svensson", "Anna Karin Svensson", true, "hyphen ignored (separates)"},
		{"Sean O'Brien", "Sean OBrien", true, "apostrophe ignored"},
		{"Svensson Anna", "Anna Svensson", true, "order ignored"},
		{"Tolvan Karl Tolvansson", "Tolvan Tolvansson", true, "subset: more parts"},
		{"Tolvan Tolvansson", "Tolvan Karl Tolvansson", true, "subset: fewer parts"},
		{"Tolvan Tolvanson", "Tolvan Tolvansson", false, "a part spelled differently"},
		{"Elin Tolvansson", "Tolvan Tolvansson", false, "another first name"},
		{"Tolvan Karl Tolvanson", "Tolvan Tolvansson", false, "more parts, one misspelled"},
		{"", "Tolvan Tolvansson", false, "empty matches nothing"},
		{" , - ", "Tolvan", false, "only punctuation matches nothing"},
	}
	for _, c := range cases {
		if got := Same(c.a, c.b); got != c.same {
			t.Errorf("%s: Same(%q, %q) = %v, want %v", c.rule, c.a, c.b, got, c.same)
		}
		if got := Same(c.b, c.a); got != c.same {
			t.Errorf("%s (swapped): Same(%q, %q) = %v, want %v", c.rule, c.b, c.a, got, c.same)
		}
	}
}

// TestOtherInsuredPersonSandboxTable is SANDBOX.md's table of persona 191212121212's pensions.
func TestOtherInsuredPersonSandboxTable(t *testing.T) {
	yes := true
	owner := "Tolvan Tolvansson"
	cases := []struct {
		pension, insured string
		company          *bool
		withOwner        *bool // expected with the account owner's name
		withoutOwner     *bool // expected without it
	}{
		{"P1", "Tolvan Tolvansson", nil, ptr(false), nil},
		{"P2", "TOLVANSSON, TOLVAN", nil, ptr(false), nil},
		{"P3", "Tolvan Karl Tolvansson", nil, ptr(false), nil},
		{"P4", "Tolvan Tolvanson", nil, ptr(true), nil},
		{"P5", "Elin Tolvansson", nil, ptr(true), nil},
		{"P6", "Tolvan Tolvansson", &yes, ptr(true), ptr(true)},
	}
	for _, c := range cases {
		if got := OtherInsuredPerson(c.company, c.insured, owner); !equal(got, c.withOwner) {
			t.Errorf("%s with owner name: %v, want %v", c.pension, show(got), show(c.withOwner))
		}
		if got := OtherInsuredPerson(c.company, c.insured, ""); !equal(got, c.withoutOwner) {
			t.Errorf("%s without owner name: %v, want %v", c.pension, show(got), show(c.withoutOwner))
		}
	}
}

func ptr(b bool) *bool { return &b }

func equal(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(b *bool) any {
	if b == nil {
		return "absent"
	}
	return *b
}
