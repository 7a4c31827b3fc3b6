package pdfletter_test

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/pdfletter"
)

func letter() pdfletter.Letter {
	return pdfletter.Letter{
		Company: "Demo Försäkring AB", InsuranceType: pdfletter.TypeHome, InsuranceNumber: "H-4471-1212",
		Holder: "Åsa Öberg-Ärlemalm", Premium: pdfletter.Premium{Amount: 1234.5, Currency: "SEK", Frequency: pdfletter.Monthly},
		RenewalDate: "2027-09-01",
	}
}

func write(t *testing.T, l pdfletter.Letter) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := pdfletter.Write(&b, l); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	cases := []pdfletter.Letter{letter()}
	l := letter()
	l.Company, l.Holder, l.InsuranceType = "Demo Kindlustus", "Jüri Õunapuu-Šokk", pdfletter.TypeCar
	l.Premium = pdfletter.Premium{Amount: 1234567.05, Currency: "EUR", Frequency: pdfletter.Yearly}
	cases = append(cases, l)
	l = letter()
	l.Holder, l.InsuranceType, l.Premium = "ÅÄÖ åäö Éloïse", pdfletter.TypePet, pdfletter.Premium{Amount: 0, Currency: "SEK", Frequency: pdfletter.Quarterly}
	cases = append(cases, l)
	for _, want := range cases {
		b := write(t, want)
		if !bytes.HasPrefix(b, []byte("%PDF-")) {
			t.Fatalf("not a PDF: %q", b[:16])
		}
		got, err := pdfletter.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", want.Holder, err)
		}
		if got != want {
			t.Errorf("read back\n%+v\nwant\n%+v", got, want)
		}
	}
}

func TestTextLayerHasSwedishLetters(t *testing.T) {
	text, err := pdfletter.Text(write(t, letter()))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Försäkringsbrev", "Försäkringstagare: Åsa Öberg-Ärlemalm", "Premie: 1 234,50 SEK per månad", "Förnyelsedatum: 2027-09-01"} {
		if !strings.Contains(text, s) {
			t.Errorf("text layer lacks %q:\n%s", s, text)
		}
	}
}

// TestOtherToolsReadTheLetter checks the PDF is a PDF for other readers too, when poppler's
// pdftotext is installed.
func TestOtherToolsReadTheLetter(t *testing.T) {
	path, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed")
	}
	cmd := exec.Command(path, "-", "-")
	cmd.Stdin = bytes.NewReader(write(t, letter()))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "Åsa Öberg-Ärlemalm") {
		t.Fatalf("pdftotext:\n%s", out)
	}
}

func TestBrokenFieldIsParseFailed(t *testing.T) {
	for _, f := range pdfletter.Fields() {
		var b bytes.Buffer
		if err := pdfletter.WriteBroken(&b, letter(), f); err != nil {
			t.Fatal(err)
		}
		_, err := pdfletter.Parse(b.Bytes())
		var fe *pdfletter.FieldError
		if !errors.Is(err, pdfletter.ErrParseFailed) || !errors.As(err, &fe) || fe.Field != f {
			t.Errorf("%s: %v", f, err)
		}
		if errors.Is(err, pdfletter.ErrUnsupported) {
			t.Errorf("%s: a letter of the layout is not unsupported", f)
		}
	}
}

func TestNotALetterIsUnsupported(t *testing.T) {
	var receipt bytes.Buffer
	if err := pdfletter.WriteNotALetter(&receipt, "Demo Försäkring"); err != nil {
		t.Fatal(err)
	}
	full := write(t, letter())
	cases := map[string][]byte{
		"a PDF that is not a letter": receipt.Bytes(),
		"not a PDF":                  []byte("Hej! Det här är ingen PDF."),
		"empty":                      nil,
		"a truncated PDF":            full[:len(full)/2],
		"a PDF header and garbage":   []byte("%PDF-1.7\n\x00\x01garbage trailer"),
	}
	for name, b := range cases {
		_, err := pdfletter.Parse(b)
		if !errors.Is(err, pdfletter.ErrUnsupported) || errors.Is(err, pdfletter.ErrParseFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := pdfletter.Parse([]byte("nope")); !errors.Is(err, pdfletter.ErrNotPDF) {
		t.Errorf("not a PDF: %v", err)
	}
}

func TestWriteRefusesWhatItCannotPrint(t *testing.T) {
	bad := []func(*pdfletter.Letter){
		func(l *pdfletter.Letter) { l.Holder = "Łukasz Żółw" }, // outside Windows-1252
		func(l *pdfletter.Letter) { l.InsuranceType = "SPACESHIP" },
		func(l *pdfletter.Letter) { l.Premium.Currency = "kr" },
		func(l *pdfletter.Letter) { l.Premium.Frequency = "WEEKLY" },
		func(l *pdfletter.Letter) { l.Premium.Amount = -1 },
		func(l *pdfletter.Letter) { l.RenewalDate = "1 september" },
		func(l *pdfletter.Letter) { l.InsuranceNumber = " " },
		func(l *pdfletter.Letter) { l.Company = "two\nlines" },
	}
	for i, mutate := range bad {
		l := letter()
		mutate(&l)
		if err := pdfletter.Write(&bytes.Buffer{}, l); !errors.Is(err, pdfletter.ErrInvalidLetter) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}

func TestWriteSample(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := pdfletter.WriteSample(&b, pdfletter.SampleOptions{Holder: "Tolvan Tolvansson", InsuranceType: pdfletter.TypeCar, Now: now}); err != nil {
		t.Fatal(err)
	}
	l, err := pdfletter.Parse(b.Bytes())
	if err != nil || l.Holder != "Tolvan Tolvansson" || l.InsuranceType != pdfletter.TypeCar || l.RenewalDate != "2027-09-01" || l.Company != "Demo Försäkring" {
		t.Fatalf("%+v %v", l, err)
	}
	b.Reset()
	if err := pdfletter.WriteSample(&b, pdfletter.SampleOptions{Broken: pdfletter.FieldPremium, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := pdfletter.Parse(b.Bytes()); !errors.Is(err, pdfletter.ErrParseFailed) {
		t.Fatal(err)
	}
	b.Reset()
	if err := pdfletter.WriteSample(&b, pdfletter.SampleOptions{NotALetter: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := pdfletter.Parse(b.Bytes()); !errors.Is(err, pdfletter.ErrUnsupported) {
		t.Fatal(err)
	}
}
