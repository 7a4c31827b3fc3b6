package pdfletter

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ledongthuc/pdf"
)

// MaxSize bounds what Parse reads: the spec's upload limit.
const MaxSize = 10 << 20

// Parse reads a letter back from a PDF. It answers ErrUnsupported (ErrNotPDF for bytes that are
// not a readable PDF) for anything that is not a letter of this layout, and a *FieldError
// (ErrParseFailed) for a letter of this layout with a field it cannot read.
func Parse(b []byte) (Letter, error) {
	text, err := Text(b)
	if err != nil {
		return Letter{}, err
	}
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	if !contains(lines, title) || !contains(lines, formNumber) {
		return Letter{}, ErrUnsupported
	}
	var l Letter
	for _, f := range Fields() {
		v, ok := valueOf(lines, labels[f])
		if !ok {
			return Letter{}, &FieldError{Field: f, Reason: "missing"}
		}
		set, err := parseValue(f, v)
		if err != nil {
			return Letter{}, err
		}
		set(&l)
	}
	return l, nil
}

// Text extracts the text layer of a PDF, one text run per line.
func Text(b []byte) (text string, err error) {
	if len(b) > MaxSize {
		return "", fmt.Errorf("%w: larger than %d bytes", ErrUnsupported, MaxSize)
	}
	if !bytes.HasPrefix(bytes.TrimLeft(b, "\x00\t\r\n "), []byte("%PDF-")) {
		return "", ErrNotPDF
	}
	// The reader was written for well-formed files and may panic on a damaged one; a damaged
	// file is simply not a PDF we can read.
	defer func() {
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("%w: %v", ErrNotPDF, r)
		}
	}()
	// Nor does it bound what a forged file asks of it (see checkXref and letterPages): the
	// structure is checked before and while it is read.
	if err := checkXref(b); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotPDF, err)
	}
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotPDF, err)
	}
	pages, err := letterPages(r, len(b))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotPDF, err)
	}
	var out strings.Builder
	for _, p := range pages {
		s, err := p.GetPlainText(nil)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNotPDF, err)
		}
		out.WriteString(s)
	}
	if out.Len() > MaxSize {
		return out.String()[:MaxSize], nil
	}
	return out.String(), nil
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// valueOf finds "<label>: value". A label printed twice is ambiguous, hence unreadable.
func valueOf(lines []string, label string) (string, bool) {
	found, value := 0, ""
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, label+":"); ok {
			found++
			value = v
		}
	}
	return value, found == 1
}
