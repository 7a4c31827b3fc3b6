// The structure checks of Text: the PDF library trusts the numbers in a file, so a small hostile
// file could hang it, make it allocate gigabytes or overflow its stack; Text checks the file
// within these bounds before and while the library reads it.

package pdfletter

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ledongthuc/pdf"
)

// Bounds of the PDF structure Text reads. The reader (github.com/ledongthuc/pdf) trusts the
// numbers of a file: a page tree that is its own kid or claims two billion pages makes it loop,
// a cross-reference section numbered from two billion or a character map of two billion
// entries makes it allocate as much, two object streams that hold each other make it recurse
// until the stack overflows (which no recover catches), a stream deflated three times over
// inflates a thousandfold at each level, and nested arrays or dictionaries in page content
// cost it a kilobyte a level. A letter needs nothing near these bounds; a file beyond one is
// ErrNotPDF.
const (
	maxObjects        = 100_000  // object numbers of the cross-reference table
	maxXrefSections   = 16       // sections of the /Prev chain (incremental updates)
	maxXrefRanges     = 64       // subsections of one cross-reference stream (/Index pairs)
	maxObjectStreams  = 256      // object streams of the file
	maxObjStmBytes    = 1 << 20  // one object stream, decoded (the reader decodes it at every look-up)
	maxObjStmObjects  = 10_000   // objects of one object stream (/N)
	maxPages          = 1000     // pages (a letter has one; the signing sandbox reads documents of up to 500)
	maxPageTreeNodes  = 2000     // nodes of the page tree visited, pages included
	maxPageTreeDepth  = 8        // levels of the page tree
	maxParentChain    = 16       // /Parent links from a page to the root, which inheritance follows
	minContentBudget  = 64 << 10 // decoded page content and character maps of the whole file …
	contentPerByte    = 8        // … and as many bytes more per byte of the file …
	maxContentBytes   = 4 << 20  // … up to this bound (the reader allocates up to 85 bytes a byte of it)
	maxContentStreams = 64       // content streams of a page
	maxNesting        = 32       // nesting of arrays and dictionaries
	maxContentBegins  = 8        // PostScript "begin" operators in page content
	maxFonts          = 1024     // fonts of all pages together (the reader looks each up several times a page)
	maxCMapBlocks     = 32       // blocks of entries of a character map, 100 entries each at most
)

var errStructure = errors.New("PDF structure beyond the bounds of a letter")

func structureError(what string) error { return fmt.Errorf("%w: %s", errStructure, what) }

// xrefEntry is an object's entry in the cross-reference table: at offset (type 1) or inside
// object stream stream (type 2).
type xrefEntry struct {
	typ            int
	offset, stream int64
}

