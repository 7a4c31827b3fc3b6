package httpcmd_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/command/eventstore/memstore"
	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/domain/user"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
)

const (
	acmeKey   = "acme-key-0123456789abcdef0123456789abcdef"
	globexKey = "globex-key-0123456789abcdef0123456789abcd"
)

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// fingerprintKey is the test server's secret for idempotency fingerprints.
var fingerprintKey = []byte("test-fingerprint-key-0123456789abcdef")

type env struct {
	engine *gin.Engine
	store  *memstore.Store
	repo   *repository.Repository[*collection.Collection]
}

func newEnv(t *testing.T, mutate func(*httpapi.Options), starter httpcmd.CollectionCommands) *env {
	t.Helper()
	return newEnvWithKey(t, mutate, starter, fingerprintKey)
}

func newEnvWithKey(t *testing.T, mutate func(*httpapi.Options), starter httpcmd.CollectionCommands, key []byte) *env {
	t.Helper()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	repo := repository.New(store, reg, collection.Kind, repository.WithClock(func() time.Time { return testNow }))
	if starter == nil {
		starter = app.NewCollectionService(companytest.Catalog(), repo, repository.New(store, reg, user.Kind), func() time.Time { return testNow })
	}
	opts := httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"}}
	if mutate != nil {
		mutate(&opts)
	}
	e := httpapi.NewEngine(opts)
	httpcmd.RegisterRoutes(e, httpcmd.Deps{Collections: starter, FingerprintKey: key, Now: func() time.Time { return testNow }})
	return &env{engine: e, store: store, repo: repo}
}

type req struct {
	body    string
	version string
	key     string // API key; "-" for none
	idem    string
	ctype   string
}

func (e *env) post(t *testing.T, r req) *httptest.ResponseRecorder {
	t.Helper()
	hr := httptest.NewRequest(http.MethodPost, "/collections", strings.NewReader(r.body))
	switch r.key {
	case "":
		hr.Header.Set(httpapi.HeaderAPIKey, acmeKey)
	case "-":
	default:
		hr.Header.Set(httpapi.HeaderAPIKey, r.key)
	}
	if r.version != "" {
		hr.Header.Set(httpapi.HeaderServiceVersion, r.version)
	}
	if r.idem != "" {
		hr.Header.Set(httpapi.HeaderIdempotencyKey, r.idem)
	}
	ct := r.ctype
	if ct == "" {
		ct = "application/json"
	}
	hr.Header.Set("Content-Type", ct)
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, hr)
	return w
}

func problemOf(t *testing.T, w *httptest.ResponseRecorder, status int, code string) httpapi.Problem {
	t.Helper()
	p := httpapitest.Problem(t, w, status)
	if p.Code != code {
		t.Fatalf("code = %s, want %s: %s", p.Code, code, w.Body)
	}
	return p
}

func hasField(p httpapi.Problem, field string) bool {
	for _, e := range p.Errors {
		if e.Field == field {
			return true
		}
	}
	return false
}

func v2Body(company, method string, params ...string) string {
	return `{"company":"` + company + `","loginMethod":"` + method + `","parameters":[` + strings.Join(params, ",") + `]}`
}

func pnParam(pn string) string {
	return `{"type":"SwedishPersonalNumberParameter","personalNumber":"` + pn + `"}`
}

const mock = "SWEDISH_MOBILE_EID_OTHER_DEVICE_MOCK"

func created(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if w.Code != http.StatusCreated {
		t.Fatalf("status = %d: %s", w.Code, w.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	return body
}

func TestCreateCollectionV2(t *testing.T) {
	e := newEnv(t, nil, nil)
	w := e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", mock, pnParam("199001010017"),
		`{"type":"AccountOwnerNameParameter","name":"Tolvan Tolvansson"}`)})
	body := created(t, w)
	if len(body) != 5 || body["company"] != "se-demo-insurer" || body["loginMethod"] != mock || body["status"] != "RUNNING" ||
		body["createdAt"] != "2026-05-01T12:00:00.000Z" || body["collectionId"] == "" {
		t.Fatalf("body = %v", body)
	}
	if w.Header().Get(httpapi.HeaderServiceVersion) != "2026-04-01" {
		t.Fatalf("Service-Version = %q", w.Header().Get(httpapi.HeaderServiceVersion))
	}
	agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if agg.APIVersion() != "2026-04-01" || agg.ClientID() != "acme" || agg.Person().AccountOwnerName != "Tolvan Tolvansson" {
		t.Fatalf("stored = %+v", agg)
	}
}

