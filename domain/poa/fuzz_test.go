package poa_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/samla/samla/domain/poa"
)

// FuzzParse feeds arbitrary text to Parse, as a client's administrator may: it never panics, its
// every error is ErrInvalidTemplate, and a template it accepts is canonical as documented
// (Parse(t.Text()) is t) and renders with real values into well-formed blocks.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		poa.ExampleTemplate,
		allPlaceholders,
		"# Fullmakt\r\n\r\n" + allPlaceholders + "\r\n---\r\n",
		"\uFEFF# {{ holderName }}\n\n\n" + allPlaceholders + "\t \n---\n---",
		"{{holderName}", "{{}}", "{{{{date}}}}", "}}{{", "{{unknown}} " + allPlaceholders, "{{hölderName}}",
		"\xff" + allPlaceholders, "\u2028" + allPlaceholders, strings.Repeat("{{", 300),
		strings.Repeat("a\n", poa.MaxLines+1), strings.Repeat("x", poa.MaxLineRunes+1),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		tpl, err := poa.Parse(text)
		if err != nil {
			if !errors.Is(err, poa.ErrInvalidTemplate) {
				t.Fatalf("Parse error %v is not ErrInvalidTemplate", err)
			}
			return
		}
		again, err := poa.Parse(tpl.Text())
		if err != nil || again.Text() != tpl.Text() || again.Version() != tpl.Version() {
			t.Fatalf("Parse(%q).Text() = %q re-parses to %q, %v", text, tpl.Text(), again.Text(), err)
		}
		if !strings.HasSuffix(tpl.Text(), "\n") || !strings.HasPrefix(tpl.Version(), "sha256:") {
			t.Fatalf("Text %q, Version %q", tpl.Text(), tpl.Version())
		}
		blocks, err := tpl.Render(fields())
		if err != nil {
			t.Fatalf("Render of real values: %v", err)
		}
		want, _ := again.Render(fields())
		if !reflect.DeepEqual(blocks, want) {
			t.Fatalf("the canonical text renders otherwise:\n%v\n%v", blocks, want)
		}
		checkBlocks(t, blocks)
	})
}

// FuzzRender renders the example template with arbitrary values: it never panics, refuses only
// values that are not UTF-8 or longer than MaxValueRunes (with a *FieldError), and otherwise
// prints every value on one line, literally, never expanding a placeholder a value spells.
func FuzzRender(f *testing.F) {
	f.Add("Tolvan Tolvansson", "19121212-1212", "Stockholm")
	f.Add("", "", "")
	f.Add("{{date}}", "{{holderName}}", "}}{{")
	f.Add("Åsa\nÖberg\r\n\t\u2028", "\x00\x1b[31m", " \u00a0 ")
	f.Add("\xff\xfe", "a", "b")
	f.Add(strings.Repeat("å", poa.MaxValueRunes+1), "a", "b")
	f.Add("a\u0301", strings.Repeat("\u0301", 100), "ﬁ")
	tpl, err := poa.Parse(poa.ExampleTemplate)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, holder, number, other string) {
		v := poa.Fields{HolderName: holder, PersonalNumber: number, Company: other, InsuranceNumber: other,
			InsuranceType: other, CancellationDate: number, ClientName: other, Place: other, Date: number}
		blocks, err := tpl.Render(v)
		invalid := false
		for _, s := range []string{holder, number, other} {
			if !utf8.ValidString(s) || utf8.RuneCountInString(s) > poa.MaxValueRunes {
				invalid = true
			}
		}
		if invalid {
			var fe *poa.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, poa.ErrInvalidFields) {
				t.Fatalf("Render of an invalid value = %v, want a *FieldError", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		checkBlocks(t, blocks)
		var signature string
		for _, b := range blocks {
			if b.Kind == poa.SignatureLine {
				signature = b.Text
			}
		}
		if plain := strings.TrimSpace(holder); plain != "" && isPrintableASCII(plain) && signature != plain {
			t.Fatalf("holder %q printed as %q", holder, signature)
		}
		if strings.TrimSpace(holder) == "" && signature != poa.Blank {
			t.Fatalf("blank holder printed as %q, want %q", signature, poa.Blank)
		}
	})
}

// checkBlocks holds rendered blocks to their layout: UTF-8, no control characters but the
// paragraphs' line breaks, and text in every block.
func checkBlocks(t *testing.T, blocks []poa.Block) {
	t.Helper()
	if len(blocks) == 0 {
		t.Fatal("no blocks")
	}
	for _, b := range blocks {
		if !utf8.ValidString(b.Text) || (b.Kind != poa.SignatureLine && strings.TrimSpace(b.Text) == "") {
			t.Fatalf("block %v %q", b.Kind, b.Text)
		}
		for _, r := range b.Text {
			if (unicode.IsControl(r) && !(r == '\n' && b.Kind == poa.Paragraph)) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("block %v holds %U: %q", b.Kind, r, b.Text)
			}
		}
	}
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
