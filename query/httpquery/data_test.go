package httpquery_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/httpquery"
)

// The data tests keep their fixtures apart from the status tests' (names prefixed with data), so
// that either file can change without the other; the read-model fakes are in fakes_test.go.
const (
	dataAcmeKey   = "data-acme-key-0123456789abcdef0123456789abcdef"
	dataGlobexKey = "data-globex-key-0123456789abcdef0123456789ab"

	insID      = "0196a1b2-c3d4-7e5f-8a9b-000000000001"
	wealthID   = "0196a1b2-c3d4-7e5f-8a9b-000000000002"
	frID       = "0196a1b2-c3d4-7e5f-8a9b-000000000003"
	frNoDocID  = "0196a1b2-c3d4-7e5f-8a9b-000000000004"
	runningID  = "0196a1b2-c3d4-7e5f-8a9b-000000000005"
	lagID      = "0196a1b2-c3d4-7e5f-8a9b-000000000006"
	noDataID   = "0196a1b2-c3d4-7e5f-8a9b-000000000007"
	emptyID    = "0196a1b2-c3d4-7e5f-8a9b-000000000008"
	frRunID    = "0196a1b2-c3d4-7e5f-8a9b-000000000009"
	unknownID  = "0196a1b2-c3d4-7e5f-8a9b-00000000000f"
	statementB = "%PDF-1.7 relevé de carrière\x00\xff"
)

// fakeData is a tenant-scoped data read model that counts its reads.
type fakeData struct {
	views  map[string]query.DataView
	docs   map[string]query.DocumentView // by collection id
	err    error
	docErr error
	reads  int
}

func (f *fakeData) GetData(_ context.Context, tenant, id string) (query.DataView, error) {
	f.reads++
	if f.err != nil {
		return query.DataView{}, f.err
	}
	v, ok := f.views[id]
	if !ok || v.Tenant != tenant {
		return query.DataView{}, query.ErrNotFound
	}
	return v, nil
}

func (f *fakeData) GetDocument(_ context.Context, tenant, id, kind string) (query.DocumentView, error) {
	f.reads++
	if f.docErr != nil {
		return query.DocumentView{}, f.docErr
	}
	d, ok := f.docs[id]
	if v := f.views[id]; !ok || v.Tenant != tenant || d.Kind != kind {
		return query.DocumentView{}, query.ErrNotFound
	}
	return d, nil
}

func dStr(s string) *string { return &s }

type dataEnv struct {
	engine *gin.Engine
	status *fakeStatus
	data   *fakeData
}