func TestCreateCollectionV1(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := created(t, e.post(t, req{body: `{"company":"se-demo-pension","loginMethod":"` + mock +
		`","input":{"SWEDISH_PERSONAL_NUMBER":"19121212-1212","ACCOUNT_OWNER_NAME":"Tolvan Tolvansson"}}`}))
	agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if agg.APIVersion() != "2025-01-01" || agg.Person().PersonalNumber != "191212121212" {
		t.Fatalf("stored = %+v %+v", agg, agg.Person())
	}
}

func TestPersonalNumberFormats(t *testing.T) {
	for _, tc := range []struct{ in, stored string }{
		{"199001010017", "199001010017"},
		{"19900101-0017", "199001010017"},
		{"900101-0017", "199001010017"},
		{"121212+1212", "191212121212"},
		{"191212121212", "191212121212"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			e := newEnv(t, nil, nil)
			for _, r := range []req{
				{version: "2026-04-01", body: v2Body("se-demo-insurer", mock, pnParam(tc.in))},
				{body: `{"company":"se-demo-insurer","loginMethod":"` + mock + `","input":{"SWEDISH_PERSONAL_NUMBER":"` + tc.in + `"}}`},
			} {
				body := created(t, e.post(t, r))
				agg, err := e.repo.Load(context.Background(), body["collectionId"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if agg.Person().PersonalNumber != tc.stored {
					t.Fatalf("stored %s, want %s", agg.Person().PersonalNumber, tc.stored)
				}
			}
		})
	}
}

func TestBadPersonalNumber(t *testing.T) {
	e := newEnv(t, nil, nil)
	for _, pn := range []string{"199001010018", "19900101+0017x", "9001010017", "199013010017"} {
		p := problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", mock,
			`{"type":"AccountOwnerNameParameter","name":"X"}`, pnParam(pn))}), http.StatusBadRequest, httpapi.CodeValidationFailed)
		if !hasField(p, "parameters[1].personalNumber") || strings.Contains(p.Errors[0].Message, pn) {
			t.Fatalf("%s: errors = %+v", pn, p.Errors)
		}
		p = problemOf(t, e.post(t, req{body: `{"company":"se-demo-insurer","loginMethod":"` + mock +
			`","input":{"SWEDISH_PERSONAL_NUMBER":"` + pn + `"}}`}), http.StatusBadRequest, httpapi.CodeValidationFailed)
		if !hasField(p, "input.SWEDISH_PERSONAL_NUMBER") {
			t.Fatalf("%s v1: errors = %+v", pn, p.Errors)
		}
	}
	if len(e.store.Streams()) != 0 {
		t.Fatal("a refused request stored events")
	}
}

func TestEidParameterPersonalNumber(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := created(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE",
		`{"type":"SwedishEidParameter","personalNumber":"19900101-0017"}`)}))
	agg, _ := e.repo.Load(context.Background(), body["collectionId"].(string))
	if agg.Person().PersonalNumber != "199001010017" {
		t.Fatalf("stored %q", agg.Person().PersonalNumber)
	}
	p := problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE",
		pnParam("199001010017"), `{"type":"SwedishEidParameter","personalNumber":"191212121212"}`)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "parameters[1].personalNumber") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	p = problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE",
		pnParam("199001010017"), `{"type":"SwedishEidParameter","personalNumber":"199001010018"}`)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "parameters[1].personalNumber") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	created(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-bank", mock,
		`{"type":"Psd2AisConsentParameter","reuseStoredConsent":false}`, `{"type":"SwedishEidParameter"}`)}))
}

