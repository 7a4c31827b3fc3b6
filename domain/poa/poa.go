// Package poa is the template language of the power of attorney ("fullmakt") that a client
// configures for insurance cancellations: Samla renders it once per insurance with the
// collection's data, and the holder e-signs the result.
//
// # Template language
//
// A template is UTF-8 text of at most MaxTemplateBytes bytes, MaxLines lines and MaxLineRunes
// characters per line. It holds named placeholders, written {{name}}; spaces inside the braces
// are allowed ({{ holderName }}). The names are the Placeholder constants (Known lists them);
// every one of them must appear at least once, because a power of attorney that leaves out, say,
// the insurance number or the date does not say what it authorises. Parse refuses an unknown
// name, a missing one, and a malformed placeholder ("{{" never closed, "}}" never opened,
// "{{}}", a placeholder inside another, or braces around something that is not a name) with a
// *TemplateError that lists them all together with the known names.
//
// The layout markup is kept tiny, so that a client's administrator can write it in any text box:
//
//   - a line starting with "# " is a heading (the rest of the line is its text);
//   - a line of only "---" is a signature line: a rule to sign on, with the signer's (the
//     holder's) name printed under it;
//   - a blank line ends a paragraph;
//   - every other line is body text. Consecutive body lines form one paragraph, and the line
//     breaks between them are kept (so "Namn: …" and "Personnummer: …" stay on lines of their
//     own); a renderer wraps lines that are too long.
//
// Placeholders may appear in headings and body text. ExampleTemplate is a working template.
//
// # Rendering
//
// Template.Render substitutes a Fields value and answers the document as Blocks, which a
// renderer (connectors/poapdf) lays out. Values are inserted literally: a value that itself
// reads "{{date}}" is printed as those characters, never expanded. A value that is empty (not
// known) is printed as Blank, a visible line to fill in by hand, never as nothing, so that the
// holder sees what is missing before signing.
package poa

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Placeholder is the name of a value a template refers to as {{name}}.
type Placeholder string

// The known placeholders; a template must use every one of them.
const (
	HolderName       Placeholder = "holderName"       // the insurance's holder, who signs
	PersonalNumber   Placeholder = "personalNumber"   // the holder's personal identity number
	Company          Placeholder = "company"          // the insurer
	InsuranceNumber  Placeholder = "insuranceNumber"  // the insurer's number of the insurance
	InsuranceType    Placeholder = "insuranceType"    // the kind of insurance, as printed
	CancellationDate Placeholder = "cancellationDate" // the date the insurance ends
	ClientName       Placeholder = "clientName"       // the client (tenant) who is authorised
	Place            Placeholder = "place"            // where the holder signs
	Date             Placeholder = "date"             // when the document was made
)

// Known lists the known placeholders in the order error messages name them.
func Known() []Placeholder {
	return []Placeholder{HolderName, PersonalNumber, Company, InsuranceNumber, InsuranceType,
		CancellationDate, ClientName, Place, Date}
}

// Limits of a template, checked by Parse before anything else.
const (
	MaxTemplateBytes = 64 << 10
	MaxLines         = 400
	MaxLineRunes     = 500
)

// MaxValueRunes bounds each value of Fields: every real value (a name, a number, a date) is far
// shorter, and the bound keeps a document's size a function of its template.
const MaxValueRunes = 256

// Blank is what an empty (unknown) value renders as: a visible line to fill in.
const Blank = "________"

// Fields are the values of one document, one per placeholder. An empty value means "not
// known" and renders as Blank. Values are single-line text: line breaks, tabs and other control
// characters in them render as spaces, and surrounding spaces are dropped.
type Fields struct {
	HolderName       string
	PersonalNumber   string
	Company          string
	InsuranceNumber  string
	InsuranceType    string
	CancellationDate string
	ClientName       string
	Place            string
	Date             string
}

// Value returns the value of placeholder p ("" for a name that is not known).
func (f Fields) Value(p Placeholder) string {
	switch p {
	case HolderName:
		return f.HolderName
	case PersonalNumber:
		return f.PersonalNumber
	case Company:
		return f.Company
	case InsuranceNumber:
		return f.InsuranceNumber
	case InsuranceType:
		return f.InsuranceType
	case CancellationDate:
		return f.CancellationDate
	case ClientName:
		return f.ClientName
	case Place:
		return f.Place
	case Date:
		return f.Date
	}
	return ""
}

// Kind is the layout role of a Block.
type Kind int

const (
	Heading Kind = iota + 1
	Paragraph
	SignatureLine
)

