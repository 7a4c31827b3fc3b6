package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/pdfletter"
)

// data reads a data endpoint once the collection is final.
func (c apiClient) data(path, version string) (int, map[string]any, http.Header) {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, raw, h := c.do("GET", path, nil, map[string]string{"Service-Version": version})
		// 409 while the data projection catches up with the final status.
		if code != http.StatusConflict || time.Now().After(deadline) {
			var out map[string]any
			_ = json.Unmarshal(raw, &out)
			return code, out, h
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c apiClient) completed(req collectionRequest) string {
	c.t.Helper()
	id := c.mustStart(req)
	if final := c.waitStatus(id, 20*time.Second, finalStatus); final.Status != "COMPLETED" {
		c.t.Fatalf("%+v ended %+v", req, final)
	}
	return id
}

// TestInsuranceData: the richest persona's insurances, with unknown data points left out.
func TestInsuranceData(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	id := c.completed(collectionRequest{company: "se-demo-insurer", pn: "191212121212"})
	code, out, _ := c.data("/collections/"+id+"/insurance/data", "2026-04-01")
	if code != 200 {
		t.Fatalf("insurance data = %d %v", code, out)
	}
	insurances, _ := out["insurances"].([]any)
	types := map[string]bool{}
	for _, raw := range insurances {
		ins := raw.(map[string]any)
		types[ins["insuranceType"].(string)] = true
		for k, v := range ins {
			if v == "" || v == nil {
				t.Errorf("insurance %v has %s = %#v: unknown must be absent", ins["id"], k, v)
			}
		}
	}
	for _, want := range []string{"HOME", "CAR", "ACCIDENT", "PET"} {
		if !types[want] {
			t.Errorf("no %s insurance in %v", want, types)
		}
	}
	if code, _, _ := c.data("/collections/"+id+"/wealth/data", "2026-04-01"); code != 404 {
		t.Errorf("wealth data of an insurance collection = %d", code)
	}
	// The legacy read of 2025-01-01 serves the same collection.
	if code, out, _ := c.data("/data?collectionId="+id, "2025-01-01"); code != 200 || out["product"] != "INSURANCE" {
		t.Errorf("GET /data = %d %v", code, out)
	}
}

// TestPensionsOtherInsuredPerson is SANDBOX.md's table for 191212121212 at se-demo-pension, with
// and without the account owner's name, on both versions.
func TestPensionsOtherInsuredPerson(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	// P7 (TØLVAN TOLVANSSØN) is the owner once diacritics are ignored, as the spec's rule says.
	with := map[string]any{"P1": false, "P2": false, "P3": false, "P4": true, "P5": true, "P6": true, "P7": false}
	without := map[string]any{"P1": nil, "P2": nil, "P3": nil, "P4": nil, "P5": nil, "P6": true, "P7": nil}
	for _, tc := range []struct {
		version, owner string
		want           map[string]any
	}{
		{"2026-04-01", "Tolvan Tolvansson", with},
		{"2025-01-01", "Tolvan Tolvansson", with},
		{"2026-04-01", "Tølvan Tolvanssön", with}, // the owner's name with diacritics of its own
		{"2026-04-01", "", without},
	} {
		id := c.completed(collectionRequest{version: tc.version, company: "se-demo-pension", pn: "191212121212", ownerName: tc.owner})
		code, out, _ := c.data("/collections/"+id+"/wealth/data", tc.version)
		if code != 200 {
			t.Fatalf("%s wealth data = %d %v", tc.version, code, out)
		}
		got := map[string]any{}
		for _, raw := range out["pensions"].([]any) {
			p := raw.(map[string]any)
			got[p["id"].(string)] = p["otherInsuredPerson"]
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s owner %q: pensions %v, want %d", tc.version, tc.owner, got, len(tc.want))
		}
		for pension, want := range tc.want {
			if got[pension] != want {
				t.Errorf("%s owner %q: %s otherInsuredPerson = %v, want %v", tc.version, tc.owner, pension, got[pension], want)
			}
		}
		switch tc.version {
		case "2026-04-01":
			if _, ok := out["loans"]; !ok {
				t.Errorf("2026-04-01 wealth data lacks loans: %v", keys(out))
			}
		case "2025-01-01":
			if _, ok := out["loans"]; ok {
				t.Errorf("2025-01-01 wealth data has loans")
			}
			if pi, ok := out["personalInformation"].(map[string]any); !ok || pi["PERSONAL_NUMBER"] == nil {
				t.Errorf("2025-01-01 personalInformation is not a key-value map: %v", out["personalInformation"])
			}
		}
	}
}

// TestBankPSD2Data: the demo bank's data on 2026-04-01 of a collection without a consent: loans and
// savings, with a typed personalInformation, and no PSD2 product: checking and savings accounts
// and credit cards are read only under a consent (see the consent end-to-end tests), so they are
// absent (unknown), not empty.
func TestBankPSD2Data(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	id := c.completed(collectionRequest{company: "se-demo-bank", pn: "191212121212"})
	code, out, _ := c.data("/collections/"+id+"/wealth/data", "2026-04-01")
	if code != 200 {
		t.Fatalf("bank data = %d %v", code, out)
	}
	for _, k := range []string{"loans", "savings"} {
		if l, ok := out[k].([]any); !ok || len(l) == 0 {
			t.Errorf("%s missing or empty: %v", k, out[k])
		}
	}
	for _, k := range []string{"psd2CheckingAccounts", "psd2SavingsAccounts", "psd2CreditCards"} {
		if v, present := out[k]; present {
			t.Errorf("%s without a consent: %v, want absent", k, v)
		}
	}
	if pi, ok := out["personalInformation"].(map[string]any); !ok || pi["personalNumber"] != "191212121212" {
		t.Errorf("personalInformation %v", out["personalInformation"])
	}
}

// TestFrenchCareerStatement: the enrollment check on the way, the wealth data naming the career
// statement (both versions), and the PDF at the path the data gives.
func TestFrenchCareerStatement(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	id := c.completed(collectionRequest{company: "fr-demo-pension-info", pn: "191212121212"})
	if path := c.historyPath(id, "COMPLETED"); !slices.Contains(path, "CUSTOMER_ENROLLMENT_CHECK") {
		t.Errorf("path %v lacks CUSTOMER_ENROLLMENT_CHECK", path)
	}
	for _, version := range []string{"2025-01-01", "2026-04-01"} {
		code, out, _ := c.data("/collections/"+id+"/wealth/data", version)
		if code != http.StatusOK {
			t.Fatalf("%s wealth data = %d %v", version, code, out)
		}
		ref, _ := out["careerStatement"].(map[string]any)
		href, _ := ref["href"].(string)
		size, _ := ref["sizeBytes"].(float64)
		if href != "/collections/"+id+"/wealth/career-statement" || ref["contentType"] != "application/pdf" ||
			size <= 0 || ref["fileName"] == "" || ref["fileName"] == nil {
			t.Fatalf("%s careerStatement = %v", version, out["careerStatement"])
		}
		code, body, h := c.do("GET", href, nil, map[string]string{"Service-Version": version})
		if code != http.StatusOK || h.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(body, []byte("%PDF-")) ||
			len(body) != int(size) {
			t.Fatalf("%s career statement = %d %s, %d bytes (data says %v): %q…", version, code, h.Get("Content-Type"),
				len(body), size, body[:min(len(body), 8)])
		}
	}
	// Wealth data without a statement has no such member.
	other := c.completed(collectionRequest{company: "se-demo-pension", pn: "191212121212"})
	if code, out, _ := c.data("/collections/"+other+"/wealth/data", "2026-04-01"); code != http.StatusOK || out["careerStatement"] != nil {
		t.Fatalf("wealth data of a company without statements = %d, careerStatement %v", code, out["careerStatement"])
	}
}

// TestPDFUpload: a letter in the sandbox layout is read; a broken one and a file that is not a
// letter end in the two PDF failures.
func TestPDFUpload(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	letter := func(opts pdfletter.SampleOptions) string {
		var buf bytes.Buffer
		if err := pdfletter.WriteSample(&buf, opts); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	for _, tc := range []struct {
		name, content, final string
	}{
		{"letter", letter(pdfletter.SampleOptions{Holder: "Tolvan Tolvansson"}), "COMPLETED"},
		{"broken letter", letter(pdfletter.SampleOptions{Broken: pdfletter.FieldPremium}), "FAILED_PDF_PARSE"},
		{"not a letter", letter(pdfletter.SampleOptions{NotALetter: true}), "FAILED_PDF_USER_INPUT"},
		{"not a PDF", base64.StdEncoding.EncodeToString([]byte("just some text")), "FAILED_PDF_USER_INPUT"},
	} {
		// The stable version takes the document in its input map and ends in the same statuses.
		for _, version := range []string{"2026-04-01", "2025-01-01"} {
			req := collectionRequest{version: version, company: "se-demo-insurer", loginMethod: "PDF_UPLOAD"}
			if version == "2025-01-01" {
				req.pdfDocument = tc.content
			} else {
				req.extraParams = []map[string]any{{"type": "PdfDocumentParameter", "contentBase64": tc.content, "fileName": "letter.pdf"}}
			}
			id := c.mustStart(req)
			c.waitStatus(id, 15*time.Second, finalStatus)
			if got := c.statusAs(id, version).Status; got != tc.final {
				t.Errorf("%s on %s: %s, want %s", tc.name, version, got, tc.final)
				continue
			}
			if tc.final == "COMPLETED" {
				code, out, _ := c.data("/collections/"+id+"/insurance/data", version)
				if insurances, _ := out["insurances"].([]any); code != 200 || len(insurances) != 1 {
					t.Errorf("data of the letter on %s = %d %v", version, code, out)
				}
			}
		}
	}
}

// TestVersionMappingOfWealthTimeout: stable wealth (2025-01-01) reports WAITING_FOR_AUTHENTICATION
// where 2026-04-01 reports AUTHENTICATION_TIMEOUT.
func TestVersionMappingOfWealthTimeout(t *testing.T) {
	t.Parallel()
	c := personaService(t)
	id := c.mustStart(collectionRequest{company: "se-demo-pension", pn: "199001010108"})
	if final := c.waitStatus(id, 15*time.Second, finalStatus); final.Status != "AUTHENTICATION_TIMEOUT" {
		t.Fatalf("final %+v", final)
	}
	if got := c.statusAs(id, "2025-01-01").Status; got != "WAITING_FOR_AUTHENTICATION" {
		t.Fatalf("2025-01-01 reports %s", got)
	}
}

func keys(m map[string]any) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, ",")
}