func TestStrictDecoding(t *testing.T) {
	e := newEnv(t, nil, nil)
	v2 := "2026-04-01"
	cases := []struct {
		name, version, body, field, code string
	}{
		{"unknown member", v2, `{"company":"se-demo-insurer","loginMethod":"` + mock + `","parameters":[],"extra":1}`, "extra", httpapi.CodeValidationFailed},
		{"input on v2", v2, `{"company":"se-demo-insurer","loginMethod":"` + mock + `","input":{}}`, "input", httpapi.CodeValidationFailed},
		{"parameters on v1", "", `{"company":"se-demo-insurer","loginMethod":"` + mock + `","parameters":[]}`, "parameters", httpapi.CodeValidationFailed},
		{"trailing data", v2, v2Body("se-demo-insurer", mock) + ` {}`, "", httpapi.CodeMalformedJSON},
		{"not json", v2, `{"company":`, "", httpapi.CodeMalformedJSON},
		{"wrong type", v2, `{"company":1,"loginMethod":"` + mock + `","parameters":[]}`, "company", httpapi.CodeValidationFailed},
		{"unknown parameter type", v2, v2Body("se-demo-insurer", mock, `{"type":"FooParameter"}`), "parameters[0].type", httpapi.CodeValidationFailed},
		{"parameter without type", v2, v2Body("se-demo-insurer", mock, `{"personalNumber":"199001010017"}`), "parameters[0].type", httpapi.CodeValidationFailed},
		{"parameter not an object", v2, v2Body("se-demo-insurer", mock, `"x"`), "parameters[0]", httpapi.CodeValidationFailed},
		{"unknown parameter member", v2, v2Body("se-demo-insurer", mock, `{"type":"SwedishPersonalNumberParameter","personalNumber":"199001010017","foo":1}`), "parameters[0].foo", httpapi.CodeValidationFailed},
		{"parameter member type", v2, v2Body("se-demo-insurer", mock, `{"type":"Psd2AisConsentParameter","reuseStoredConsent":"yes"}`), "parameters[0].reuseStoredConsent", httpapi.CodeValidationFailed},
		{"missing required member", v2, v2Body("se-demo-insurer", mock, `{"type":"Psd2AisConsentParameter"}`), "parameters[0].reuseStoredConsent", httpapi.CodeValidationFailed},
		{"duplicate parameter", v2, v2Body("se-demo-insurer", mock, pnParam("199001010017"), pnParam("199001010017")), "parameters[1].type", httpapi.CodeValidationFailed},
		{"empty name", v2, v2Body("se-demo-insurer", mock, `{"type":"AccountOwnerNameParameter","name":"  "}`), "parameters[0].name", httpapi.CodeValidationFailed},
		{"unknown input key", "", `{"company":"se-demo-insurer","loginMethod":"` + mock + `","input":{"EMAIL":"a@b.se"}}`, "input.EMAIL", httpapi.CodeValidationFailed},
		{"non-string input", "", `{"company":"se-demo-insurer","loginMethod":"` + mock + `","input":{"SWEDISH_PERSONAL_NUMBER":199001010017}}`, "input.SWEDISH_PERSONAL_NUMBER", httpapi.CodeValidationFailed},
		{"missing company", v2, `{"loginMethod":"` + mock + `","parameters":[]}`, "company", httpapi.CodeValidationFailed},
		{"missing login method", v2, `{"company":"se-demo-insurer","parameters":[]}`, "loginMethod", httpapi.CodeValidationFailed},
		{"unknown login method", v2, v2Body("se-demo-insurer", "PASSWORD"), "loginMethod", httpapi.CodeValidationFailed},
		{"unknown company", v2, v2Body("nope", mock), "company", httpapi.CodeValidationFailed},
		{"bad user uuid", v2, `{"company":"se-demo-insurer","loginMethod":"` + mock + `","parameters":[],"userUuid":"x"}`, "userUuid", httpapi.CodeValidationFailed},
		{"PDF_UPLOAD without document", v2, v2Body("se-demo-insurer", "PDF_UPLOAD"), "parameters", httpapi.CodeValidationFailed},
		{"document without PDF_UPLOAD", v2, v2Body("se-demo-insurer", mock, `{"type":"PdfDocumentParameter","contentBase64":"JVBERi0="}`), "parameters[0].type", httpapi.CodeValidationFailed},
		{"document not base64", v2, v2Body("se-demo-insurer", "PDF_UPLOAD", `{"type":"PdfDocumentParameter","contentBase64":"%%%"}`), "parameters[0].contentBase64", httpapi.CodeValidationFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := problemOf(t, e.post(t, req{version: tc.version, body: tc.body}), http.StatusBadRequest, tc.code)
			if tc.field != "" && !hasField(p, tc.field) {
				t.Fatalf("errors = %+v, want field %s", p.Errors, tc.field)
			}
		})
	}
}

func TestLoginMethodTheCompanyDoesNotSupportIsAccepted(t *testing.T) {
	e := newEnv(t, nil, nil)
	created(t, e.post(t, req{version: "2026-04-01", body: v2Body("ee-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE", pnParam("199001010017"))}))
}

