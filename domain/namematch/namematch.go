// Package namematch decides whether two written names are the same person's name, by the rules
// the spec gives for otherInsuredPerson.
package namematch

import (
	"strings"
	"unicode"

	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Same reports whether a and b name the same person: case and diacritics are ignored; commas,
// hyphens and apostrophes are ignored; the order of the parts does not matter; when the number
// of parts differs, the names are the same if one set of parts is a subset of the other; a part
// spelled differently makes them different. An empty name matches nothing.
//
// "Hyphens ignored" can mean the hyphen vanishes (Anna-Karin = AnnaKarin) or separates
// (Anna-Karin = Anna Karin); registers write double names both ways, so both readings count.
func Same(a, b string) bool {
	for _, hyphenSeparates := range []bool{false, true} {
		pa, pb := parts(a, hyphenSeparates), parts(b, hyphenSeparates)
		if len(pa) == 0 || len(pb) == 0 {
			return false
		}
		if subset(pa, pb) || subset(pb, pa) {
			return true
		}
	}
	return false
}

var foldDiacritics = transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)

// parts splits a name into its normalised parts, as a set.
func parts(name string, hyphenSeparates bool) map[string]bool {
	folded, _, err := transform.String(foldDiacritics, name)
	if err != nil {
		folded = name
	}
	folded = strings.ToLower(folded)
	hyphen := ""
	if hyphenSeparates {
		hyphen = " "
	}
	folded = strings.NewReplacer(",", " ", "'", "", "’", "", "`", "", "-", hyphen, "‐", hyphen).Replace(folded)
	set := map[string]bool{}
	for _, p := range strings.Fields(folded) {
		set[p] = true
	}
	return set
}

func subset(small, big map[string]bool) bool {
	for p := range small {
		if !big[p] {
			return false
		}
	}
	return true
}

// OtherInsuredPerson applies the spec's rule for a pension: the company's own conclusion wins;
// otherwise the insured person's name is compared with the account owner's name; without an
// account owner's name (or without an insured person's name) no conclusion is possible (nil).
func OtherInsuredPerson(companySays *bool, insuredPersonName, accountOwnerName string) *bool {
	if companySays != nil {
		v := *companySays
		return &v
	}
	if strings.TrimSpace(accountOwnerName) == "" || strings.TrimSpace(insuredPersonName) == "" {
		return nil
	}
	other := !Same(insuredPersonName, accountOwnerName)
	return &other
}