func newDataEnv(t *testing.T) *dataEnv {
	t.Helper()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	status := func(id, company, product, st string) query.StatusView {
		return query.StatusView{CollectionID: id, Tenant: "acme", Company: company, Product: product,
			LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE", Status: st, UpdatedAt: at}
	}
	data := func(id, company, product, st string) query.DataView {
		return query.DataView{CollectionID: id, Tenant: "acme", Company: company, Product: product, Status: st}
	}
	e := &dataEnv{
		status: &fakeStatus{rows: map[string]query.StatusView{
			insID:     status(insID, "se-demo-insurer", "INSURANCE", "COMPLETED"),
			wealthID:  status(wealthID, "se-demo-bank", "WEALTH", "COMPLETED_PARTIAL"),
			frID:      status(frID, "fr-demo-pension-info", "WEALTH", "COMPLETED"),
			frNoDocID: status(frNoDocID, "fr-demo-pension-info", "WEALTH", "FAILED"),
			runningID: status(runningID, "se-demo-insurer", "INSURANCE", "COLLECTING"),
			lagID:     status(lagID, "se-demo-insurer", "INSURANCE", "COMPLETED"),
			noDataID:  status(noDataID, "se-demo-pension", "WEALTH", "COMPLETED"),
			emptyID:   status(emptyID, "se-demo-pension", "WEALTH", "COMPLETED_EMPTY"),
			frRunID:   status(frRunID, "fr-demo-pension-info", "WEALTH", "LOGIN"),
		}},
		data: &fakeData{views: map[string]query.DataView{
			insID:     data(insID, "se-demo-insurer", "INSURANCE", "COMPLETED"),
			wealthID:  data(wealthID, "se-demo-bank", "WEALTH", "COMPLETED_PARTIAL"),
			frID:      data(frID, "fr-demo-pension-info", "WEALTH", "COMPLETED"),
			frNoDocID: data(frNoDocID, "fr-demo-pension-info", "WEALTH", "FAILED"),
			runningID: data(runningID, "se-demo-insurer", "INSURANCE", "COLLECTING"),
			lagID:     data(lagID, "se-demo-insurer", "INSURANCE", "COLLECTING"), // behind the status
			emptyID:   data(emptyID, "se-demo-pension", "WEALTH", "COMPLETED_EMPTY"),
			frRunID:   data(frRunID, "fr-demo-pension-info", "WEALTH", "LOGIN"),
		}, docs: map[string]query.DocumentView{
			frID: {DocumentID: "d1", Kind: collection.DocumentFrenchCareerStatement, ContentType: "application/pdf",
				FileName: "relevé de carrière.pdf", Size: int64(len(statementB)), Content: []byte(statementB)},
			frRunID: {DocumentID: "d2", Kind: collection.DocumentFrenchCareerStatement, Content: []byte("%PDF")},
		}},
	}
	ins := e.data.views[insID]
	ins.Insurances = []query.InsuranceView{{Insurance: collection.Insurance{ID: "i1", InsuranceType: "HOME",
		Premium: func() *float64 { f := 0.0; return &f }()}, HolderName: dStr("Tolvan Tolvansson")},
		{Insurance: collection.Insurance{ID: "i2", InsuranceType: "CAR"}}}
	e.data.views[insID] = ins
	w := e.data.views[wealthID]
	w.Pensions = []query.PensionView{{Pension: collection.Pension{ID: "P1", OtherInsuredPerson: func() *bool { b := true; return &b }()},
		InsuredPersonName: dStr("Tolvan Tolvansson")}, {Pension: collection.Pension{ID: "P2"}}}
	w.Loans = []collection.Loan{{ID: "L1"}}
	w.CheckingAccounts = []collection.PSD2Account{{ID: "A1", IBAN: dStr("SE45")}}
	w.PersonalInformation = &collection.PersonalInformation{PersonalNumber: dStr("191212121212"), Name: dStr("Tolvan Tolvansson")}
	e.data.views[wealthID] = w

	eng := httpapi.NewEngine(httpapi.Options{
		Keys:      httpapitest.Keys{dataAcmeKey: "acme", dataGlobexKey: "globex"},
		RateLimit: httpapi.RateLimit{Disabled: true},
	})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: e.status, History: &fakeHistory{},
		Companies: companytest.Catalog(), Data: e.data})
	e.engine = eng
	return e
}

func (e *dataEnv) get(t *testing.T, path, key, version string) *httptest.ResponseRecorder {
	return httpapitest.Get(e.engine, path, key, version)
}

func dataOK(t *testing.T, w *httptest.ResponseRecorder, version string) string {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d: %s", w.Code, w.Body)
	}
	if got := w.Header().Get(httpapi.HeaderServiceVersion); got != version {
		t.Fatalf("Service-Version = %q, want %q", got, version)
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Fatal("personal data must not be cached")
	}
	return w.Body.String()
}

func TestInsuranceDataBothVersions(t *testing.T) {
	e := newDataEnv(t)
	want := `{"collectionId":"` + insID + `","company":"se-demo-insurer","insurances":[` +
		`{"id":"i1","insuranceType":"HOME","premium":0,"holderName":"Tolvan Tolvansson"},{"id":"i2","insuranceType":"CAR"}]}`
	for _, v := range []string{"2025-01-01", "2026-04-01"} {
		if got := dataOK(t, e.get(t, "/collections/"+insID+"/insurance/data", dataAcmeKey, v), v); got != want {
			t.Fatalf("%s:\n got  %s\nwant %s", v, got, want)
		}
	}
}

