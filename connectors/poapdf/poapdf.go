// Package poapdf renders a power of attorney (domain/poa) into the PDF an e-signing provider
// sends to the holder: A4, with a real text layer, in the core PDF fonts as the project's
// insurance letters (connectors/pdfletter) are.
//
// Rendering is deterministic: the same template, values and Meta give byte-identical output,
// because the PDF's dates come from Meta.CreatedAt rather than the clock and its catalogs are
// written in a fixed order. A document can therefore be rendered again later (for the provider,
// for an auditor) and compared byte for byte.
//
// The core fonts print Windows-1252 only. A letter outside it is printed as its closest Latin
// letter ("Łukasz Wałęsa" as "Lukasz Walesa"): a name must never turn into "?", and a
// transliterated name is what a Swedish insurer's own letters show anyway. A character with no
// Latin reading (a CJK ideograph, an emoji) is refused with an *UnprintableError rather than
// dropped.
package poapdf

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/go-pdf/fpdf"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/unicode/norm"

	"github.com/samla/samla/domain/poa"
)

// MaxPages bounds a document: a power of attorney is a page or two, and a template whose
// rendering runs longer is a mistake that must not reach a holder (nor fill a disk).
const MaxPages = 50

// Meta is the PDF's document information.
type Meta struct {
	Title  string // the document's title, e.g. "Fullmakt – uppsägning av försäkring"
	Author string // the client's name
	// CreatedAt dates the PDF (its creation and modification dates); required, so that
	// rendering again gives the same bytes. Use the time the cancellation was requested.
	CreatedAt time.Time
}

var (
	// ErrNoCreationTime: Meta.CreatedAt is zero.
	ErrNoCreationTime = errors.New("power-of-attorney PDF needs a creation time")
	// ErrTooManyPages is what a *PageLimitError is.
	ErrTooManyPages = errors.New("power-of-attorney PDF too long")
	// ErrUnprintable is what an *UnprintableError is.
	ErrUnprintable = errors.New("power-of-attorney text has characters the PDF fonts cannot print")
)

// PageLimitError is a document that would run longer than Limit pages. It is ErrTooManyPages.
type PageLimitError struct{ Limit int }

func (e *PageLimitError) Error() string {
	return fmt.Sprintf("power-of-attorney PDF would have more than %d pages", e.Limit)
}

func (e *PageLimitError) Unwrap() error { return ErrTooManyPages }

// UnprintableError names the characters (not the text, which may be personal data) that have
// neither a Windows-1252 form nor a Latin transliteration. It is ErrUnprintable.
type UnprintableError struct{ Runes []rune }

func (e *UnprintableError) Error() string {
	codes := make([]string, len(e.Runes))
	for i, r := range e.Runes {
		codes[i] = fmt.Sprintf("%U", r)
	}
	return ErrUnprintable.Error() + ": " + strings.Join(codes, ", ")
}

func (e *UnprintableError) Unwrap() error { return ErrUnprintable }

// Layout, in millimetres and points.
const (
	margin         = 25.0
	bodySize       = 11.0
	bodyLine       = 5.5
	headingSize    = 15.0
	headingLine    = 8.0
	headingGap     = 3.0
	captionSize    = 9.0
	captionLine    = 4.5
	paragraphGap   = 3.5
	signatureSpace = 16.0 // room above the rule to sign in
	ruleWidth      = 85.0
	footerSize     = 8.0
	// pageCountAlias is replaced by the page count when the PDF is written. It starts and ends
	// with a control character, which no printed text holds (poa refuses them in templates and
	// blanks them in values), so no text can be mistaken for it.
	pageCountAlias = "\x01nb\x01"
)

