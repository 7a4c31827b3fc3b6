package sandbox

import (
	"fmt"
	"io"
	"time"

	"github.com/go-pdf/fpdf"
	"golang.org/x/text/encoding/charmap"
)

// careerLine is one year of a French career statement (relevé de situation individuelle).
type careerLine struct {
	year     int
	employer string
	quarters int     // trimestres validés
	points   float64 // complementary pension points earned
}

func careerOf(o owner) []careerLine {
	if o.persona.data == dataRich {
		return []careerLine{
			{2019, "Démo Conseil SARL, Lyon", 4, 112.5},
			{2020, "Démo Conseil SARL, Lyon", 4, 118.25},
			{2021, "Société Générale de Démo, Paris", 4, 131},
			{2022, "Société Générale de Démo, Paris", 2, 64.75},
		}
	}
	return []careerLine{{2021, "Démo Services SAS, Nantes", 3, 45}}
}

// writeCareerStatement prints the person's career statement as the French pension-information
// service would: a real PDF with a text layer.
func writeCareerStatement(w io.Writer, o owner, now time.Time) error {
	enc := charmap.Windows1252.NewEncoder()
	var encErr error
	t := func(s string) string {
		out, err := enc.String(s)
		if err != nil && encErr == nil {
			encErr = fmt.Errorf("career statement text %q: %w", s, err)
		}
		return out
	}
	p := fpdf.New("P", "mm", "A4", "")
	p.SetMargins(20, 20, 20)
	p.SetTitle("Relevé de situation individuelle", true)
	p.SetCreator("Démo Info Retraite", true)
	p.AddPage()
	p.SetFont("Helvetica", "B", 14)
	p.CellFormat(0, 8, t("Démo Info Retraite"), "", 1, "L", false, 0, "")
	p.Ln(4)
	p.SetFont("Helvetica", "B", 18)
	p.CellFormat(0, 10, t("Relevé de situation individuelle"), "", 1, "L", false, 0, "")
	p.SetFont("Helvetica", "", 11)
	p.CellFormat(0, 7, t("Assuré : "+o.persona.surname+" "+o.persona.givenName), "", 1, "L", false, 0, "")
	p.CellFormat(0, 7, t("Établi le : "+now.UTC().Format("02/01/2006")), "", 1, "L", false, 0, "")
	p.Ln(6)
	p.SetFont("Helvetica", "B", 10)
	for _, h := range []struct {
		w    float64
		text string
	}{{20, "Année"}, {90, "Employeur"}, {30, "Trimestres"}, {30, "Points"}} {
		p.CellFormat(h.w, 8, t(h.text), "1", 0, "L", false, 0, "")
	}
	p.Ln(-1)
	p.SetFont("Helvetica", "", 10)
	quarters, points := 0, 0.0
	for _, l := range careerOf(o) {
		p.CellFormat(20, 7, fmt.Sprint(l.year), "1", 0, "L", false, 0, "")
		p.CellFormat(90, 7, t(l.employer), "1", 0, "L", false, 0, "")
		p.CellFormat(30, 7, fmt.Sprint(l.quarters), "1", 0, "R", false, 0, "")
		p.CellFormat(30, 7, fmt.Sprintf("%.2f", l.points), "1", 1, "R", false, 0, "")
		quarters, points = quarters+l.quarters, points+l.points
	}
	p.Ln(4)
	p.CellFormat(0, 7, t(fmt.Sprintf("Total : %d trimestres validés, %.2f points Agirc-Arrco", quarters, points)), "", 1, "L", false, 0, "")
	if encErr != nil {
		return encErr
	}
	if err := p.Output(w); err != nil {
		return fmt.Errorf("write career statement: %w", err)
	}
	return nil
}