func TestWealthDataPerVersion(t *testing.T) {
	e := newDataEnv(t)
	preview := dataOK(t, e.get(t, "/collections/"+wealthID+"/wealth/data", dataAcmeKey, "2026-04-01"), "2026-04-01")
	want := `{"collectionId":"` + wealthID + `","company":"se-demo-bank",` +
		`"personalInformation":{"personalNumber":"191212121212","name":"Tolvan Tolvansson"},` +
		`"pensions":[{"id":"P1","otherInsuredPerson":true,"insuredPersonName":"Tolvan Tolvansson"},{"id":"P2"}],` +
		`"investments":[],"loans":[{"id":"L1"}],"savings":[],"psd2CheckingAccounts":[{"id":"A1","iban":"SE45"}],` +
		`"psd2SavingsAccounts":[],"psd2CreditCards":[]}`
	if preview != want {
		t.Fatalf("2026-04-01:\n got  %s\nwant %s", preview, want)
	}
	// No header: the lowest running version, 2025-01-01.
	stable := dataOK(t, e.get(t, "/collections/"+wealthID+"/wealth/data", dataAcmeKey, ""), "2025-01-01")
	want = `{"collectionId":"` + wealthID + `","company":"se-demo-bank",` +
		`"personalInformation":{"NAME":"Tolvan Tolvansson","PERSONAL_NUMBER":"191212121212"},` +
		`"pensions":[{"id":"P1","otherInsuredPerson":true,"insuredPersonName":"Tolvan Tolvansson"},{"id":"P2"}],` +
		`"investments":[]}`
	if stable != want {
		t.Fatalf("2025-01-01:\n got  %s\nwant %s", stable, want)
	}
	// Nothing collected: every list present and empty, personal information null / {}.
	empty := dataOK(t, e.get(t, "/collections/"+emptyID+"/wealth/data", dataAcmeKey, "2026-04-01"), "2026-04-01")
	want = `{"collectionId":"` + emptyID + `","company":"se-demo-pension","personalInformation":null,"pensions":[],` +
		`"investments":[],"loans":[],"savings":[],"psd2CheckingAccounts":[],"psd2SavingsAccounts":[],"psd2CreditCards":[]}`
	if empty != want {
		t.Fatalf("empty 2026-04-01:\n got  %s\nwant %s", empty, want)
	}
	empty = dataOK(t, e.get(t, "/collections/"+emptyID+"/wealth/data", dataAcmeKey, "2025-01-01"), "2025-01-01")
	want = `{"collectionId":"` + emptyID + `","company":"se-demo-pension","personalInformation":{},"pensions":[],"investments":[]}`
	if empty != want {
		t.Fatalf("empty 2025-01-01:\n got  %s\nwant %s", empty, want)
	}
}

func TestDataNotFound(t *testing.T) {
	e := newDataEnv(t)
	tests := map[string]struct {
		path, key, code string
	}{
		"another client's insurance":  {"/collections/" + insID + "/insurance/data", dataGlobexKey, httpquery.CodeCollectionNotFound},
		"another client's wealth":     {"/collections/" + wealthID + "/wealth/data", dataGlobexKey, httpquery.CodeCollectionNotFound},
		"another client's statement":  {"/collections/" + frID + "/wealth/career-statement", dataGlobexKey, httpquery.CodeCollectionNotFound},
		"unknown":                     {"/collections/" + unknownID + "/wealth/data", dataAcmeKey, httpquery.CodeCollectionNotFound},
		"not a uuid":                  {"/collections/not-a-uuid/insurance/data", dataAcmeKey, httpquery.CodeCollectionNotFound},
		"uppercase id of another's":   {"/collections/" + strings.ToUpper(wealthID) + "/wealth/data", dataGlobexKey, httpquery.CodeCollectionNotFound},
		"insurance data of wealth":    {"/collections/" + wealthID + "/insurance/data", dataAcmeKey, httpquery.CodeProductMismatch},
		"wealth data of insurance":    {"/collections/" + insID + "/wealth/data", dataAcmeKey, httpquery.CodeProductMismatch},
		"statement of insurance":      {"/collections/" + insID + "/wealth/career-statement", dataAcmeKey, httpquery.CodeProductMismatch},
		"mismatch of running":         {"/collections/" + runningID + "/wealth/data", dataAcmeKey, httpquery.CodeProductMismatch},
		"statement of a Swedish bank": {"/collections/" + wealthID + "/wealth/career-statement", dataAcmeKey, httpquery.CodeDocumentNotFound},
		"statement that is missing":   {"/collections/" + frNoDocID + "/wealth/career-statement", dataAcmeKey, httpquery.CodeDocumentNotFound},
		"legacy of another client":    {"/data?collectionId=" + insID, dataGlobexKey, httpquery.CodeCollectionNotFound},
		"legacy not a uuid":           {"/data?collectionId=x", dataAcmeKey, httpquery.CodeCollectionNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, v := range []string{"2025-01-01", "2026-04-01"} {
				if strings.HasPrefix(tc.path, "/data") && v == "2026-04-01" {
					continue // see TestLegacyData
				}
				if code := problemCode(t, e.get(t, tc.path, tc.key, v), http.StatusNotFound); code != tc.code {
					t.Fatalf("%s: code = %s, want %s", v, code, tc.code)
				}
			}
		})
	}
	// The mismatch names where the data is.
	w := e.get(t, "/collections/"+wealthID+"/insurance/data", dataAcmeKey, "")
	if !strings.Contains(w.Body.String(), "/collections/"+wealthID+"/wealth/data") {
		t.Fatalf("mismatch detail = %s", w.Body)
	}
}

