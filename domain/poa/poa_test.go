package poa_test

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/samla/samla/domain/poa"
)

// allPlaceholders is a minimal valid body: every known placeholder once.
const allPlaceholders = "{{holderName}} {{personalNumber}} {{company}} {{insuranceNumber}} {{insuranceType}} " +
	"{{cancellationDate}} {{clientName}} {{place}} {{date}}"

func fields() poa.Fields {
	return poa.Fields{
		HolderName: "Tolvan Tolvansson", PersonalNumber: "19121212-1212", Company: "Demo Försäkring AB",
		InsuranceNumber: "HEM-123456", InsuranceType: "Hemförsäkring", CancellationDate: "2026-12-31",
		ClientName: "Samla Demo AB", Place: "Stockholm", Date: "2026-11-22",
	}
}

func mustParse(t *testing.T, text string) poa.Template {
	t.Helper()
	tpl, err := poa.Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return tpl
}

func render(t *testing.T, tpl poa.Template, f poa.Fields) []poa.Block {
	t.Helper()
	blocks, err := tpl.Render(f)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return blocks
}

func TestExampleTemplateParsesAndRenders(t *testing.T) {
	tpl := mustParse(t, poa.ExampleTemplate)
	if tpl.Text() != poa.ExampleTemplate {
		t.Errorf("the example is not canonical; Text():\n%s", tpl.Text())
	}
	blocks := render(t, tpl, fields())
	var kinds []poa.Kind
	var all strings.Builder
	for _, b := range blocks {
		kinds = append(kinds, b.Kind)
		all.WriteString(b.Text + "\n")
		if strings.Contains(b.Text, "{{") {
			t.Errorf("block %v still has a placeholder: %q", b.Kind, b.Text)
		}
	}
	for _, k := range []poa.Kind{poa.Heading, poa.Paragraph, poa.SignatureLine} {
		if !slices.Contains(kinds, k) {
			t.Errorf("the example has no %v block: %v", k, kinds)
		}
	}
	for _, want := range []string{
		"Fullmakt – uppsägning av försäkring",
		"Jag, Tolvan Tolvansson, ger härmed Samla Demo AB fullmakt att för min räkning säga upp försäkring HEM-123456 (Hemförsäkring) hos Demo Försäkring AB från och med 2026-12-31.",
		"Personnummer: 19121212-1212",
		"Ort och datum: Stockholm, 2026-11-22",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("rendered example lacks %q:\n%s", want, all.String())
		}
	}
	if last := blocks[len(blocks)-1]; last != (poa.Block{Kind: poa.SignatureLine, Text: "Tolvan Tolvansson"}) {
		t.Errorf("last block = %+v, want the signature line with the holder's name", last)
	}
}