// checkXref reads the cross-reference sections the reader will read, found as it finds them
// (the last startxref in the last 100 bytes, then the /Prev chain), within the bounds above,
// and checks the object streams they refer to: each must be an object the table places in the
// file (not in another object stream), of at most maxObjStmObjects objects and maxObjStmBytes
// decoded, and extend no other.
func checkXref(b []byte) error {
	const endChunk = 100 // what the reader searches for startxref
	if len(b) < endChunk {
		return errors.New("truncated PDF")
	}
	tail := bytes.TrimRight(b[len(b)-endChunk:], "\r\n\t ")
	if !bytes.HasSuffix(tail, []byte("%%EOF")) {
		return errors.New("missing %%EOF")
	}
	i := findLastLine(tail, "startxref")
	if i < 0 {
		return errors.New("missing startxref")
	}
	l := lexer{b: b, i: len(b) - endChunk + i}
	if kind, tok, _ := l.next(); kind != tokKeyword || tok != "startxref" {
		return errors.New("missing startxref")
	}
	kind, _, offset := l.next()
	if kind != tokInt {
		return errors.New("startxref not followed by an offset")
	}
	table := map[int64]xrefEntry{} // the first section read (the newest) wins, as in the reader
	add := func(n int64, e xrefEntry) {
		if _, ok := table[n]; !ok {
			table[n] = e
		}
	}
	seen := map[int64]bool{}
	for section := 0; ; section++ {
		if section == maxXrefSections || seen[offset] || offset < 0 || offset >= int64(len(b)) {
			return structureError("cross-reference sections")
		}
		seen[offset] = true
		l = lexer{b: b, i: int(offset)}
		var (
			prev any
			err  error
		)
		if kind, tok, _ := l.next(); kind == tokKeyword && tok == "xref" {
			prev, err = classicXref(&l, add)
		} else {
			l.i = int(offset)
			prev, err = xrefStream(b, &l, add)
		}
		if err != nil {
			return err
		}
		if prev == nil {
			break
		}
		p, ok := prev.(int64)
		if !ok {
			return structureError("/Prev")
		}
		offset = p
	}
	streams := map[int64]bool{}
	for _, e := range table {
		if e.typ == 2 {
			streams[e.stream] = true
		}
	}
	if len(streams) > maxObjectStreams {
		return structureError("object streams")
	}
	for n := range streams {
		e, ok := table[n]
		if !ok || e.typ != 1 || e.offset <= 0 || e.offset >= int64(len(b)) {
			return structureError("object stream not in the file")
		}
		l = lexer{b: b, i: int(e.offset)}
		dict, data, err := readStream(b, &l, table)
		if err != nil {
			return err
		}
		objects, ok1 := dict["N"].(int64)
		first, ok2 := dict["First"].(int64)
		if dict["Type"] != pdfName("ObjStm") || !ok1 || !ok2 || objects < 0 || objects > maxObjStmObjects || first <= 0 ||
			dict["Extends"] != nil {
			return structureError("object stream")
		}
		decoded, err := decodeStream(dict, data, maxObjStmBytes)
		if err != nil {
			return err
		}
		// The reader reads an object stream as it reads page content, waiting at its end for
		// the ">" of a hexadecimal string.
		for l := (lexer{b: decoded}); ; {
			kind, _, _ := l.next()
			if kind == tokUnterminated {
				return structureError("unterminated hexadecimal string")
			}
			if kind == tokEOF {
				break
			}
		}
	}
	return nil
}

// classicXref reads a cross-reference table after its "xref" keyword, and its trailer; it
// returns the trailer's /Prev.
func classicXref(l *lexer, add func(int64, xrefEntry)) (prev any, err error) {
	for {
		kind, tok, start := l.next()
		if kind == tokKeyword && tok == "trailer" {
			break
		}
		kind2, _, n := l.next()
		if kind != tokInt || kind2 != tokInt || start < 0 || n < 0 || start > maxObjects || n > maxObjects-start {
			return nil, structureError("cross-reference subsection")
		}
		for i := range n {
			k1, _, off := l.next()
			k2, _, _ := l.next()
			k3, used, _ := l.next()
			if k1 != tokInt || k2 != tokInt || k3 != tokKeyword {
				return nil, errors.New("malformed cross-reference table")
			}
			if used == "n" {
				add(start+i, xrefEntry{typ: 1, offset: off})
			}
		}
	}
	trailer, err := l.value(0)
	if err != nil {
		return nil, err
	}
	dict, ok := trailer.(map[string]any)
	if !ok {
		return nil, errors.New("missing trailer dictionary")
	}
	return dict["Prev"], nil
}

