package poapdf_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ledongthuc/pdf"

	"github.com/samla/samla/connectors/poapdf"
	"github.com/samla/samla/domain/poa"
)

var createdAt = time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)

func fields() poa.Fields {
	return poa.Fields{
		HolderName: "Tolvan Tolvansson", PersonalNumber: "19121212-1212", Company: "Demo Försäkring AB",
		InsuranceNumber: "HEM-123456", InsuranceType: "HOME", CancellationDate: "2026-12-31",
		ClientName: "Samla Demo AB", Place: "Stockholm", Date: "2026-11-22",
	}
}

func meta() poapdf.Meta {
	return poapdf.Meta{Title: "Fullmakt – uppsägning av försäkring", Author: "Samla Demo AB", CreatedAt: createdAt}
}

func example(t testing.TB) poa.Template {
	t.Helper()
	tpl, err := poa.Parse(poa.ExampleTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func render(t testing.TB, tpl poa.Template, f poa.Fields, m poapdf.Meta) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := poapdf.Render(&b, tpl, f, m); err != nil {
		t.Fatalf("Render: %v", err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("%PDF-")) {
		t.Fatalf("not a PDF: %q", b.Bytes()[:min(16, b.Len())])
	}
	return b.Bytes()
}

// readBack extracts the text layer and counts the pages, as the project reads uploaded PDFs.
func readBack(t *testing.T, b []byte) (text string, pages int) {
	t.Helper()
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("read PDF: %v", err)
	}
	rd, err := r.GetPlainText()
	if err != nil {
		t.Fatalf("read text layer: %v", err)
	}
	out, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), r.NumPage()
}