func TestLayout(t *testing.T) {
	text := "# Fullmakt {{clientName}}\n" +
		"Line one {{holderName}}\n" +
		"line two {{personalNumber}}\n" +
		"\n\n\n" +
		"Second {{company}} {{insuranceNumber}} {{insuranceType}} {{cancellationDate}}\n" +
		"# Ort\n" +
		"{{place}}, {{date}}\n" +
		"  ---  \n" +
		"#no heading\n"
	got := render(t, mustParse(t, text), fields())
	want := []poa.Block{
		{Kind: poa.Heading, Text: "Fullmakt Samla Demo AB"},
		{Kind: poa.Paragraph, Text: "Line one Tolvan Tolvansson\nline two 19121212-1212"},
		{Kind: poa.Paragraph, Text: "Second Demo Försäkring AB HEM-123456 Hemförsäkring 2026-12-31"},
		{Kind: poa.Heading, Text: "Ort"},
		{Kind: poa.Paragraph, Text: "Stockholm, 2026-11-22"},
		{Kind: poa.SignatureLine, Text: "Tolvan Tolvansson"},
		{Kind: poa.Paragraph, Text: "#no heading"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blocks\n%+v\nwant\n%+v", got, want)
	}
}

func TestSpacesInsideBracesAreAllowed(t *testing.T) {
	spaced := strings.NewReplacer("{{", "{{ ", "}}", "   }}").Replace(allPlaceholders)
	got := mustParse(t, spaced)
	want := mustParse(t, allPlaceholders)
	if got.Version() != want.Version() || got.Text() != want.Text() {
		t.Errorf("spaced %q (%s) differs from %q (%s)", got.Text(), got.Version(), want.Text(), want.Version())
	}
	if b := render(t, got, fields()); !strings.HasPrefix(b[0].Text, "Tolvan Tolvansson 19121212-1212 ") {
		t.Errorf("rendered %q", b[0].Text)
	}
}

func TestRefusedPlaceholders(t *testing.T) {
	without := func(name string) string {
		return strings.Replace(allPlaceholders, "{{"+name+"}}", "", 1)
	}
	cases := []struct {
		name, text string
		unknown    []string
		missing    []string
		malformed  []string // substrings, one per expected entry
		message    []string // substrings of Error()
	}{
		{
			name: "unknown", text: allPlaceholders + " {{holder}} {{Date}} {{holder}}",
			unknown: []string{"holder", "Date"},
			message: []string{"unknown placeholders {{holder}}, {{Date}}", "known: {{holderName}}, {{personalNumber}}, {{company}}"},
		},
		{
			name: "unknown replaces a known one", text: strings.Replace(allPlaceholders, "{{holderName}}", "{{holder}}", 1),
			unknown: []string{"holder"}, missing: []string{"holderName"},
			message: []string{"unknown placeholder {{holder}}; missing {{holderName}}; known: {{holderName}}, "},
		},
		{
			name: "missing one", text: without("date"), missing: []string{"date"},
			message: []string{"missing {{date}}; known: "},
		},
		{
			name: "missing several", text: strings.Replace(without("place"), "{{date}}", "", 1), missing: []string{"place", "date"},
			message: []string{"missing {{place}}, {{date}}; known: "},
		},
		{
			name: "empty template", text: "", missing: []string{"holderName", "personalNumber", "company", "insuranceNumber",
				"insuranceType", "cancellationDate", "clientName", "place", "date"},
		},
		{
			name: "unclosed", text: allPlaceholders + "\nNamn: {{holderName",
			malformed: []string{`line 2: "{{" never closed in "{{holderName"`},
		},
		{
			name: "unclosed single brace", text: allPlaceholders + "\nNamn: {{holderName}",
			malformed: []string{`line 2: "{{" never closed`},
		},
		{
			name: "opening only", text: allPlaceholders + " {{", malformed: []string{`line 1: "{{" never closed`},
		},
		{
			name: "closing only", text: allPlaceholders + " holderName}}", malformed: []string{`line 1: "}}" without "{{"`},
		},
		{
			name: "empty", text: allPlaceholders + " {{}}", malformed: []string{`line 1: empty placeholder "{{}}"`},
		},
		{
			name: "only spaces", text: allPlaceholders + " {{   }}", malformed: []string{`empty placeholder`},
		},
		{
			name: "nested", text: allPlaceholders + " {{holder{{date}}Name}}",
			malformed: []string{`line 1: placeholder inside a placeholder: "{{holder{{date}}Name}}"`},
		},
		{
			name: "nested and unclosed", text: allPlaceholders + " {{a{{date}}",
			malformed: []string{`"{{" never closed in "{{a{{date}}"`},
		},
		{
			name: "triple braces", text: allPlaceholders + " {{{date}}}", malformed: []string{`"{{{date}}" is not a placeholder name`},
		},
		{
			name: "not a name", text: allPlaceholders + " {{holder name}} {{ört}}",
			malformed: []string{`"{{holder name}}" is not a placeholder name`, `"{{ört}}" is not a placeholder name`},
		},
		{
			name: "everything at once", text: "# {{holder}}\n\n{{date\n{{}}",
			unknown: []string{"holder"},
			missing: []string{"holderName", "personalNumber", "company", "insuranceNumber", "insuranceType",
				"cancellationDate", "clientName", "place", "date"},
			malformed: []string{"line 3: ", "line 4: "},
			message:   []string{"line 3: ", "; line 4: ", "; unknown placeholder {{holder}}; missing {{holderName}}, "},
		},
		{
			name: "heading without text", text: allPlaceholders + "\n#\n# \t ", malformed: []string{"line 2: heading without text", "line 3: heading without text"},
		},
	}
	known := []string{"holderName", "personalNumber", "company", "insuranceNumber", "insuranceType", "cancellationDate", "clientName", "place", "date"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := poa.Parse(c.text)
			var te *poa.TemplateError
			if !errors.As(err, &te) {
				t.Fatalf("Parse = %v, want a *TemplateError", err)
			}
			if !errors.Is(err, poa.ErrInvalidTemplate) {
				t.Errorf("%v is not ErrInvalidTemplate", err)
			}
			if !slices.Equal(te.Unknown, c.unknown) {
				t.Errorf("Unknown = %q, want %q", te.Unknown, c.unknown)
			}
			if !slices.Equal(te.Missing, c.missing) {
				t.Errorf("Missing = %q, want %q", te.Missing, c.missing)
			}
			if !slices.Equal(te.Known, known) {
				t.Errorf("Known = %q", te.Known)
			}
			if len(te.Malformed) != len(c.malformed) {
				t.Fatalf("Malformed = %q, want %d entries like %q", te.Malformed, len(c.malformed), c.malformed)
			}
			for i, m := range c.malformed {
				if !strings.Contains(te.Malformed[i], m) {
					t.Errorf("Malformed[%d] = %q, want it to contain %q", i, te.Malformed[i], m)
				}
			}
			msg := err.Error()
			for _, m := range append(c.message, "known: {{holderName}}, {{personalNumber}}, {{company}}, {{insuranceNumber}}, {{insuranceType}}, {{cancellationDate}}, {{clientName}}, {{place}}, {{date}}") {
				if !strings.Contains(msg, m) {
					t.Errorf("Error() = %q, want it to contain %q", msg, m)
				}
			}
		})
	}
}