// xrefStream reads a cross-reference stream and returns its /Prev.
func xrefStream(b []byte, l *lexer, add func(int64, xrefEntry)) (prev any, err error) {
	dict, data, err := readStream(b, l, nil)
	if err != nil {
		return nil, err
	}
	size, ok := dict["Size"].(int64)
	if dict["Type"] != pdfName("XRef") || !ok || size < 0 || size > maxObjects {
		return nil, structureError("cross-reference stream")
	}
	index := []any{int64(0), size}
	if x, ok := dict["Index"]; ok {
		if index, ok = x.([]any); !ok || len(index)%2 != 0 || len(index) > 2*maxXrefRanges {
			return nil, structureError("cross-reference stream /Index")
		}
	}
	widths, ok := dict["W"].([]any)
	if !ok || len(widths) < 3 || len(widths) > 8 {
		return nil, structureError("cross-reference stream /W")
	}
	var w []int
	row := 0
	for _, x := range widths {
		n, ok := x.(int64)
		if !ok || n < 0 || n > 8 {
			return nil, structureError("cross-reference stream /W")
		}
		w = append(w, int(n))
		row += int(n)
	}
	entries := int64(0)
	for i := 0; i < len(index); i += 2 {
		start, ok1 := index[i].(int64)
		n, ok2 := index[i+1].(int64)
		if !ok1 || !ok2 || start < 0 || n < 0 || start > maxObjects || n > maxObjects-start {
			return nil, structureError("cross-reference stream /Index")
		}
		if entries += n; entries > maxObjects {
			return nil, structureError("cross-reference stream /Index")
		}
	}
	decoded, err := decodeStream(dict, data, int(entries)*row)
	if err != nil {
		return nil, err
	}
	field := func(entry []byte, i int) int64 {
		at := 0
		for _, n := range w[:i] {
			at += n
		}
		v := int64(0)
		for _, c := range entry[at : at+w[i]] {
			v = v<<8 | int64(c)
		}
		return v
	}
	for i := 0; i < len(index); i += 2 {
		start, n := index[i].(int64), index[i+1].(int64)
		for j := range n {
			if len(decoded) < row {
				return dict["Prev"], nil // the reader refuses the file: nothing more to check
			}
			entry := decoded[:row]
			decoded = decoded[row:]
			typ := int64(1)
			if w[0] > 0 {
				typ = field(entry, 0)
			}
			switch typ { // the reader skips an entry of another type, so an older section may set it
			case 0:
				add(start+j, xrefEntry{})
			case 1:
				add(start+j, xrefEntry{typ: 1, offset: field(entry, 1)})
			case 2:
				add(start+j, xrefEntry{typ: 2, stream: field(entry, 1)})
			}
		}
	}
	return dict["Prev"], nil
}

// readStream reads the stream object at the lexer ("n g obj << … >> stream") and returns its
// dictionary and its raw data. A /Length that is a reference is looked up in table (nil: it
// must be direct, as in a cross-reference stream).
func readStream(b []byte, l *lexer, table map[int64]xrefEntry) (map[string]any, []byte, error) {
	k1, _, _ := l.next()
	k2, _, _ := l.next()
	k3, obj, _ := l.next()
	if k1 != tokInt || k2 != tokInt || k3 != tokKeyword || obj != "obj" {
		return nil, nil, errors.New("missing stream object")
	}
	v, err := l.value(0)
	if err != nil {
		return nil, nil, err
	}
	dict, ok := v.(map[string]any)
	if k, tok, _ := l.next(); !ok || k != tokKeyword || tok != "stream" {
		return nil, nil, errors.New("missing stream")
	}
	if l.i < len(b) && b[l.i] == '\r' {
		l.i++
	}
	if l.i < len(b) && b[l.i] == '\n' {
		l.i++
	}
	length, ok := dict["Length"].(int64)
	if ref, isRef := dict["Length"].(pdfRef); isRef && table != nil {
		if e, found := table[int64(ref)]; found && e.typ == 1 && e.offset > 0 && e.offset < int64(len(b)) {
			ll := lexer{b: b, i: int(e.offset)}
			ll.next()
			ll.next()
			if k, tok, _ := ll.next(); k == tokKeyword && tok == "obj" {
				_, _, length = ll.next()
				ok = true
			}
		}
	}
	if !ok || length < 0 || length > int64(len(b)-l.i) {
		return nil, nil, structureError("stream /Length")
	}
	return dict, b[l.i : l.i+int(length)], nil
}

