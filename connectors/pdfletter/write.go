package pdfletter

import (
	"fmt"
	"io"
	"time"

	"github.com/go-pdf/fpdf"
	"golang.org/x/text/encoding/charmap"
)

// Write prints a letter as a one-page A4 PDF with a text layer. The standard PDF fonts carry
// Windows-1252, which covers Swedish, Estonian and French names; a letter with a character
// outside it is refused (ErrInvalidLetter) rather than printed with a "?" that would not read
// back.
func Write(w io.Writer, l Letter) error {
	if err := l.validate(); err != nil {
		return err
	}
	return render(w, l.Company, l.values())
}

// WriteBroken prints a letter of the layout whose field cannot be read back: Parse answers a
// *FieldError for it (ErrParseFailed). Tests and `samla sandbox pdf` use it to provoke
// FAILED_PDF_PARSE.
func WriteBroken(w io.Writer, l Letter, field Field) error {
	if err := l.validate(); err != nil {
		return err
	}
	values := l.values()
	if _, ok := values[field]; !ok {
		return fmt.Errorf("%w: no field %q", ErrInvalidLetter, field)
	}
	// What a smudged scan or a template bug leaves: an empty value or one that is not of the
	// field's kind.
	values[field] = map[Field]string{
		FieldInsuranceType: "Försäkring ??",
		FieldPremium:       "#.##0,00 kr",
		FieldRenewalDate:   "??-??-????",
	}[field]
	return render(w, l.Company, values)
}

// WriteNotALetter prints a real PDF that is not an insurance letter (a payment receipt), which
// Parse answers with ErrUnsupported.
func WriteNotALetter(w io.Writer, company string) error {
	p, tr, err := newDoc()
	if err != nil {
		return err
	}
	lines := []string{company, "Kvitto", "Betalning mottagen: 289,00 SEK", "Betaldatum: 2026-10-27", "Tack för din betalning!"}
	for _, l := range lines {
		s, err := tr(l)
		if err != nil {
			return err
		}
		p.CellFormat(0, 8, s, "", 1, "L", false, 0, "")
	}
	return output(p, w)
}

// SampleOptions describe the letter `samla sandbox pdf` writes.
type SampleOptions struct {
	Company       string // default "Demo Försäkring"
	Holder        string // default "Tolvan Tolvansson"
	InsuranceType string // default TypeHome
	// Broken writes the letter with this field unreadable (FAILED_PDF_PARSE).
	Broken Field
	// NotALetter writes a PDF that is not an insurance letter (FAILED_PDF_USER_INPUT).
	NotALetter bool
	// Now dates the renewal (default time.Now).
	Now time.Time
}

// SampleLetter is the letter WriteSample prints for opts.
func SampleLetter(opts SampleOptions) Letter {
	if opts.Company == "" {
		opts.Company = "Demo Försäkring"
	}
	if opts.Holder == "" {
		opts.Holder = "Tolvan Tolvansson"
	}
	if opts.InsuranceType == "" {
		opts.InsuranceType = TypeHome
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	renewal := time.Date(opts.Now.Year(), time.September, 1, 0, 0, 0, 0, time.UTC)
	if !renewal.After(opts.Now) {
		renewal = renewal.AddDate(1, 0, 0)
	}
	premium := map[string]Premium{
		TypeCar: {4860, "SEK", Yearly}, TypeAccident: {129, "SEK", Quarterly}, TypePension: {1500, "SEK", Monthly},
	}[opts.InsuranceType]
	if premium.Currency == "" {
		premium = Premium{Amount: 289, Currency: "SEK", Frequency: Monthly}
	}
	return Letter{
		Company: opts.Company, InsuranceType: opts.InsuranceType,
		InsuranceNumber: fmt.Sprintf("%c-4471-%s", opts.InsuranceType[0], renewal.Format("0601")),
		Holder:          opts.Holder, Premium: premium, RenewalDate: renewal.Format(time.DateOnly),
	}
}

// WriteSample writes the sample of opts: a valid letter, a broken one or a PDF that is not a
// letter.
func WriteSample(w io.Writer, opts SampleOptions) error {
	l := SampleLetter(opts)
	switch {
	case opts.NotALetter:
		return WriteNotALetter(w, l.Company)
	case opts.Broken != "":
		return WriteBroken(w, l, opts.Broken)
	}
	return Write(w, l)
}

type translator func(string) (string, error)

func newDoc() (*fpdf.Fpdf, translator, error) {
	p := fpdf.New("P", "mm", "A4", "")
	p.SetMargins(20, 20, 20)
	p.SetAutoPageBreak(true, 20)
	enc := charmap.Windows1252.NewEncoder()
	tr := func(s string) (string, error) {
		out, err := enc.String(s)
		if err != nil {
			return "", fmt.Errorf("%w: %q has characters the letter fonts cannot print", ErrInvalidLetter, s)
		}
		return out, nil
	}
	p.AddPage()
	p.SetFont("Helvetica", "", 11)
	return p, tr, nil
}

// render lays the letter out.
func render(w io.Writer, company string, values map[Field]string) error {
	p, tr, err := newDoc()
	if err != nil {
		return err
	}
	t := func(s string) string {
		if err != nil {
			return ""
		}
		var out string
		out, err = tr(s)
		return out
	}
	p.SetTitle(title, true)
	p.SetCreator("samla pdfletter", true)

	p.SetFont("Helvetica", "B", 16)
	p.CellFormat(0, 9, t(company), "", 1, "L", false, 0, "")
	p.Ln(8)
	p.SetFont("Helvetica", "B", 22)
	p.CellFormat(0, 12, t(title), "", 1, "L", false, 0, "")
	p.SetFont("Helvetica", "", 11)
	p.MultiCell(0, 6, t("Här är ditt försäkringsbrev. Kontrollera att uppgifterna nedan stämmer "+
		"och kontakta oss om något är fel."), "", "L", false)
	p.Ln(6)
	p.SetDrawColor(180, 180, 180)
	for _, f := range Fields() {
		// One text run per line, label and value together: text extraction keeps a run whole,
		// while two runs on one line may come back in either order or on separate lines.
		p.CellFormat(0, 9, t(labels[f]+": "+values[f]), "B", 1, "L", false, 0, "")
	}
	p.Ln(10)
	p.SetFont("Helvetica", "", 9)
	p.SetTextColor(90, 90, 90)
	p.MultiCell(0, 5, t("Förnyelsen sker automatiskt om du inte säger upp försäkringen före förnyelsedatum."), "", "L", false)
	p.SetY(-30)
	p.CellFormat(0, 5, t(formNumber), "", 1, "L", false, 0, "")
	p.CellFormat(0, 5, t(company), "", 1, "L", false, 0, "")
	if err != nil {
		return err
	}
	return output(p, w)
}

func output(p *fpdf.Fpdf, w io.Writer) error {
	if err := p.Output(w); err != nil {
		return fmt.Errorf("write insurance letter PDF: %w", err)
	}
	return nil
}