func TestExampleTemplateReadsBack(t *testing.T) {
	text, pages := readBack(t, render(t, example(t), fields(), meta()))
	if pages != 1 {
		t.Errorf("%d pages, want 1", pages)
	}
	for _, want := range []string{
		"Fullmakt – uppsägning av försäkring",
		"Tolvan Tolvansson",
		"Namn: Tolvan Tolvansson",
		"Personnummer: 19121212-1212",
		"Försäkringsnummer: HEM-123456",
		"Ort och datum: Stockholm, 2026-11-22",
		"1 / 1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text layer lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "{{") {
		t.Errorf("text layer has a placeholder left:\n%s", text)
	}
}

func TestUnknownValuesPrintAsBlanks(t *testing.T) {
	f := fields()
	f.Place, f.PersonalNumber = "", ""
	text, _ := readBack(t, render(t, example(t), f, meta()))
	for _, want := range []string{"Ort och datum: ________, 2026-11-22", "Personnummer: ________"} {
		if !strings.Contains(text, want) {
			t.Errorf("text layer lacks %q:\n%s", want, text)
		}
	}
}

func TestDeterministic(t *testing.T) {
	tpl := example(t)
	first := render(t, tpl, fields(), meta())
	for range 3 {
		if again := render(t, tpl, fields(), meta()); !bytes.Equal(first, again) {
			t.Fatal("the same input gave different bytes")
		}
	}
	// The same instant in another zone is the same document.
	m := meta()
	m.CreatedAt = createdAt.In(time.FixedZone("CET", 3600))
	if other := render(t, tpl, fields(), m); !bytes.Equal(first, other) {
		t.Error("the same instant in another time zone gave different bytes")
	}
	for _, date := range []string{"/CreationDate (D:20261122093000)", "/ModDate (D:20261122093000)"} {
		if !bytes.Contains(first, []byte(date)) {
			t.Errorf("the PDF lacks %q: it is not dated by Meta.CreatedAt", date)
		}
	}
	m.CreatedAt = createdAt.Add(time.Second)
	if later := render(t, tpl, fields(), m); bytes.Equal(first, later) {
		t.Error("another creation time gave the same bytes")
	}
	f := fields()
	f.InsuranceNumber = "HEM-123457"
	if other := render(t, tpl, f, meta()); bytes.Equal(first, other) {
		t.Error("another insurance number gave the same bytes")
	}
}

func TestMultiplePages(t *testing.T) {
	var src strings.Builder
	src.WriteString("# Fullmakt\n\n")
	for i := range 60 {
		src.WriteString("Villkor: fullmakten gäller uppsägning av försäkringen hos {{company}} och omfattar inte andra försäkringar eller ärenden än det som anges här.")
		if i == 0 {
			src.WriteString(" {{holderName}} {{personalNumber}} {{insuranceNumber}} {{insuranceType}} {{cancellationDate}} {{clientName}} {{place}} {{date}}")
		}
		src.WriteString("\n\n")
	}
	src.WriteString("---\n")
	tpl, err := poa.Parse(src.String())
	if err != nil {
		t.Fatal(err)
	}
	b := render(t, tpl, fields(), meta())
	text, pages := readBack(t, b)
	if pages < 2 || pages > 5 {
		t.Fatalf("%d pages, want a few", pages)
	}
	if n := strings.Count(text, "Demo Försäkring AB"); n != 60 {
		t.Errorf("the company is printed %d times, want 60", n)
	}
	for p := 1; p <= pages; p++ {
		if want := fmt.Sprintf("%d / %d", p, pages); !strings.Contains(text, want) {
			t.Errorf("page %d lacks its number %q", p, want)
		}
	}
	last := lastPageText(t, b)
	if !strings.Contains(last, "Tolvan Tolvansson") || !strings.HasSuffix(strings.TrimSpace(last), fmt.Sprintf("%d / %d", pages, pages)) {
		t.Errorf("the last page lacks the signature line's name or its number:\n%s", last)
	}
}

func lastPageText(t *testing.T, b []byte) string {
	t.Helper()
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	text, err := r.Page(r.NumPage()).GetPlainText(nil)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func TestPageLimit(t *testing.T) {
	// Every line a paragraph of long values: far more than MaxPages.
	line := strings.Repeat("{{company}} ", 40)
	src := "{{holderName}} {{personalNumber}} {{insuranceNumber}} {{insuranceType}} {{cancellationDate}} {{clientName}} {{place}} {{date}}\n" +
		strings.Repeat(line+"\n\n", 120)
	tpl, err := poa.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	f := fields()
	f.Company = strings.Repeat("Försäkring ", poa.MaxValueRunes/11)
	var b bytes.Buffer
	err = poapdf.Render(&b, tpl, f, meta())
	var limit *poapdf.PageLimitError
	if !errors.As(err, &limit) || limit.Limit != poapdf.MaxPages || !errors.Is(err, poapdf.ErrTooManyPages) {
		t.Fatalf("Render = %v, want a *PageLimitError", err)
	}
	if b.Len() != 0 {
		t.Errorf("a refused document wrote %d bytes", b.Len())
	}
}

func TestTransliteration(t *testing.T) {
	cases := []struct{ holder, want string }{
		{"Łukasz Wałęsa", "Lukasz Walesa"},
		{"Åsa Öberg", "Åsa Öberg"},
		{"Ærø Østergård Smørrebrød", "Ærø Østergård Smørrebrød"},
		{"Jürgen Straße", "Jürgen Straße"},
		{"Œdipe Cœur", "Œdipe Cœur"},
		{"Đorđe Ševčík", "Dorde Ševcík"}, // š and í are in Windows-1252, č is not
		{"Ştefan Dumitrescu-Ţurcanu", "Stefan Dumitrescu-Turcanu"},
		{"Zoë Tørnqvist\u200b", "Zoë Tørnqvist"},
		{"A\u030asa", "Åsa"}, // decomposed input composes to a Windows-1252 letter
	}
	tpl := example(t)
	for _, c := range cases {
		t.Run(c.holder, func(t *testing.T) {
			f := fields()
			f.HolderName = c.holder
			text, _ := readBack(t, render(t, tpl, f, meta()))
			if want := "Namn: " + c.want; !strings.Contains(text, want) {
				t.Errorf("text layer lacks %q:\n%s", want, text)
			}
			if strings.Contains(text, "?") {
				t.Errorf("text layer has a \"?\":\n%s", text)
			}
		})
	}
}

func TestUnprintableIsRefused(t *testing.T) {
	f := fields()
	f.HolderName, f.Place = "李小龍 😀", "東京"
	var b bytes.Buffer
	err := poapdf.Render(&b, example(t), f, meta())
	var u *poapdf.UnprintableError
	if !errors.As(err, &u) || !errors.Is(err, poapdf.ErrUnprintable) {
		t.Fatalf("Render = %v, want an *UnprintableError", err)
	}
	if want := []rune("李小龍😀東京"); string(u.Runes) != string(want) {
		t.Errorf("Runes = %q, want %q (each once)", string(u.Runes), string(want))
	}
	if strings.Contains(err.Error(), "李") {
		t.Errorf("error %q prints the text", err)
	}
	if b.Len() != 0 {
		t.Errorf("a refused document wrote %d bytes", b.Len())
	}
}

func TestRefusals(t *testing.T) {
	m := meta()
	m.CreatedAt = time.Time{}
	if err := poapdf.Render(io.Discard, example(t), fields(), m); !errors.Is(err, poapdf.ErrNoCreationTime) {
		t.Errorf("zero CreatedAt: %v, want ErrNoCreationTime", err)
	}
	f := fields()
	f.Company = "\xff"
	if err := poapdf.Render(io.Discard, example(t), f, meta()); !errors.Is(err, poa.ErrInvalidFields) {
		t.Errorf("invalid value: %v, want poa.ErrInvalidFields", err)
	}
	if err := poapdf.Render(io.Discard, poa.Template{}, fields(), meta()); !errors.Is(err, poa.ErrNotParsed) {
		t.Errorf("zero template: %v, want poa.ErrNotParsed", err)
	}
}

// TestOtherToolsReadTheDocument checks the PDF is a PDF for other readers too, when poppler's
// pdftotext is installed.
func TestOtherToolsReadTheDocument(t *testing.T) {
	path, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed")
	}
	cmd := exec.Command(path, "-", "-")
	cmd.Stdin = bytes.NewReader(render(t, example(t), fields(), meta()))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Personnummer: 19121212-1212", "Fullmakt – uppsägning av försäkring"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("pdftotext output lacks %q:\n%s", want, out)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	tpl, f, m := example(b), fields(), meta()
	for b.Loop() {
		if err := poapdf.Render(io.Discard, tpl, f, m); err != nil {
			b.Fatal(err)
		}
	}
}
