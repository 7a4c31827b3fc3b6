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
// Diacritics are every mark and every letter of a Latin alphabet beyond a–z (see fold), so a
// part that differs only in them is the same part: Åsa = Asa, Søren = Soren. What stays a
// spelling difference is a letter added, dropped or replaced by another, even by a common
// transliteration: Tolvanson ≠ Tolvansson, Müller ≠ Mueller (ü folds to u, not ue).
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

// foldDiacritics removes the accents that Unicode writes as a base letter plus a combining mark
// (å, ä, ö, é, ñ, the Polish ę and ś, the Icelandic ó …): decompose, drop the marks, compose
// what is left. A transform.Chain keeps state between its calls, so every fold makes its own:
// one shared chain is a data race between goroutines that match names at the same time.
func foldDiacritics() transform.Transformer {
	return transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
}

// foldLetters maps the letters that Unicode does not decompose, so that foldDiacritics leaves
// them alone, to the Latin letters a register without them writes instead (the replacements
// of CLDR's Latin-ASCII transliteration, which is what such registers follow). Names are
// lower-cased before folding, so the upper-case letters (Ø, Æ, ẞ, Ł …) need no entries of their
// own. Ligatures and ß become two letters, as they are spelled out: Ærø = Aero, Straße =
// Strasse, Œuvray = Oeuvray, Þórunn = Thorunn.
var foldLetters = strings.NewReplacer(
	"ø", "o", // Danish, Norwegian, Faroese
	"æ", "ae", // Danish, Norwegian, Icelandic, Faroese
	"œ", "oe", // French
	"ß", "ss", // German
	"ł", "l", // Polish
	"đ", "d", // Croatian, Serbian, Vietnamese
	"ð", "d", // Icelandic, Faroese
	"þ", "th", // Icelandic
	"ı", "i", // Turkish dotless i (its capital is I, so it meets a plain i either way)
	"ħ", "h", // Maltese
	"ŧ", "t", // Northern Sami
	"ŋ", "ng", // Northern Sami
	"ŀ", "l", // Catalan l·l written with the middle-dot letter
	"ĳ", "ij", // Dutch
)

// fold lower-cases a name and removes every diacritic, so that only its spelling is left.
func fold(name string) string {
	folded := foldLetters.Replace(strings.ToLower(name))
	if stripped, _, err := transform.String(foldDiacritics(), folded); err == nil {
		folded = stripped
	}
	return folded
}

// parts splits a name into its normalised parts, as a set.
func parts(name string, hyphenSeparates bool) map[string]bool {
	folded := fold(name)
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
