package poa

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Parse reads a template. Its errors are all ErrInvalidTemplate: a limit exceeded (ErrTooLarge,
// ErrTooManyLines, ErrLineTooLong, which name the limit and the line), text that is not UTF-8
// or holds control characters (ErrNotText), or a *TemplateError listing every unknown, missing
// and malformed placeholder at once, so that an administrator fixes them in one go.
func Parse(text string) (Template, error) {
	if len(text) > MaxTemplateBytes {
		return Template{}, fmt.Errorf("%w: %w: %d bytes, at most %d", ErrInvalidTemplate, ErrTooLarge, len(text), MaxTemplateBytes)
	}
	if !utf8.ValidString(text) {
		return Template{}, fmt.Errorf("%w: %w: not valid UTF-8", ErrInvalidTemplate, ErrNotText)
	}
	text = strings.TrimPrefix(text, "\uFEFF")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	text = norm.NFC.String(text)

	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimRightFunc(strings.ReplaceAll(lines[i], "\t", " "), unicode.IsSpace)
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > MaxLines {
		return Template{}, fmt.Errorf("%w: %w: %d lines, at most %d", ErrInvalidTemplate, ErrTooManyLines, len(lines), MaxLines)
	}
	for i, line := range lines {
		if n := utf8.RuneCountInString(line); n > MaxLineRunes {
			return Template{}, fmt.Errorf("%w: %w: line %d has %d characters, at most %d", ErrInvalidTemplate, ErrLineTooLong, i+1, n, MaxLineRunes)
		}
		if j := strings.IndexFunc(line, isForbiddenControl); j >= 0 {
			r, _ := utf8.DecodeRuneInString(line[j:])
			return Template{}, fmt.Errorf("%w: %w: line %d holds control character %U", ErrInvalidTemplate, ErrNotText, i+1, r)
		}
	}

	p := parser{used: map[Placeholder]bool{}}
	for i, line := range lines {
		p.line(i+1, line)
	}
	p.endParagraph()
	if err := p.err(); err != nil {
		return Template{}, err
	}
	canonical := strings.Join(p.canonical, "\n") + "\n"
	return Template{text: canonical, version: versionOf(canonical), blocks: p.blocks}, nil
}

// isForbiddenControl reports characters that have no place in a printed document and could hide
// text from the person who reviews a template (tabs and line breaks are handled before).
func isForbiddenControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

type parser struct {
	blocks    []blockTemplate
	paragraph []segment // the open paragraph's segments, nil when none is open
	canonical []string  // canonical source lines
	used      map[Placeholder]bool
	unknown   []string
	malformed []string
}

func (p *parser) line(number int, line string) {
	trimmed := strings.TrimSpace(line)
	switch {
	case trimmed == "":
		p.endParagraph()
		// One blank line is all a paragraph break needs; leading ones mean nothing.
		if n := len(p.canonical); n > 0 && p.canonical[n-1] != "" {
			p.canonical = append(p.canonical, "")
		}
	case trimmed == "---":
		p.endParagraph()
		p.blocks = append(p.blocks, blockTemplate{kind: SignatureLine})
		p.canonical = append(p.canonical, "---")
	case line == "#" || strings.HasPrefix(line, "# "):
		// "#" alone is "# " whose trailing space was trimmed.
		p.endParagraph()
		text := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if text == "" {
			p.malformed = append(p.malformed, fmt.Sprintf("line %d: heading without text", number))
		}
		segments, canonical := p.placeholders(number, text)
		p.blocks = append(p.blocks, blockTemplate{kind: Heading, segments: segments})
		p.canonical = append(p.canonical, "# "+canonical)
	default:
		segments, canonical := p.placeholders(number, line)
		if p.paragraph != nil {
			p.paragraph = append(p.paragraph, segment{literal: "\n"})
		}
		p.paragraph = append(p.paragraph, segments...)
		p.canonical = append(p.canonical, canonical)
	}
}

func (p *parser) endParagraph() {
	if p.paragraph == nil {
		return
	}
	p.blocks = append(p.blocks, blockTemplate{kind: Paragraph, segments: mergeLiterals(p.paragraph)})
	p.paragraph = nil
}

// placeholders splits one line into literal text and placeholders, recording what is wrong, and
// returns it with its canonical spelling. A placeholder never spans lines.
func (p *parser) placeholders(number int, line string) ([]segment, string) {
	var (
		segments   []segment
		canonical  strings.Builder
		depth      int
		open       int // index of the outermost "{{" while depth > 0
		literalsAt int // start of the literal text not yet added
	)
	addLiteral := func(s string) {
		if s != "" {
			segments = append(segments, segment{literal: s})
			canonical.WriteString(s)
		}
	}
	for i := 0; i < len(line); {
		switch {
		case strings.HasPrefix(line[i:], "{{"):
			if depth == 0 {
				addLiteral(line[literalsAt:i])
				open = i
			}
			depth++
			i += 2
		case strings.HasPrefix(line[i:], "}}"):
			i += 2
			if depth == 0 {
				p.malformed = append(p.malformed, fmt.Sprintf(`line %d: "}}" without "{{" in %q`, number, excerpt(line, i-2)))
				continue
			}
			depth--
			if depth > 0 {
				continue
			}
			token := line[open:i]
			if name, ok := p.placeholder(number, token); ok {
				segments = append(segments, segment{name: name})
				canonical.WriteString("{{" + string(name) + "}}")
			} else {
				// Kept for the canonical text only; the template is refused anyway.
				canonical.WriteString(token)
			}
			literalsAt = i
		default:
			i++
		}
	}
	if depth > 0 {
		p.malformed = append(p.malformed, fmt.Sprintf(`line %d: "{{" never closed in %q`, number, excerpt(line, open)))
		literalsAt = open
	}
	addLiteral(line[literalsAt:])
	return segments, canonical.String()
}

// placeholder reads one "{{…}}" token; ok is false for anything but a known name.
func (p *parser) placeholder(number int, token string) (Placeholder, bool) {
	inner := token[2 : len(token)-2]
	name := strings.Trim(inner, " ")
	switch {
	case strings.Contains(inner, "{{"):
		p.malformed = append(p.malformed, fmt.Sprintf("line %d: placeholder inside a placeholder: %q", number, shorten(token)))
		return "", false
	case name == "":
		p.malformed = append(p.malformed, fmt.Sprintf("line %d: empty placeholder %q", number, token))
		return "", false
	case !isName(name):
		p.malformed = append(p.malformed, fmt.Sprintf("line %d: %q is not a placeholder name (letters and digits only)", number, shorten(token)))
		return "", false
	}
	if slices.Contains(Known(), Placeholder(name)) {
		p.used[Placeholder(name)] = true
		return Placeholder(name), true
	}
	if !slices.Contains(p.unknown, name) {
		p.unknown = append(p.unknown, name)
	}
	return "", false
}

func (p *parser) err() error {
	e := &TemplateError{Unknown: p.unknown, Malformed: p.malformed}
	for _, k := range Known() {
		e.Known = append(e.Known, string(k))
		if !p.used[k] {
			e.Missing = append(e.Missing, string(k))
		}
	}
	if len(e.Unknown)+len(e.Missing)+len(e.Malformed) == 0 {
		return nil
	}
	return e
}

// isName reports a placeholder name: an ASCII letter, then ASCII letters, digits or "_".
func isName(s string) bool {
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '_')) {
			return false
		}
	}
	return s != ""
}

// mergeLiterals joins adjacent literal segments, so that a block is as few pieces as its
// placeholders need.
func mergeLiterals(in []segment) []segment {
	var out []segment
	for _, s := range in {
		if n := len(out); n > 0 && s.name == "" && out[n-1].name == "" {
			out[n-1].literal += s.literal
			continue
		}
		out = append(out, s)
	}
	return out
}

// excerpt shows the part of a line from byte index at, short enough for an error message.
func excerpt(line string, at int) string { return shorten(line[at:]) }

func shorten(s string) string {
	const max = 40
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max]) + "…"
}
