package httpcmd_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/platform/httpapi"
)

// One request could take the server's memory: 3 million empty parameters (9 MB) answered a
// 182 MB 400 after 10 s. The shape limits stop at the first parameter too many, so the answer
// is one small problem, and nothing is recorded.
func TestHostileParameterArrayIsOneSmallProblem(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := `{"company":"se-demo-insurer","loginMethod":"` + mock + `","parameters":[` +
		strings.TrimSuffix(strings.Repeat("{},", 3_000_000), ",") + `]}`
	w := e.post(t, req{version: "2026-04-01", body: body})
	p := problemOf(t, w, http.StatusBadRequest, httpapi.CodeValidationFailed)
	if len(p.Errors) != 1 || p.Errors[0].Field != "parameters" || w.Body.Len() > 1024 {
		t.Fatalf("answer of %d bytes: %+v", w.Body.Len(), p)
	}
	if streams := e.store.Streams(); len(streams) != 0 {
		t.Fatalf("a refused request recorded %v", streams)
	}
}

func TestEveryArrayOfTheBodiesIsBounded(t *testing.T) {
	e := newEnv(t, nil, nil)
	params := strings.TrimSuffix(strings.Repeat(pnParam("199001010017")+",", httpcmd.MaxParameters+1), ",")
	p := problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", mock, params)}),
		http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "parameters") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	var input strings.Builder
	for i := range 11 {
		if i > 0 {
			input.WriteByte(',')
		}
		input.WriteString(`"K` + strings.Repeat("x", i) + `":"v"`)
	}
	p = problemOf(t, e.post(t, req{body: `{"company":"se-demo-insurer","loginMethod":"` + mock + `","input":{` + input.String() + `}}`}),
		http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "input") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	p = problemOf(t, e.post(t, req{body: `{"company":"se-demo-insurer","loginMethod":"` + mock +
		`","input":{"ACCOUNT_OWNER_NAME":"` + strings.Repeat("a", 1201) + `"}}`}), http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "input.ACCOUNT_OWNER_NAME") {
		t.Fatalf("errors = %+v", p.Errors)
	}
}

// A name that is not text (bytes that are not UTF-8, a lone surrogate, a control character) is
// refused rather than stored as replacement characters.
func TestNamesMustBeText(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, name := range []string{"\xff\xfe", `\ud800`, `Tolvan\u0000Tolvansson`} {
		body := v2Body("se-demo-pension", mock, pnParam("199001010017"), `{"type":"AccountOwnerNameParameter","name":"`+name+`"}`)
		p := problemOf(t, e.post(t, req{version: "2026-04-01", body: body}), http.StatusBadRequest, httpapi.CodeValidationFailed)
		if !hasField(p, "parameters[1].name") {
			t.Errorf("name %q: errors = %+v", name, p.Errors)
		}
	}
	created(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-pension", mock, pnParam("199001010017"),
		`{"type":"AccountOwnerNameParameter","name":"Tølvan Tolvanssön"}`)}))
}

// A repeated member would let a second value hide behind the first one a reader saw.
func TestRepeatedMembersAreRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, tc := range []struct{ version, body, field string }{
		{"2026-04-01", `{"company":"se-demo-insurer","company":"se-demo-pension","loginMethod":"` + mock + `","parameters":[` + pnParam("199001010017") + `]}`, "company"},
		{"2026-04-01", v2Body("se-demo-insurer", mock, `{"type":"SwedishPersonalNumberParameter","personalNumber":"199001010017","personalNumber":"199001010025"}`), "parameters[0].personalNumber"},
		{"2025-01-01", `{"company":"se-demo-insurer","loginMethod":"` + mock + `","input":{"SWEDISH_PERSONAL_NUMBER":"199001010017","swedish_personal_number":"199001010025"}}`, "input.swedish_personal_number"},
	} {
		p := problemOf(t, e.post(t, req{version: tc.version, body: tc.body}), http.StatusBadRequest, httpapi.CodeValidationFailed)
		if !hasField(p, tc.field) {
			t.Errorf("%s: errors = %+v, want %s", tc.body, p.Errors, tc.field)
		}
	}
	if streams := e.store.Streams(); len(streams) != 0 {
		t.Fatalf("refused requests recorded %v", streams)
	}
}

func v1PDFBody(method, pdf string) string {
	input := `"SWEDISH_PERSONAL_NUMBER":"199001010017"`
	if pdf != "" {
		input += `,"PDF_DOCUMENT":"` + pdf + `"`
	}
	return `{"company":"se-demo-insurer","loginMethod":"` + method + `","input":{` + input + `}}`
}

// The spec returns FAILED_PDF_* on the stable version too, so 2025-01-01 takes the document in
// its input map, with the limits and outcomes of PdfDocumentParameter.
func TestPDFUploadOnTheStableVersion(t *testing.T) {
	e := newEnv(t, nil, nil)
	letter := append([]byte("%PDF-1.7\n"), make([]byte, 100)...)
	body := created(t, e.post(t, req{body: v1PDFBody("PDF_UPLOAD", base64.StdEncoding.EncodeToString(letter))}))
	agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if docs := agg.Documents(); len(docs) != 1 || docs[0].Personal == nil || string(docs[0].Personal.Content) != string(letter) {
		t.Fatalf("stored documents = %+v", docs)
	}

	maximal := base64.StdEncoding.EncodeToString(make([]byte, httpcmd.MaxPDFBytes))
	created(t, e.post(t, req{body: v1PDFBody("PDF_UPLOAD", maximal)}))
	tooBig := base64.StdEncoding.EncodeToString(make([]byte, httpcmd.MaxPDFBytes+1))
	for _, tc := range []struct{ name, body, field string }{
		{"no document", v1PDFBody("PDF_UPLOAD", ""), "input.PDF_DOCUMENT"},
		{"not base64", v1PDFBody("PDF_UPLOAD", "%%%"), "input.PDF_DOCUMENT"},
		{"too large", v1PDFBody("PDF_UPLOAD", tooBig), "input.PDF_DOCUMENT"},
		{"a document for another method", v1PDFBody(mock, maximal[:100]), "input.PDF_DOCUMENT"},
	} {
		p := problemOf(t, e.post(t, req{body: tc.body}), http.StatusBadRequest, httpapi.CodeValidationFailed)
		if !hasField(p, tc.field) {
			t.Errorf("%s: errors = %+v, want %s", tc.name, p.Errors, tc.field)
		}
	}
}

// PDF_UPLOAD without a document is a 400 on the preview version as well.
func TestPDFUploadWithoutDocumentIsRefusedOnBothVersions(t *testing.T) {
	e := newEnv(t, nil, nil)
	p := problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", "PDF_UPLOAD", pnParam("199001010017"))}),
		http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "parameters") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	p = problemOf(t, e.post(t, req{body: v1PDFBody("PDF_UPLOAD", "")}), http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "input.PDF_DOCUMENT") {
		t.Fatalf("errors = %+v", p.Errors)
	}
}