func (k Kind) String() string {
	switch k {
	case Heading:
		return "Heading"
	case Paragraph:
		return "Paragraph"
	case SignatureLine:
		return "SignatureLine"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Block is one rendered element of a document, in document order.
type Block struct {
	Kind Kind
	// Text is a heading's text, a paragraph's text (its lines separated by "\n"), or, for a
	// SignatureLine, the name to print under the rule: the holder's (Blank when unknown).
	Text string
}

var (
	// ErrInvalidTemplate is every error of Parse: a *TemplateError, a limit exceeded, or text
	// that is not UTF-8 text.
	ErrInvalidTemplate = errors.New("invalid power-of-attorney template")
	// ErrTooLarge: the template has more than MaxTemplateBytes bytes.
	ErrTooLarge = errors.New("template too large")
	// ErrTooManyLines: the template has more than MaxLines lines.
	ErrTooManyLines = errors.New("template has too many lines")
	// ErrLineTooLong: a line has more than MaxLineRunes characters.
	ErrLineTooLong = errors.New("template line too long")
	// ErrNotText: the template is not valid UTF-8 or holds control characters.
	ErrNotText = errors.New("template is not text")

	// ErrInvalidFields is every error of Render about its values: a *FieldError.
	ErrInvalidFields = errors.New("invalid power-of-attorney values")
	// ErrNotParsed: Render was called on a zero Template, not one Parse returned.
	ErrNotParsed = errors.New("power-of-attorney template not parsed")
)

// TemplateError is a template whose placeholders are not right. It is ErrInvalidTemplate.
type TemplateError struct {
	Unknown   []string // names used that are not known, in order of first use, without repeats
	Missing   []string // known names not used, in the order of Known
	Malformed []string // what is wrong and where, e.g. `line 3: "{{" is never closed`
	Known     []string // every known name
}

func (e *TemplateError) Error() string {
	parts := slices.Clone(e.Malformed)
	if len(e.Unknown) > 0 {
		parts = append(parts, plural(len(e.Unknown), "unknown placeholder ")+braced(e.Unknown))
	}
	if len(e.Missing) > 0 {
		parts = append(parts, "missing "+braced(e.Missing))
	}
	parts = append(parts, "known: "+braced(e.Known))
	return strings.Join(parts, "; ")
}

func (e *TemplateError) Unwrap() error { return ErrInvalidTemplate }

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return strings.TrimSuffix(s, " ") + "s "
}

func braced(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "{{" + n + "}}"
	}
	return strings.Join(out, ", ")
}

// FieldError is a value Render cannot print. It is ErrInvalidFields. Reason never contains the
// value, which may be personal data.
type FieldError struct {
	Placeholder Placeholder
	Reason      string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("power-of-attorney value {{%s}}: %s", e.Placeholder, e.Reason)
}

func (e *FieldError) Unwrap() error { return ErrInvalidFields }

// Template is a parsed template. Only Parse makes one; it is immutable and safe to share.
type Template struct {
	text    string
	version string
	blocks  []blockTemplate
}

// blockTemplate is a Block before substitution.
type blockTemplate struct {
	kind     Kind
	segments []segment
}

// segment is literal text, or a placeholder when name is set.
type segment struct {
	literal string
	name    Placeholder
}

// Text returns the template's canonical source: line breaks as "\n", Unicode in NFC, tabs as
// spaces, trailing spaces, leading and trailing blank lines and repeated blank lines dropped,
// placeholders written {{name}} without inner spaces, and one final "\n". Parse(t.Text()) is t.
func (t Template) Text() string { return t.text }

// Version identifies the canonical source for audit: "sha256:" and the first 16 hex digits of
// the SHA-256 of Text. Templates that differ only in what Text canonicalises share a Version.
func (t Template) Version() string { return t.version }

// Render substitutes f into the template. It answers a *FieldError (ErrInvalidFields) for a
// value that is not UTF-8 or longer than MaxValueRunes, and ErrNotParsed for a zero Template.
func (t Template) Render(f Fields) ([]Block, error) {
	if t.blocks == nil {
		return nil, ErrNotParsed
	}
	values := make(map[Placeholder]string, len(Known()))
	for _, p := range Known() {
		v, err := printable(p, f.Value(p))
		if err != nil {
			return nil, err
		}
		values[p] = v
	}
	blocks := make([]Block, 0, len(t.blocks))
	for _, bt := range t.blocks {
		if bt.kind == SignatureLine {
			blocks = append(blocks, Block{Kind: SignatureLine, Text: values[HolderName]})
			continue
		}
		var b strings.Builder
		for _, s := range bt.segments {
			if s.name != "" {
				// Inserted once, never scanned again: a value that reads like a placeholder
				// stays literal text.
				b.WriteString(values[s.name])
			} else {
				b.WriteString(s.literal)
			}
		}
		blocks = append(blocks, Block{Kind: bt.kind, Text: b.String()})
	}
	return blocks, nil
}

// printable turns a value into what is printed: one line, NFC, Blank when empty.
func printable(p Placeholder, v string) (string, error) {
	if !utf8.ValidString(v) {
		return "", &FieldError{Placeholder: p, Reason: "is not valid UTF-8"}
	}
	if n := utf8.RuneCountInString(v); n > MaxValueRunes {
		return "", &FieldError{Placeholder: p, Reason: fmt.Sprintf("has %d characters, more than %d", n, MaxValueRunes)}
	}
	// A value is one line of a sentence: a line break or other control character in it would
	// break the layout around it (or hide text), so it becomes a space.
	v = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, v)
	v = strings.TrimSpace(norm.NFC.String(v))
	if v == "" {
		return Blank, nil
	}
	return v, nil
}

func versionOf(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:])[:16]
}