func TestLimits(t *testing.T) {
	lines := func(n int) string { // n lines, the first holding every placeholder
		return allPlaceholders + strings.Repeat("\ntext", n-1)
	}
	long := func(runes int) string { // a second line of that many characters, Nordic letters included
		return allPlaceholders + "\n" + strings.Repeat("å", runes)
	}
	cases := []struct {
		name, text string
		want       error // nil: accepted
	}{
		{"lines at the limit", lines(poa.MaxLines), nil},
		{"trailing blank lines do not count", lines(poa.MaxLines) + "\n\n\n \n", nil},
		{"too many lines", lines(poa.MaxLines + 1), poa.ErrTooManyLines},
		{"line at the limit", long(poa.MaxLineRunes), nil},
		{"line too long", long(poa.MaxLineRunes + 1), poa.ErrLineTooLong},
		{"too large", allPlaceholders + strings.Repeat("\n"+strings.Repeat("x", 200), 330), poa.ErrTooLarge},
		{"not UTF-8", allPlaceholders + "\xff", poa.ErrNotText},
		{"control character", allPlaceholders + "\nhidden\x00text", poa.ErrNotText},
		{"escape character", allPlaceholders + "\n\x1b[8mhidden", poa.ErrNotText},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := poa.Parse(c.text)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.Is(err, poa.ErrInvalidTemplate) {
				t.Fatalf("Parse = %v, want %v and ErrInvalidTemplate", err, c.want)
			}
		})
	}
	_, err := poa.Parse(long(poa.MaxLineRunes + 1))
	if want := "line 2 has 501 characters, at most 500"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("line error %v, want it to say %q", err, want)
	}
}

func TestRenderValues(t *testing.T) {
	tpl := mustParse(t, "{{holderName}}|{{personalNumber}}|{{company}}|{{insuranceNumber}}|{{insuranceType}}|"+
		"{{cancellationDate}}|{{clientName}}|{{place}}|{{date}}\n---")
	cases := []struct {
		name      string
		edit      func(*poa.Fields)
		want      string // the paragraph
		signature string
	}{
		{"all known", func(*poa.Fields) {},
			"Tolvan Tolvansson|19121212-1212|Demo Försäkring AB|HEM-123456|Hemförsäkring|2026-12-31|Samla Demo AB|Stockholm|2026-11-22",
			"Tolvan Tolvansson"},
		{"unknown values are visible blanks", func(f *poa.Fields) { *f = poa.Fields{Company: "X"} },
			"________|________|X|________|________|________|________|________|________", "________"},
		{"spaces only is unknown", func(f *poa.Fields) { f.Place = " \t\n " },
			"Tolvan Tolvansson|19121212-1212|Demo Försäkring AB|HEM-123456|Hemförsäkring|2026-12-31|Samla Demo AB|________|2026-11-22",
			"Tolvan Tolvansson"},
		{"values are literal, never expanded", func(f *poa.Fields) { f.HolderName, f.Company = "{{date}}", "{{ holderName }} & {{x}}" },
			"{{date}}|19121212-1212|{{ holderName }} & {{x}}|HEM-123456|Hemförsäkring|2026-12-31|Samla Demo AB|Stockholm|2026-11-22",
			"{{date}}"},
		{"Nordic and other letters", func(f *poa.Fields) {
			f.HolderName, f.Company, f.Place = "Łukasz Wałęsa", "Øresund Æble Försäkring", "Åre"
		}, "Łukasz Wałęsa|19121212-1212|Øresund Æble Försäkring|HEM-123456|Hemförsäkring|2026-12-31|Samla Demo AB|Åre|2026-11-22",
			"Łukasz Wałęsa"},
		{"decomposed letters are composed", func(f *poa.Fields) { f.HolderName = "A\u030asa O\u0308berg" },
			"Åsa Öberg|19121212-1212|Demo Försäkring AB|HEM-123456|Hemförsäkring|2026-12-31|Samla Demo AB|Stockholm|2026-11-22",
			"Åsa Öberg"},
		{"line breaks and controls become spaces", func(f *poa.Fields) { f.HolderName = "Tolvan\n---\r\nTolvansson\x00" },
			"Tolvan ---  Tolvansson|19121212-1212|Demo Försäkring AB|HEM-123456|Hemförsäkring|2026-12-31|Samla Demo AB|Stockholm|2026-11-22",
			"Tolvan ---  Tolvansson"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fields()
			c.edit(&f)
			got := render(t, tpl, f)
			want := []poa.Block{{Kind: poa.Paragraph, Text: c.want}, {Kind: poa.SignatureLine, Text: c.signature}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("blocks\n%q\nwant\n%q", got, want)
			}
		})
	}
}