// decodeStream decodes a stream's data as the reader does, refusing more than limit bytes: no
// filter, or FlateDecode with the PNG Up predictor or none.
func decodeStream(dict map[string]any, data []byte, limit int) ([]byte, error) {
	filter := dict["Filter"]
	if f, ok := filter.([]any); ok && len(f) == 1 {
		filter = f[0]
	}
	var params map[string]any
	switch p := dict["DecodeParms"].(type) {
	case nil:
	case map[string]any:
		params = p
	case []any:
		if len(p) == 1 {
			params, _ = p[0].(map[string]any)
		}
		if params == nil {
			return nil, structureError("stream filter parameters")
		}
	default:
		return nil, structureError("stream filter parameters")
	}
	switch filter {
	case nil:
		if len(data) > limit {
			return nil, structureError("stream size")
		}
		return data, nil
	case pdfName("FlateDecode"):
	default:
		return nil, structureError("stream filter")
	}
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	columns, predictor := int64(0), params["Predictor"]
	switch predictor {
	case nil:
	case int64(12):
		c, ok := params["Columns"].(int64)
		if !ok || c < 1 || c > 1<<10 {
			return nil, structureError("stream predictor")
		}
		columns = c
	default:
		return nil, structureError("stream predictor")
	}
	raw := limit
	if columns > 0 {
		raw = (limit/int(columns) + 1) * (int(columns) + 1)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(raw)+1))
	if len(out) > raw {
		return nil, structureError("stream size")
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("stream: %w", err)
	}
	if columns == 0 {
		return out, nil
	}
	var decoded []byte
	hist := make([]byte, columns)
	for len(out) >= int(columns)+1 {
		if out[0] != 2 {
			return nil, errors.New("stream: malformed PNG Up predictor")
		}
		for i, c := range out[1 : columns+1] {
			hist[i] += c
		}
		decoded = append(decoded, hist...)
		out = out[columns+1:]
	}
	return decoded, nil
}

// findLastLine is the reader's search for a keyword on a line of its own.
func findLastLine(buf []byte, s string) int {
	bs := []byte(s)
	last := len(buf)
	for {
		i := bytes.LastIndex(buf[:last], bs)
		if i <= 0 || i+len(bs) >= len(buf) {
			return -1
		}
		if (buf[i-1] == '\n' || buf[i-1] == '\r') && (buf[i+len(bs)] == '\n' || buf[i+len(bs)] == '\r') {
			return i
		}
		last = i
	}
}

// letterPages walks the page tree within its bounds and checks each page before the reader
// interprets it. size is the file's.
func letterPages(r *pdf.Reader, size int) ([]pdf.Page, error) {
	var (
		pages   []pdf.Page
		visited int
		budget  = pageBudget{content: min(minContentBudget+contentPerByte*size, maxContentBytes), fonts: maxFonts}
	)
	var walk func(node pdf.Value, depth int) error
	walk = func(node pdf.Value, depth int) error {
		if visited++; visited > maxPageTreeNodes || depth > maxPageTreeDepth {
			return structureError("page tree")
		}
		switch node.Key("Type").Name() {
		case "Pages":
			kids := node.Key("Kids")
			for i := 0; i < kids.Len(); i++ {
				if err := walk(kids.Index(i), depth+1); err != nil {
					return err
				}
			}
		case "Page":
			if len(pages) == maxPages {
				return structureError("pages")
			}
			if err := checkPage(node, &budget); err != nil {
				return err
			}
			pages = append(pages, pdf.Page{V: node})
		}
		return nil
	}
	if err := walk(r.Trailer().Key("Root").Key("Pages"), 0); err != nil {
		return nil, err
	}
	return pages, nil
}

// pageBudget is what is left of the bounds of the pages' content and fonts.
type pageBudget struct{ content, fonts int }