func TestDataNotFinished(t *testing.T) {
	e := newDataEnv(t)
	for name, path := range map[string]string{
		"insurance": "/collections/" + runningID + "/insurance/data",
		"statement": "/collections/" + frRunID + "/wealth/career-statement",
		"legacy":    "/data?collectionId=" + runningID,
	} {
		t.Run(name, func(t *testing.T) {
			e.data.reads = 0
			w := e.get(t, path, dataAcmeKey, "2025-01-01")
			if code := problemCode(t, w, http.StatusConflict); code != httpquery.CodeCollectionNotFinished {
				t.Fatalf("code = %s", code)
			}
			if e.data.reads != 0 {
				t.Fatal("data was read for a collection that has not finished")
			}
		})
	}
	// Final by the status read model, but the data read model has not caught up (behind, or
	// no row yet): 409 with a short Retry-After, never incomplete data.
	for name, path := range map[string]string{
		"data behind": "/collections/" + lagID + "/insurance/data",
		"no data row": "/collections/" + noDataID + "/wealth/data",
	} {
		t.Run(name, func(t *testing.T) {
			w := e.get(t, path, dataAcmeKey, "2026-04-01")
			if code := problemCode(t, w, http.StatusConflict); code != httpquery.CodeCollectionNotFinished {
				t.Fatalf("code = %s", code)
			}
			if w.Header().Get("Retry-After") != "1" {
				t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
			}
		})
	}
}