func TestRenderRefusesValues(t *testing.T) {
	tpl := mustParse(t, poa.ExampleTemplate)
	cases := []struct {
		name string
		edit func(*poa.Fields)
		want poa.Placeholder
	}{
		{"not UTF-8", func(f *poa.Fields) { f.PersonalNumber = "1912\xff" }, poa.PersonalNumber},
		{"too long", func(f *poa.Fields) { f.Company = strings.Repeat("ö", poa.MaxValueRunes+1) }, poa.Company},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fields()
			c.edit(&f)
			_, err := tpl.Render(f)
			var fe *poa.FieldError
			if !errors.As(err, &fe) || fe.Placeholder != c.want || !errors.Is(err, poa.ErrInvalidFields) {
				t.Fatalf("Render = %v, want a *FieldError for %s", err, c.want)
			}
			if strings.Contains(err.Error(), "1912") || strings.Contains(err.Error(), "ööö") {
				t.Errorf("error %q shows the value", err)
			}
		})
	}
	f := fields()
	f.Company = strings.Repeat("ö", poa.MaxValueRunes)
	if _, err := tpl.Render(f); err != nil {
		t.Errorf("a value at the limit: %v", err)
	}
	if _, err := (poa.Template{}).Render(fields()); !errors.Is(err, poa.ErrNotParsed) {
		t.Errorf("zero Template: %v, want ErrNotParsed", err)
	}
}

func TestCanonicalTextAndVersion(t *testing.T) {
	base := mustParse(t, "# Rubrik\n\nText "+allPlaceholders+"\nÅsa\n\n---\n")
	if !regexp.MustCompile(`^sha256:[0-9a-f]{16}$`).MatchString(base.Version()) {
		t.Fatalf("Version() = %q", base.Version())
	}
	same := map[string]string{
		"CRLF":                  "# Rubrik\r\n\r\nText " + allPlaceholders + "\r\nÅsa\r\n\r\n---\r\n",
		"BOM and no final LF":   "\uFEFF# Rubrik\n\nText " + allPlaceholders + "\nÅsa\n\n---",
		"blank lines":           "\n\n# Rubrik\n\n\n \nText " + allPlaceholders + "\nÅsa\n\n\n\n---\n\n\n",
		"trailing spaces, tabs": "# Rubrik \t\n\t\nText " + allPlaceholders + "  \nÅsa\t\n\n  ---\n",
		"decomposed letters":    "# Rubrik\n\nText " + allPlaceholders + "\nA\u030asa\n\n---\n",
		"spaces in braces":      "# Rubrik\n\nText " + strings.ReplaceAll(allPlaceholders, "}}", " }}") + "\nÅsa\n\n---\n",
	}
	for name, text := range same {
		if got := mustParse(t, text); got.Version() != base.Version() || got.Text() != base.Text() {
			t.Errorf("%s: %q (%s), want %q (%s)", name, got.Text(), got.Version(), base.Text(), base.Version())
		}
	}
	if again := mustParse(t, base.Text()); again.Text() != base.Text() || again.Version() != base.Version() {
		t.Errorf("Parse(Text()) changed the template: %q", again.Text())
	}
	for name, text := range map[string]string{
		"other words":        "# Rubrik\n\nText " + allPlaceholders + "\nÄsa\n\n---\n",
		"another line break": "# Rubrik\n\nText " + allPlaceholders + " Åsa\n\n---\n",
		"no paragraph break": "# Rubrik\nText " + allPlaceholders + "\nÅsa\n\n---\n",
		"placeholders moved": "# Rubrik\n\nText {{date}} " + strings.Replace(allPlaceholders, " {{date}}", "", 1) + "\nÅsa\n\n---\n",
	} {
		if got := mustParse(t, text); got.Version() == base.Version() {
			t.Errorf("%s: same Version %s as a different template", name, got.Version())
		}
	}
}