// Render writes the document of t filled with f as an A4 PDF to w. Its errors: t.Render's
// (poa.ErrInvalidFields), ErrNoCreationTime, an *UnprintableError and a *PageLimitError; w sees
// nothing unless the whole document was laid out.
func Render(w io.Writer, t poa.Template, f poa.Fields, meta Meta) error {
	if meta.CreatedAt.IsZero() {
		return ErrNoCreationTime
	}
	blocks, err := t.Render(f)
	if err != nil {
		return fmt.Errorf("render power of attorney: %w", err)
	}
	// Encode everything first: an unprintable character is refused before any layout work.
	encoded := make([]string, len(blocks))
	var unprintable []rune
	for i, b := range blocks {
		var bad []rune
		encoded[i], bad = toWindows1252(b.Text)
		unprintable = appendNew(unprintable, bad...)
	}
	if len(unprintable) > 0 {
		return &UnprintableError{Runes: unprintable}
	}

	l := newLayout(t, meta)
	for i, b := range blocks {
		switch b.Kind {
		case poa.Heading:
			l.heading(encoded[i])
		case poa.Paragraph:
			l.paragraph(encoded[i])
		case poa.SignatureLine:
			l.signatureLine(encoded[i])
		default:
			return fmt.Errorf("render power of attorney: block kind %v has no layout", b.Kind)
		}
		if l.overflow {
			return &PageLimitError{Limit: MaxPages}
		}
	}
	if err := l.pdf.Error(); err != nil {
		return fmt.Errorf("lay out power-of-attorney PDF: %w", err)
	}
	if err := l.pdf.Output(w); err != nil {
		return fmt.Errorf("write power-of-attorney PDF: %w", err)
	}
	return nil
}

// layout writes blocks one after the other, stopping (overflow) at MaxPages.
type layout struct {
	pdf      *fpdf.Fpdf
	width    float64 // of the text column
	bottom   float64 // y where the page's text ends
	overflow bool
}

func newLayout(t poa.Template, meta Meta) *layout {
	p := fpdf.New("P", "mm", "A4", "")
	created := meta.CreatedAt.UTC() // the PDF date has no zone: print the same instant everywhere
	p.SetCreationDate(created)
	p.SetModificationDate(created)
	p.SetCatalogSort(true)
	p.SetTitle(meta.Title, true)
	p.SetAuthor(meta.Author, true)
	p.SetCreator("samla poapdf", true)
	// The template's version lets an auditor tell which template a signed document came from.
	p.SetKeywords("template "+t.Version(), true)
	p.SetMargins(margin, margin, margin)
	p.SetAutoPageBreak(true, margin)
	p.AliasNbPages(pageCountAlias)

	l := &layout{pdf: p}
	pageWidth, pageHeight := p.GetPageSize()
	l.width = pageWidth - 2*margin
	l.bottom = pageHeight - margin
	p.SetAcceptPageBreakFunc(func() bool {
		if p.PageNo() >= MaxPages {
			l.overflow = true
			return false
		}
		return true
	})
	p.SetFooterFunc(func() {
		// "n / total" on every page, so that a missing page of a signed document shows.
		p.SetY(-margin + 8)
		p.SetFont("Helvetica", "", footerSize)
		p.SetTextColor(110, 110, 110)
		p.CellFormat(0, 4, fmt.Sprintf("%d / %s", p.PageNo(), pageCountAlias), "", 0, "C", false, 0, "")
		p.SetTextColor(0, 0, 0)
	})
	p.AddPage()
	return l
}

// lines prints text wrapped to the column, one text run per line (text extraction keeps a run
// whole), at the current font.
func (l *layout) lines(text string, height float64) {
	for _, line := range l.pdf.SplitLines([]byte(text), l.width) {
		if l.overflow {
			return
		}
		l.pdf.CellFormat(0, height, string(line), "", 1, "L", false, 0, "")
	}
}

// ensureRoom starts a new page unless height fits on this one.
func (l *layout) ensureRoom(height float64) {
	if l.pdf.GetY()+height <= l.bottom {
		return
	}
	if l.pdf.PageNo() >= MaxPages {
		l.overflow = true
		return
	}
	l.pdf.AddPage()
}

