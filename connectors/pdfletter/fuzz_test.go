package pdfletter_test

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/charmap"

	"github.com/samla/samla/connectors/pdfletter"
)

// Bounds of FuzzParse. A PDF of at most fuzzMaxInput bytes may make Parse allocate at most
// fuzzMaxAlloc bytes (the reader keeps the file's objects and text: a few times the input,
// never the gigabytes a decompression bomb or a forged object count asks for) and take at most
// fuzzMaxDuration (a letter takes milliseconds; a forged page tree must not loop).
const (
	fuzzMaxInput    = 1 << 20
	fuzzMaxAlloc    = 64 << 20
	fuzzMaxDuration = 10 * time.Second
)

// FuzzParse feeds arbitrary bytes to Parse, as an uploaded document is: it never panics, never
// hangs, allocates a bounded amount, answers only ErrUnsupported (ErrNotPDF among them) or a
// *FieldError (ErrParseFailed), and a letter it reads back prints and reads back again the same.
func FuzzParse(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > fuzzMaxInput {
			return
		}
		var (
			l   pdfletter.Letter
			err error
		)
		done := make(chan uint64, 1)
		go func() {
			done <- allocated(func() { l, err = pdfletter.Parse(b) })
		}()
		select {
		case n := <-done:
			if n > fuzzMaxAlloc {
				t.Fatalf("Parse of %d bytes allocated %d MiB, more than %d MiB", len(b), n>>20, fuzzMaxAlloc>>20)
			}
		case <-time.After(fuzzMaxDuration):
			t.Fatalf("Parse of %d bytes took more than %s", len(b), fuzzMaxDuration)
		}
		var fe *pdfletter.FieldError
		switch {
		case err == nil:
		case errors.As(err, &fe):
			if !errors.Is(err, pdfletter.ErrParseFailed) || errors.Is(err, pdfletter.ErrUnsupported) {
				t.Fatalf("field error %v is not only ErrParseFailed", err)
			}
			return
		case errors.Is(err, pdfletter.ErrUnsupported):
			if errors.Is(err, pdfletter.ErrParseFailed) {
				t.Fatalf("error %v is both unsupported and a parse failure", err)
			}
			return
		default:
			t.Fatalf("Parse error %v is neither ErrUnsupported nor ErrParseFailed", err)
		}
		var out bytes.Buffer
		if werr := pdfletter.Write(&out, l); werr != nil {
			if !errors.Is(werr, pdfletter.ErrInvalidLetter) {
				t.Fatalf("Write of a parsed letter: %v", werr)
			}
			return // read, but not printable by Write (a character outside Windows-1252, say)
		}
		again, err := pdfletter.Parse(out.Bytes())
		if err != nil || again != l {
			t.Fatalf("parsed %+v, printed and read back as %+v, %v", l, again, err)
		}
	})
}

// allocated is what f allocates on the heap, with what other goroutines allocate meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// fuzzSeeds are letters as Write prints them, the same text in a hand-made uncompressed PDF
// (whose text operators the fuzzer can reach), and hostile files.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	var b bytes.Buffer
	if err := pdfletter.Write(&b, letter()); err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds, bytes.Clone(b.Bytes()))
	b.Reset()
	if err := pdfletter.WriteBroken(&b, letter(), pdfletter.FieldPremium); err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds, bytes.Clone(b.Bytes()))
	seeds = append(seeds, plainPDF(letterLines(letter())), plainPDF([]string{"Kvitto", "Betalning mottagen: 289,00 SEK"}))
	return append(seeds, hostilePDFs()...)
}

// letterLines is the text layer of a letter, as Write prints it.
func letterLines(l pdfletter.Letter) []string {
	return []string{l.Company, "Försäkringsbrev", "Försäkringsgivare: " + l.Company, "Försäkringstyp: Hemförsäkring",
		"Försäkringsnummer: " + l.InsuranceNumber, "Försäkringstagare: " + l.Holder, "Premie: 1 234,50 SEK per månad",
		"Förnyelsedatum: " + l.RenewalDate, "Blankett SFB-1"}
}

// pdfObjects writes a PDF of the given objects (numbered from 1) with a classic cross-reference
// table and trailer; the trailer gets /Size and /Root 1 0 R unless trailer overrides it.
func pdfObjects(objects []string, trailer string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	if trailer == "" {
		trailer = fmt.Sprintf("<< /Size %d /Root 1 0 R >>", len(objects)+1)
	}
	fmt.Fprintf(&b, "trailer\n%s\nstartxref\n%d\n%%%%EOF\n", trailer, xref)
	return b.Bytes()
}

// page are the objects of a one-page document whose page content is object 5.
func page(content string) []string {
	return []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		content,
	}
}

func streamObject(dict string, data []byte) string {
	return fmt.Sprintf("<< /Length %d %s >>\nstream\n%s\nendstream", len(data), dict, data)
}

// plainPDF prints lines as one uncompressed page, one text run per line, in Windows-1252.
func plainPDF(lines []string) []byte {
	var c strings.Builder
	y := 800
	for _, l := range lines {
		s, err := charmap.Windows1252.NewEncoder().String(l)
		if err != nil {
			panic(err)
		}
		s = strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(s)
		fmt.Fprintf(&c, "BT /F1 11 Tf 57 %d Td (%s) Tj ET\n", y, s)
		y -= 20
	}
	return pdfObjects(page(streamObject("", []byte(c.String()))), "")
}