func TestUnavailableCompany(t *testing.T) {
	e := newEnv(t, nil, nil)
	p := problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-maintenance", mock, pnParam("199001010017"))}),
		http.StatusConflict, httpcmd.CodeCompanyUnavailable)
	if !strings.Contains(p.Detail, "maintenance") {
		t.Errorf("detail %q lacks the company's message", p.Detail)
	}
}

func TestIdempotency(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := v2Body("se-demo-insurer", mock, pnParam("199001010017"), `{"type":"AccountOwnerNameParameter","name":"Tolvan"}`)
	first := e.post(t, req{version: "2026-04-01", body: body, idem: "order-42"})
	created(t, first)
	// Same content, other spelling (member order, whitespace): the same request.
	respelled := `{ "parameters":[ {"personalNumber":"199001010017","type":"SwedishPersonalNumberParameter"},
		{"name":"Tolvan","type":"AccountOwnerNameParameter"}], "loginMethod":"` + mock + `", "company":"se-demo-insurer" }`
	retry := e.post(t, req{version: "2026-04-01", body: respelled, idem: "order-42"})
	if retry.Code != http.StatusCreated || retry.Body.String() != first.Body.String() {
		t.Fatalf("retry = %d %s, first %s", retry.Code, retry.Body, first.Body)
	}
	if retry.Header().Get("Idempotent-Replayed") != "true" {
		t.Error("replay not marked")
	}
	if len(e.store.Streams()) != 1 {
		t.Fatalf("streams = %d, want 1", len(e.store.Streams()))
	}
	other := v2Body("se-demo-insurer", mock, pnParam("191212121212"))
	problemOf(t, e.post(t, req{version: "2026-04-01", body: other, idem: "order-42"}), http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused)
	// The same body in another version is another request.
	problemOf(t, e.post(t, req{body: `{"company":"se-demo-insurer","loginMethod":"` + mock + `"}`, idem: "order-42"}),
		http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused)
	// Another client's identical request with the same key is its own collection.
	g := e.post(t, req{version: "2026-04-01", body: body, idem: "order-42", key: globexKey})
	if created(t, g)["collectionId"] == created(t, first)["collectionId"] {
		t.Fatal("two clients share a collection through a key")
	}
	problemOf(t, e.post(t, req{version: "2026-04-01", body: body, idem: strings.Repeat("k", 256)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
}

func TestAuthVersionAndMediaType(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := v2Body("se-demo-insurer", mock)
	problemOf(t, e.post(t, req{version: "2026-04-01", body: body, key: "-"}), http.StatusUnauthorized, httpapi.CodeUnauthorized)
	problemOf(t, e.post(t, req{version: "2026-04-01", body: body, key: "not-a-key"}), http.StatusUnauthorized, httpapi.CodeUnauthorized)
	w := e.post(t, req{version: "2099-01-01", body: body})
	problemOf(t, w, http.StatusBadRequest, httpapi.CodeValidationFailed)
	if w.Header().Get(httpapi.HeaderServiceVersion) != "2025-01-01" {
		t.Errorf("Service-Version on 400 = %q", w.Header().Get(httpapi.HeaderServiceVersion))
	}
	problemOf(t, e.post(t, req{version: "2026-04-01", body: body, ctype: "text/plain"}), http.StatusUnsupportedMediaType, httpapi.CodeUnsupportedMediaType)
}

func pdfBody(decodedBytes int) string {
	content := base64.StdEncoding.EncodeToString(append([]byte("%PDF-1.7\n"), make([]byte, decodedBytes-9)...))
	return v2Body("se-demo-insurer", "PDF_UPLOAD", `{"type":"PdfDocumentParameter","contentBase64":"`+content+`","fileName":"policy.pdf"}`)
}

func TestPDFLimits(t *testing.T) {
	e := newEnv(t, nil, nil)
	// The largest document the contract allows fits the body limit, base64 and all.
	created(t, e.post(t, req{version: "2026-04-01", body: pdfBody(httpcmd.MaxPDFBytes)}))
	p := problemOf(t, e.post(t, req{version: "2026-04-01", body: pdfBody(httpcmd.MaxPDFBytes + 1)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "parameters[0].contentBase64") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	huge := `{"company":"` + strings.Repeat("x", int(httpcmd.MaxCreateCollectionBodyBytes)) + `"}`
	problemOf(t, e.post(t, req{version: "2026-04-01", body: huge}), http.StatusRequestEntityTooLarge, httpapi.CodePayloadTooLarge)
}

func TestRateLimited(t *testing.T) {
	e := newEnv(t, func(o *httpapi.Options) { o.RateLimit = httpapi.RateLimit{PerSecond: 0.5, Burst: 1} }, nil)
	body := v2Body("se-demo-insurer", mock)
	created(t, e.post(t, req{version: "2026-04-01", body: body}))
	w := e.post(t, req{version: "2026-04-01", body: body})
	problemOf(t, w, http.StatusTooManyRequests, httpapi.CodeRateLimited)
	if w.Header().Get("Retry-After") != "2" {
		t.Fatalf("Retry-After = %q", w.Header().Get("Retry-After"))
	}
	// Another client is not held back by the first one's bucket.
	created(t, e.post(t, req{version: "2026-04-01", body: body, key: globexKey}))
}

// panickingStarter is a service with a bug in Start; it embeds the interface for the rest.
type panickingStarter struct{ httpcmd.CollectionCommands }

func (panickingStarter) Start(context.Context, app.StartCollection) (app.Created, error) {
	panic("service bug")
}

func TestPanicBecomes500(t *testing.T) {
	e := newEnv(t, nil, panickingStarter{})
	w := e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", mock)})
	p := problemOf(t, w, http.StatusInternalServerError, httpapi.CodeInternal)
	if strings.Contains(p.Detail, "service bug") {
		t.Fatal("500 reveals the panic")
	}
	if w.Header().Get(httpapi.HeaderServiceVersion) != "2026-04-01" {
		t.Fatal("500 without Service-Version")
	}
}

func TestNoBodyLeaksIntoStoredMetadata(t *testing.T) {
	e := newEnv(t, nil, nil)
	created(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", mock, pnParam("199001010017"))}))
	for _, stream := range e.store.Streams() {
		for _, env := range e.store.Events(stream) {
			raw, _ := json.Marshal(env.Metadata())
			if strings.Contains(string(raw), "199001010017") {
				t.Fatal("personal number in envelope metadata")
			}
		}
	}
}

func TestRequestFingerprintsAreKeyed(t *testing.T) {
	body := v2Body("se-demo-insurer", mock, pnParam("199001010017"))
	var hashes []string
	for _, key := range [][]byte{fingerprintKey, []byte("another-fingerprint-key-0123456789abcdef")} {
		e := newEnvWithKey(t, nil, nil, key)
		id := created(t, e.post(t, req{version: "2026-04-01", body: body, idem: "order-7"}))["collectionId"].(string)
		agg, err := e.repo.Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, agg.RequestHash())
		// supplement-info's fingerprint, which covers e-mail addresses, is keyed the same way.
		e.changeStatus(t, id, collection.StatusLogin, collection.StatusDetails{})
		e.changeStatus(t, id, collection.StatusContactFormPending, collection.StatusDetails{})
		accepted(t, e.supplement(t, id, contactBody, "", "sup-7"))
		if agg, _ = e.repo.Load(context.Background(), id); agg.SuppliedInput() == nil ||
			!strings.HasPrefix(agg.SuppliedInput().Personal.RequestHash, httpcmd.FingerprintScheme) {
			t.Fatalf("supplement-info fingerprint %+v", agg.SuppliedInput())
		}
	}
	if hashes[0] == hashes[1] || !strings.HasPrefix(hashes[0], httpcmd.FingerprintScheme) || !strings.HasPrefix(hashes[1], httpcmd.FingerprintScheme) {
		t.Fatalf("fingerprints under two keys: %v", hashes)
	}
}

func TestEidParameterNamesTheSamePersonInAnySpelling(t *testing.T) {
	e := newEnv(t, nil, nil)
	body := created(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE",
		pnParam("900101-0017"), `{"type":"SwedishEidParameter","personalNumber":"19900101-0017"}`)}))
	agg, _ := e.repo.Load(context.Background(), body["collectionId"].(string))
	if agg.Person().PersonalNumber != "199001010017" {
		t.Fatalf("stored %q", agg.Person().PersonalNumber)
	}
	// Both numbers broken: each is reported at its own place.
	p := problemOf(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", "SWEDISH_MOBILE_EID_OTHER_DEVICE",
		pnParam("199001010018"), `{"type":"SwedishEidParameter","personalNumber":"199013010017"}`)}), http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "parameters[0].personalNumber") || !hasField(p, "parameters[1].personalNumber") {
		t.Fatalf("errors = %+v", p.Errors)
	}
}