// checkPage checks what the reader's text extraction reads of a page: its /Parent chain (which
// resource inheritance follows to its end), its content streams and its fonts' character maps
// (their filters, decoded size, counted against budget, and syntax). A font with an encoding
// dictionary is refused: the reader searches its /Differences, reference by reference, for
// every character shown. The letters' standard fonts have none.
func checkPage(page pdf.Value, budget *pageBudget) error {
	v := page
	for range maxParentChain {
		if v = v.Key("Parent"); v.IsNull() {
			break
		}
	}
	if !v.IsNull() {
		return structureError("/Parent chain")
	}
	// The reader interprets a page's content streams as one: so are they checked.
	var content []byte
	switch c := page.Key("Contents"); c.Kind() {
	case pdf.Stream:
		data, err := decodeContent(c, &budget.content)
		if err != nil {
			return err
		}
		content = data
	case pdf.Array:
		if c.Len() > maxContentStreams {
			return structureError("content streams")
		}
		for i := 0; i < c.Len(); i++ {
			data, err := decodeContent(c.Index(i), &budget.content)
			if err != nil {
				return err
			}
			content = append(content, data...)
		}
	}
	if err := checkSyntax(content, false); err != nil {
		return err
	}
	fonts := pdf.Page{V: page}.Resources().Key("Font")
	names := fonts.Keys()
	if budget.fonts -= len(names); budget.fonts < 0 {
		return structureError("fonts")
	}
	for _, name := range names {
		f := fonts.Key(name)
		enc := f.Key("Encoding")
		if enc.Kind() == pdf.Dict {
			return structureError("font encoding dictionary")
		}
		// The reader reads a character map for these encodings only.
		if enc.IsNull() || enc.Kind() == pdf.Name && enc.Name() == "Identity-H" {
			cmap, err := decodeContent(f.Key("ToUnicode"), &budget.content)
			if err != nil {
				return err
			}
			if err := checkSyntax(cmap, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeContent decodes a content stream or a character map within what is left of the
// budget. Its filters must be ones the reader knows, with no parameters (predictors are for
// images).
func decodeContent(s pdf.Value, budget *int) ([]byte, error) {
	if s.Kind() != pdf.Stream {
		return nil, nil // the reader reads nothing from it
	}
	filter := s.Key("Filter")
	var filters []string
	switch filter.Kind() {
	case pdf.Null:
	case pdf.Name:
		filters = []string{filter.Name()}
	case pdf.Array:
		if filter.Len() > 2 {
			return nil, structureError("stream filters")
		}
		for i := 0; i < filter.Len(); i++ {
			filters = append(filters, filter.Index(i).Name())
		}
	default:
		return nil, structureError("stream filters")
	}
	for _, f := range filters {
		if f != "FlateDecode" && f != "ASCII85Decode" {
			return nil, structureError("stream filter")
		}
	}
	if !s.Key("DecodeParms").IsNull() {
		return nil, structureError("stream filter parameters")
	}
	rc := s.Reader()
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, int64(*budget)+1)) // a read error is the reader's to report
	if len(data) > *budget {
		return nil, structureError("size of page content")
	}
	*budget -= len(data)
	return data, nil
}

// checkSyntax checks decoded page content or, when cmap is set, a character map, as the reader
// will interpret it: every hexadecimal string closed (at the end of the data the reader waits
// for its ">" forever), arrays and dictionaries nested at most maxNesting deep, and at most
// maxContentBegins dictionaries begun. In a character map every block of entries must be
// preceded by its count, at most 100 as the format says, and there may be at most
// maxCMapBlocks of them: the reader allocates what the count says, and searches every entry
// for every character shown.
func checkSyntax(data []byte, cmap bool) error {
	var (
		depth, begins, blocks, ends int
		prevKind                    int
		prevN                       int64
	)
	for l := (lexer{b: data}); ; {
		kind, tok, n := l.next()
		switch kind {
		case tokEOF:
			return nil
		case tokUnterminated:
			return structureError("unterminated hexadecimal string")
		case tokOpen:
			if depth++; depth > maxNesting {
				return structureError("nesting of page content")
			}
		case tokClose:
			depth = max(depth-1, 0)
		case tokKeyword:
			switch tok {
			case "begin":
				if begins++; begins > maxContentBegins {
					return structureError("dictionaries of page content")
				}
			case "begincodespacerange", "beginbfchar", "beginbfrange":
				if blocks++; cmap && (blocks > maxCMapBlocks || prevKind != tokInt || prevN < 0 || prevN > 100) {
					return structureError("character map")
				}
			case "endcodespacerange", "endbfchar", "endbfrange":
				if ends++; cmap && ends > blocks {
					return structureError("character map")
				}
			}
		}
		prevKind, prevN = kind, n
	}
}

// Token kinds of lexer.
const (
	tokEOF     = iota
	tokInt     // an integer, in n
	tokName    // a name, without its slash and with #xx decoded
	tokKeyword // any other regular token: an operator, a real, true, R, obj …
	tokOpen    // "[", "<<" or "{"
	tokClose   // "]", ">>" or "}"
	tokString  // a literal or hexadecimal string, skipped
	// tokUnterminated is a hexadecimal string without its ">", at the end of the data.
	tokUnterminated
)

// lexer splits PDF syntax into tokens as the reader does, for the checks above.
type lexer struct {
	b []byte
	i int
}

func isPDFSpace(c byte) bool {
	return c == 0 || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == ' '
}

func isPDFDelim(c byte) bool { return strings.IndexByte("<>()[]{}/%", c) >= 0 }

func (l *lexer) next() (kind int, tok string, n int64) {
	for l.i < len(l.b) {
		if c := l.b[l.i]; isPDFSpace(c) {
			l.i++
		} else if c == '%' {
			for l.i < len(l.b) && l.b[l.i] != '\r' && l.b[l.i] != '\n' {
				l.i++
			}
		} else {
			break
		}
	}
	if l.i >= len(l.b) {
		return tokEOF, "", 0
	}
	c := l.b[l.i]
	l.i++
	switch c {
	case '[', '{':
		return tokOpen, string(c), 0
	case ']', '}':
		return tokClose, string(c), 0
	case '<':
		if l.i < len(l.b) && l.b[l.i] == '<' {
			l.i++
			return tokOpen, "<<", 0
		}
		for l.i < len(l.b) && l.b[l.i] != '>' {
			l.i++
		}
		if l.i++; l.i > len(l.b) {
			return tokUnterminated, "", 0
		}
		return tokString, "", 0
	case '>':
		if l.i < len(l.b) && l.b[l.i] == '>' {
			l.i++
			return tokClose, ">>", 0
		}
		return tokKeyword, ">", 0
	case '(':
		for depth := 1; depth > 0 && l.i < len(l.b); l.i++ {
			switch l.b[l.i] {
			case '\\':
				l.i++
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		return tokString, "", 0
	case '/':
		var name []byte
		for l.i < len(l.b) && !isPDFDelim(l.b[l.i]) && !isPDFSpace(l.b[l.i]) {
			if l.b[l.i] == '#' && l.i+2 < len(l.b) {
				if x, err := strconv.ParseUint(string(l.b[l.i+1:l.i+3]), 16, 8); err == nil {
					name = append(name, byte(x))
					l.i += 3
					continue
				}
			}
			name = append(name, l.b[l.i])
			l.i++
		}
		return tokName, string(name), 0
	}
	start := l.i - 1
	for l.i < len(l.b) && !isPDFDelim(l.b[l.i]) && !isPDFSpace(l.b[l.i]) {
		l.i++
	}
	tok = string(l.b[start:l.i])
	if n, err := strconv.ParseInt(tok, 10, 64); err == nil {
		return tokInt, tok, n
	}
	return tokKeyword, tok, 0
}

// Values of lexer.value besides int64, map[string]any (a dictionary) and []any (an array).
type (
	pdfName    string // a name
	pdfRef     int64  // a reference "n g R", to object n
	pdfKeyword string // true, false, null, a real …
	pdfString  struct{}
)

// value reads one object.
func (l *lexer) value(depth int) (any, error) {
	if depth > maxNesting {
		return nil, structureError("nesting")
	}
	kind, tok, n := l.next()
	switch kind {
	case tokInt:
		mark := l.i
		k2, _, _ := l.next()
		k3, r, _ := l.next()
		if k2 == tokInt && k3 == tokKeyword && r == "R" {
			return pdfRef(n), nil
		}
		l.i = mark
		return n, nil
	case tokName:
		return pdfName(tok), nil
	case tokString:
		return pdfString{}, nil
	case tokKeyword:
		return pdfKeyword(tok), nil
	case tokOpen:
		switch tok {
		case "[":
			var a []any
			for {
				mark := l.i
				if k, t, _ := l.next(); k == tokClose && t == "]" {
					return a, nil
				} else if k == tokEOF {
					return nil, errors.New("unterminated array")
				}
				l.i = mark
				v, err := l.value(depth + 1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
		case "<<":
			d := map[string]any{}
			for {
				k, key, _ := l.next()
				switch {
				case k == tokClose && key == ">>":
					return d, nil
				case k != tokName:
					return nil, errors.New("malformed dictionary")
				}
				v, err := l.value(depth + 1)
				if err != nil {
					return nil, err
				}
				d[key] = v
			}
		}
	}
	return nil, errors.New("malformed object")
}