func deflate(data []byte, times int) []byte {
	for range times {
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write(data)
		w.Close()
		data = b.Bytes()
	}
	return data
}

// hostilePDFs are small files that ask a naive reader for far more than they hold.
func hostilePDFs() [][]byte {
	run := bytes.Repeat([]byte("BT /F1 11 Tf (a) Tj ET\n"), 1<<16) // 1.5 MB of text operators
	return [][]byte{
		// A page tree that claims two billion pages.
		pdfObjects([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 2000000000 >>",
			"<< /Type /Page /Parent 2 0 R >>"}, ""),
		// A page tree whose node is its own kid.
		pdfObjects([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 5 >>"}, ""),
		// A cross-reference table that claims a billion objects.
		pdfObjects(page(streamObject("", []byte("BT ET"))), "<< /Size 1000000000 /Root 1 0 R >>"),
		// A content stream deflated three times over: a few KiB that inflate to 1.5 MB and, at
		// each further level, to a thousand times more.
		pdfObjects(page(streamObject("/Filter [/FlateDecode /FlateDecode /FlateDecode]", deflate(run, 3))), ""),
		// A PNG predictor with a row of two billion columns.
		pdfObjects(page(streamObject("/Filter /FlateDecode /DecodeParms << /Predictor 12 /Columns 2000000000 >>",
			deflate([]byte("x"), 1))), ""),
		// Deeply nested arrays in the content stream.
		pdfObjects(page(streamObject("", append(bytes.Repeat([]byte("["), 20000), " Tj"...))), ""),
		// An object that refers to itself as its own length.
		pdfObjects(page("<< /Length 5 0 R >>\nstream\nBT ET\nendstream"), ""),
		// A cross-reference table whose section is its own predecessor.
		[]byte("%PDF-1.4\nxref\n0 1\n0000000000 65535 f \ntrailer\n<< /Size 1 /Prev 9 /Root 1 0 R >>" + strings.Repeat(" ", 100) +
			"\nstartxref\n9\n%%EOF\n"),
		// A cross-reference table whose subsection starts at object two billion.
		[]byte(strings.Replace(string(pdfObjects(page(streamObject("", []byte("BT ET"))), "")), "xref\n0 6", "xref\n2000000000 6", 1)),
		// A cross-reference stream that claims a billion objects.
		xrefStreamPDF(page(streamObject("", []byte("BT ET"))), nil, "/Size 1000000000"),
		// Two object streams, each inside the other.
		xrefStreamPDF([]string{"<< /Type /Catalog /Pages 2 0 R >>"}, map[int][2]int{2: {2, 3}, 3: {2, 2}}, ""),
		// An object stream that claims two billion objects and extends itself.
		xrefStreamPDF([]string{"<< /Type /Catalog /Pages 3 0 R >>", streamObject("/Type /ObjStm /N 2000000000 /First 4 /Extends 2 0 R", []byte("3 0 <<>>"))},
			map[int][2]int{3: {2, 2}}, ""),
		// A font whose character map claims two billion entries.
		pdfObjects([]string{
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
			"<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /ToUnicode 6 0 R >>",
			streamObject("", []byte("BT /F1 11 Tf <0001> Tj ET")),
			streamObject("", []byte("2000000000 beginbfchar endbfchar")),
		}, ""),
		// A page whose parent is itself.
		pdfObjects([]string{"<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 3 0 R /Contents 4 0 R >>", streamObject("", []byte("BT ET"))}, ""),
		// Page content that ends in the middle of a hexadecimal string.
		pdfObjects(page(streamObject("", []byte("BT /F1 11 Tf <0001> Tj ET <"))), ""),
		// An object stream that ends in the middle of a hexadecimal string.
		xrefStreamPDF([]string{"<< /Type /Catalog /Pages 3 0 R >>", streamObject("/Type /ObjStm /N 1 /First 4", []byte("3 0 <"))},
			map[int][2]int{3: {2, 0}}, ""),
		// Page content that opens two thousand dictionaries.
		pdfObjects(page(streamObject("", bytes.Repeat([]byte("0 dict begin "), 2000))), ""),
	}
}

// xrefStreamPDF writes objects (numbered from 1) with a cross-reference stream, which is object
// len(objects)+1; inStream places objects in object streams instead (object: {stream, index}).
func xrefStreamPDF(objects []string, inStream map[int][2]int, dict string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	n := len(objects) + 2
	var data []byte
	for obj := range n {
		switch at, ok := inStream[obj]; {
		case obj == 0:
			data = append(data, 0, 0, 0, 0, 0, 0xff, 0xff)
		case ok:
			data = append(data, 2, 0, 0, byte(at[0]>>8), byte(at[0]), 0, byte(at[1]))
		case obj <= len(objects):
			off := offsets[obj-1]
			data = append(data, 1, byte(off>>24), byte(off>>16), byte(off>>8), byte(off), 0, 0)
		default:
			off := b.Len()
			data = append(data, 1, byte(off>>24), byte(off>>16), byte(off>>8), byte(off), 0, 0)
		}
	}
	if dict == "" {
		dict = fmt.Sprintf("/Size %d", n)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", n-1, streamObject("/Type /XRef /W [1 4 2] /Root 1 0 R "+dict, data))
	fmt.Fprintf(&b, "startxref\n%d\n%%%%EOF\n", xref)
	return b.Bytes()
}