func (l *layout) heading(text string) {
	l.pdf.SetFont("Helvetica", "B", headingSize)
	wrapped := len(l.pdf.SplitLines([]byte(text), l.width))
	// Keep a heading with the first lines that follow it.
	l.ensureRoom(headingGap + float64(wrapped)*headingLine + 2*bodyLine)
	if l.overflow {
		return
	}
	if l.pdf.GetY() > margin { // a heading below other text stands apart from it
		l.pdf.Ln(headingGap)
	}
	l.lines(text, headingLine)
	l.pdf.Ln(paragraphGap)
}

func (l *layout) paragraph(text string) {
	l.pdf.SetFont("Helvetica", "", bodySize)
	l.lines(text, bodyLine)
	l.pdf.Ln(paragraphGap)
}

// signatureLine draws a rule to sign on with the signer's name under it, both on one page.
func (l *layout) signatureLine(name string) {
	l.ensureRoom(signatureSpace + captionLine + paragraphGap)
	if l.overflow {
		return
	}
	p := l.pdf
	p.Ln(signatureSpace)
	x, y := p.GetX(), p.GetY()
	p.SetDrawColor(0, 0, 0)
	p.SetLineWidth(0.3)
	p.Line(x, y, x+ruleWidth, y)
	p.Ln(1)
	p.SetFont("Helvetica", "", captionSize)
	p.CellFormat(ruleWidth, captionLine, name, "", 1, "L", false, 0, "")
	p.Ln(paragraphGap)
}

// latinFallback are letters (and dashes) outside Windows-1252 that Unicode does not decompose
// into a Latin letter and a mark, written as a reader of Latin script would write them.
var latinFallback = map[rune]string{
	'ł': "l", 'Ł': "L", 'đ': "d", 'Đ': "D", 'ħ': "h", 'Ħ': "H", 'ı': "i", 'ŀ': "l", 'Ŀ': "L",
	'ŧ': "t", 'Ŧ': "T", 'ŋ': "n", 'Ŋ': "N", 'ĸ': "k", 'ſ': "s",
	'\u2010': "-", '\u2011': "-", '\u2012': "-", '\u2212': "-", '\u2032': "'", '\u2033': "\"",
}

// toWindows1252 encodes text for the core fonts, transliterating what Windows-1252 lacks, and
// answers the characters it could not write at all.
func toWindows1252(text string) (string, []rune) {
	var (
		out         []byte
		unprintable []rune
	)
	for _, r := range norm.NFC.String(text) {
		if b, ok := charmap.Windows1252.EncodeRune(r); ok {
			out = append(out, b)
			continue
		}
		latin, ok := transliterate(r)
		if !ok {
			unprintable = appendNew(unprintable, r)
			continue
		}
		for _, lr := range latin {
			b, _ := charmap.Windows1252.EncodeRune(lr) // transliterate answers encodable runes only
			out = append(out, b)
		}
	}
	return string(out), unprintable
}

// transliterate writes r, which Windows-1252 lacks, in letters it has: from the table, else by
// compatibility decomposition without the combining marks ("ę" is "e" and an ogonek, "ﬁ" is
// "fi"). An invisible formatting character (a zero-width space) becomes nothing.
func transliterate(r rune) (string, bool) {
	if s, ok := latinFallback[r]; ok {
		return s, true
	}
	if unicode.Is(unicode.Cf, r) {
		return "", true
	}
	var b strings.Builder
	for _, d := range norm.NFKD.String(string(r)) {
		if unicode.Is(unicode.Mn, d) {
			continue
		}
		if _, ok := charmap.Windows1252.EncodeRune(d); ok {
			b.WriteRune(d)
		} else if s, ok := latinFallback[d]; ok {
			b.WriteString(s)
		} else {
			return "", false
		}
	}
	// A lone combining mark decomposes to nothing: it is dropped like the marks above.
	return b.String(), b.Len() > 0 || unicode.Is(unicode.Mn, r)
}

func appendNew(list []rune, rs ...rune) []rune {
	for _, r := range rs {
		if !strings.ContainsRune(string(list), r) {
			list = append(list, r)
		}
	}
	return list
}
