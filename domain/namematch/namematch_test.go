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
		{"Søren Ørsted", "Soren Orsted", true, "ø folds to o"},
		{"SØREN ØRSTED", "soren orsted", true, "Ø folds to o"},
		{"Łukasz Wałęsa", "Lukasz Walesa", true, "ł folds to l, ę loses its ogonek"},
		{"ŁUKASZ WAŁĘSA", "Lukasz Walesa", true, "Ł folds to l"},
		{"Þórunn", "Thorunn", true, "þ folds to th"},
		{"ÞÓRUNN", "Thorunn", true, "Þ folds to th"},
		{"Straße", "Strasse", true, "ß folds to ss"},
		{"STRAẞE", "Strasse", true, "ẞ folds to ss"},
		{"Œuvray", "Oeuvray", true, "œ folds to oe"},
		{"ŒUVRAY", "Oeuvray", true, "Œ folds to oe"},
		{"Ærø", "Aero", true, "æ folds to ae"},
		{"ÆRØ", "Aero", true, "Æ folds to ae"},
		{"Đorđe Đukić", "Dorde Dukic", true, "đ folds to d, ć loses its acute"},
		{"Guðrún Sigurðardóttir", "Gudrun Sigurdardottir", true, "ð folds to d"},
		{"Yıldız", "Yildiz", true, "ı folds to i"},
		{"İlkay", "Ilkay", true, "İ loses its dot"},
		{"Ħaġar Ċuschieri", "Hagar Cuschieri", true, "ħ folds to h (Maltese)"},
		{"Áŋŋel Máhtte", "Angngel Mahtte", true, "ŋ folds to ng (Sami)"},
		{"Áŧŧe", "Atte", true, "ŧ folds to t (Sami)"},
		{"Coŀlell", "Collell", true, "ŀ folds to l (Catalan)"},
		{"Ĳsbrand", "IJsbrand", true, "ĳ folds to ij (Dutch)"},
		{"Åsa", "Asa", true, "a part that differs only in diacritics is the same part"},
		{"Tolvan Tolvanssøn", "Tolvan Tolvanson", false, "folding does not forgive a dropped letter"},
		{"Straße", "Strase", false, "ß is two letters, not one"},
		{"Müller", "Mueller", false, "ü folds to u: ue is another spelling"},
		{"Ærø", "Aro", false, "æ is two letters, not one"},
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
		{"P7", "TØLVAN TOLVANSSØN", nil, ptr(false), nil},
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