func TestCareerStatement(t *testing.T) {
	e := newDataEnv(t)
	for _, v := range []string{"2025-01-01", "2026-04-01"} {
		w := e.get(t, "/collections/"+frID+"/wealth/career-statement", dataAcmeKey, v)
		if body := dataOK(t, w, v); body != statementB {
			t.Fatalf("%s: body = %q", v, body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/pdf" {
			t.Fatalf("Content-Type = %q", ct)
		}
		if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename*=utf-8''relev%C3%A9%20de%20carri%C3%A8re.pdf` {
			t.Fatalf("Content-Disposition = %q", cd)
		}
	}
	// A file without a name gets one.
	d := e.data.docs[frID]
	d.FileName = ""
	e.data.docs[frID] = d
	if cd := e.get(t, "/collections/"+frID+"/wealth/career-statement", dataAcmeKey, "").Header().Get("Content-Disposition"); cd != `attachment; filename=career-statement.pdf` {
		t.Fatalf("Content-Disposition = %q", cd)
	}
}

// TestWealthDataNamesTheCareerStatement: the French company's wealth data carries the career
// statement on both versions, with the path that serves it, so a client learns from the data
// that the PDF exists; wealth data without a statement has no such member.
func TestWealthDataNamesTheCareerStatement(t *testing.T) {
	e := newDataEnv(t)
	doc := e.data.docs[frID]
	fr := e.data.views[frID]
	fr.CareerStatement = &query.DocumentInfo{Kind: doc.Kind, ContentType: doc.ContentType, FileName: doc.FileName, Size: doc.Size}
	e.data.views[frID] = fr
	for _, v := range []string{"2025-01-01", "2026-04-01"} {
		var body struct {
			CareerStatement *struct {
				FileName    string `json:"fileName"`
				ContentType string `json:"contentType"`
				SizeBytes   int64  `json:"sizeBytes"`
				Href        string `json:"href"`
			} `json:"careerStatement"`
		}
		if err := json.Unmarshal([]byte(dataOK(t, e.get(t, "/collections/"+frID+"/wealth/data", dataAcmeKey, v), v)), &body); err != nil {
			t.Fatal(err)
		}
		cs := body.CareerStatement
		if cs == nil || cs.FileName != "relevé de carrière.pdf" || cs.ContentType != "application/pdf" ||
			cs.SizeBytes != int64(len(statementB)) || cs.Href != "/collections/"+frID+"/wealth/career-statement" {
			t.Fatalf("%s: careerStatement = %+v", v, cs)
		}
		if got := dataOK(t, e.get(t, cs.Href, dataAcmeKey, v), v); got != statementB {
			t.Fatalf("%s: %s serves %q", v, cs.Href, got)
		}
		if got := dataOK(t, e.get(t, "/collections/"+wealthID+"/wealth/data", dataAcmeKey, v), v); strings.Contains(got, "careerStatement") {
			t.Fatalf("%s: wealth data without a statement: %s", v, got)
		}
	}
}

func TestLegacyData(t *testing.T) {
	e := newDataEnv(t)
	got := dataOK(t, e.get(t, "/data?collectionId="+insID, dataAcmeKey, ""), "2025-01-01")
	want := `{"collectionId":"` + insID + `","company":"se-demo-insurer","product":"INSURANCE","insurances":[` +
		`{"id":"i1","insuranceType":"HOME","premium":0,"holderName":"Tolvan Tolvansson"},{"id":"i2","insuranceType":"CAR"}]}`
	if got != want {
		t.Fatalf("insurance:\n got  %s\nwant %s", got, want)
	}
	got = dataOK(t, e.get(t, "/data?collectionId="+wealthID, dataAcmeKey, "2025-01-01"), "2025-01-01")
	want = `{"collectionId":"` + wealthID + `","company":"se-demo-bank","product":"WEALTH",` +
		`"personalInformation":{"NAME":"Tolvan Tolvansson","PERSONAL_NUMBER":"191212121212"},` +
		`"pensions":[{"id":"P1","otherInsuredPerson":true,"insuredPersonName":"Tolvan Tolvansson"},{"id":"P2"}],` +
		`"investments":[]}`
	if got != want {
		t.Fatalf("wealth:\n got  %s\nwant %s", got, want)
	}
	// The endpoint does not exist on 2026-04-01, whatever the collection.
	for _, path := range []string{"/data?collectionId=" + insID, "/data?collectionId=" + unknownID, "/data"} {
		if code := problemCode(t, e.get(t, path, dataAcmeKey, "2026-04-01"), http.StatusNotFound); code != httpapi.CodeNotFound {
			t.Fatalf("%s on 2026-04-01: code = %s", path, code)
		}
	}
	for _, path := range []string{"/data", "/data?collectionId="} {
		if code := problemCode(t, e.get(t, path, dataAcmeKey, "2025-01-01"), http.StatusBadRequest); code != httpapi.CodeValidationFailed {
			t.Fatalf("%s: code = %s", path, code)
		}
	}
}

func TestDataReaderFaultsAre500(t *testing.T) {
	boom := errors.New("read model down")
	for name, tc := range map[string]struct {
		path    string
		breakIt func(*dataEnv)
	}{
		"status":   {"/collections/" + insID + "/insurance/data", func(e *dataEnv) { e.status.err = boom }},
		"data":     {"/collections/" + wealthID + "/wealth/data", func(e *dataEnv) { e.data.err = boom }},
		"document": {"/collections/" + frID + "/wealth/career-statement", func(e *dataEnv) { e.data.docErr = boom }},
		"legacy":   {"/data?collectionId=" + insID, func(e *dataEnv) { e.data.err = boom }},
	} {
		t.Run(name, func(t *testing.T) {
			e := newDataEnv(t)
			tc.breakIt(e)
			w := e.get(t, tc.path, dataAcmeKey, "")
			if code := problemCode(t, w, http.StatusInternalServerError); code != httpapi.CodeInternal {
				t.Fatalf("code = %s", code)
			}
			if strings.Contains(w.Body.String(), boom.Error()) {
				t.Fatal("the fault leaked into the response")
			}
		})
	}
}

func TestDataRoutesNeedTheReader(t *testing.T) {
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{dataAcmeKey: "acme"}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: &fakeStatus{}, History: &fakeHistory{}, Companies: companytest.Catalog()})
	w := httpapitest.Get(eng, "/collections/"+insID+"/insurance/data", dataAcmeKey, "")
	if w.Code != http.StatusNotFound {
		t.Fatalf("without Deps.Data the data routes answered %d", w.Code)
	}
}
