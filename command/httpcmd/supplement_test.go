package httpcmd_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/samla/samla/command/httpcmd"
	"github.com/samla/samla/command/repository"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/httpapi"
)

// startIn starts a collection over HTTP and moves it, as the connector would, to status.
func (e *env) startIn(t *testing.T, status collection.Status, details collection.StatusDetails) string {
	t.Helper()
	id := created(t, e.post(t, req{version: "2026-04-01", body: v2Body("se-demo-insurer", mock, pnParam("199001010066"))}))["collectionId"].(string)
	for _, to := range []collection.Status{collection.StatusLogin, status} {
		e.changeStatus(t, id, to, details)
	}
	return id
}

func (e *env) changeStatus(t *testing.T, id string, to collection.Status, details collection.StatusDetails) {
	t.Helper()
	if to == collection.StatusLogin {
		details = collection.StatusDetails{}
	}
	if _, _, err := e.repo.Update(context.Background(), id, repository.Meta{Tenant: "acme", Actor: "connector"},
		func(c *collection.Collection) error { return c.ChangeStatusWith(to, details, testNow) }); err != nil {
		t.Fatal(err)
	}
}

func (e *env) supplement(t *testing.T, id, body, key, idem string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/collections/"+id+"/supplement-info", strings.NewReader(body))
	if key == "" {
		key = acmeKey
	}
	r.Header.Set(httpapi.HeaderAPIKey, key)
	r.Header.Set("Content-Type", "application/json")
	if idem != "" {
		r.Header.Set(httpapi.HeaderIdempotencyKey, idem)
	}
	w := httptest.NewRecorder()
	e.engine.ServeHTTP(w, r)
	return w
}

func (e *env) events(id string) int { return len(e.store.Events(collection.StreamName(id))) }

const contactBody = `{"inputs":[{"type":"EMAIL","value":"a@b.se"},{"type":"MOBILE_PHONE_NUMBER","value":"46701234567"}]}`

func accepted(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d, want 202: %s", w.Code, w.Body)
	}
}

func TestSupplementInfoAccepted(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusContactFormPending, collection.StatusDetails{})
	w := e.supplement(t, id, contactBody, "", "")
	accepted(t, w)
	if w.Header().Get("Location") != "/collections/"+id+"/status" || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("headers = %v", w.Header())
	}
	agg, _ := e.repo.Load(context.Background(), id)
	s := agg.SuppliedInput()
	if s == nil || len(s.Personal.Inputs) != 2 || s.Personal.Inputs[1].Value != "46701234567" {
		t.Fatalf("supplied = %+v", s)
	}
	// The status took its input: another one is a conflict.
	problemOf(t, e.supplement(t, id, contactBody, "", ""), http.StatusConflict, httpcmd.CodeCollectionNotAwaitingInput)
}

func TestSupplementInfoClientResponses(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusWaitingForUserAction, collection.StatusDetails{Instructions: []collection.Instruction{
		{RequestID: "r1", Method: "POST", URL: "https://company.example/eid/start"}}})
	accepted(t, e.supplement(t, id, `{"responses":[{"requestId":"r1","status":200,"headers":{"Content-Type":"application/json"},"body":"{\"autoStartToken\":\"x\"}"},`+
		`{"requestId":"some-new-url","status":404,"headers":{},"body":""}]}`, "", ""))
	agg, _ := e.repo.Load(context.Background(), id)
	if s := agg.SuppliedInput(); s == nil || s.Kind != collection.InputKindClientResponses || len(s.RequestIDs) != 1 {
		t.Fatalf("supplied = %+v", s)
	}
}

func TestSupplementInfoFieldErrors(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusContactFormPending, collection.StatusDetails{})
	before := e.events(id)
	p := problemOf(t, e.supplement(t, id, `{"inputs":[{"type":"EMAIL","value":"a.b.se"},{"type":"MOBILE_PHONE_NUMBER","value":"+46 70 123"}]}`, "", ""),
		http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "inputs[0].value") || !hasField(p, "inputs[1].value") {
		t.Fatalf("errors = %+v", p.Errors)
	}
	for _, fe := range p.Errors {
		if strings.Contains(fe.Message, "a.b.se") || strings.Contains(fe.Message, "+46") {
			t.Fatalf("message echoes the value: %+v", fe)
		}
	}
	if e.events(id) != before {
		t.Fatal("a rejected input changed the collection")
	}
	// After the rejection the collection still takes a good input.
	accepted(t, e.supplement(t, id, contactBody, "", ""))
}

func TestSupplementInfoShape(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusContactFormPending, collection.StatusDetails{})
	many := func(n int, item string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(item, i)
		}
		return strings.Join(items, ",")
	}
	cases := []struct{ name, body, field, code string }{
		{"both members", `{"inputs":[{"type":"EMAIL","value":"a@b.se"}],"responses":[{"requestId":"r","status":200}]}`, "responses", httpapi.CodeValidationFailed},
		{"neither member", `{}`, "inputs", httpapi.CodeValidationFailed},
		{"null inputs", `{"inputs":null}`, "inputs", httpapi.CodeValidationFailed},
		{"empty inputs", `{"inputs":[]}`, "inputs", httpapi.CodeValidationFailed},
		{"unknown member", `{"inputs":[{"type":"EMAIL","value":"a@b.se"}],"extra":1}`, "extra", httpapi.CodeValidationFailed},
		{"unknown input member", `{"inputs":[{"type":"EMAIL","value":"a@b.se","x":1}]}`, "inputs[0].x", httpapi.CodeValidationFailed},
		{"value not a string", `{"inputs":[{"type":"EMAIL","value":1}]}`, "inputs[0].value", httpapi.CodeValidationFailed},
		{"missing value", `{"inputs":[{"type":"EMAIL"}]}`, "inputs[0].value", httpapi.CodeValidationFailed},
		{"missing type", `{"inputs":[{"value":"a@b.se"}]}`, "inputs[0].type", httpapi.CodeValidationFailed},
		{"too many inputs", `{"inputs":[` + many(httpcmd.MaxSupplementInputs+1, `{"type":"T%d","value":"v"}`) + `]}`, "inputs", httpapi.CodeValidationFailed},
		{"too many responses", `{"responses":[` + many(httpcmd.MaxSupplementResponses+1, `{"requestId":"r%d","status":200}`) + `]}`, "responses", httpapi.CodeValidationFailed},
		{"response without status", `{"responses":[{"requestId":"r1"}]}`, "responses[0].status", httpapi.CodeValidationFailed},
		{"response without id", `{"responses":[{"status":200}]}`, "responses[0].requestId", httpapi.CodeValidationFailed},
		{"response body too large", `{"responses":[{"requestId":"r1","status":200,"body":"` + strings.Repeat("x", httpcmd.MaxResponseBodyBytes+1) + `"}]}`, "responses[0].body", httpapi.CodeValidationFailed},
		{"input not an object", `{"inputs":["EMAIL"]}`, "inputs[0]", httpapi.CodeValidationFailed},
		{"header value not a string", `{"responses":[{"requestId":"r1","status":200,"headers":{"A":["b"]}}]}`, "responses[0].headers", httpapi.CodeValidationFailed},
		{"trailing data", contactBody + `{}`, "", httpapi.CodeMalformedJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := problemOf(t, e.supplement(t, id, tc.body, "", ""), http.StatusBadRequest, tc.code)
			if tc.field != "" && !hasField(p, tc.field) {
				t.Fatalf("errors = %+v, want field %s", p.Errors, tc.field)
			}
		})
	}
	huge := `{"responses":[{"requestId":"r1","status":200,"body":"` + strings.Repeat("x", int(httpcmd.MaxSupplementInfoBodyBytes)) + `"}]}`
	problemOf(t, e.supplement(t, id, huge, "", ""), http.StatusRequestEntityTooLarge, httpapi.CodePayloadTooLarge)
	// Inputs the status did not ask for are the domain's verdict, with the field.
	p := problemOf(t, e.supplement(t, id, `{"inputs":[{"type":"EMAIL","value":"a@b.se"},{"type":"SHOE_SIZE","value":"44"}]}`, "", ""),
		http.StatusBadRequest, httpapi.CodeValidationFailed)
	if !hasField(p, "inputs[1].type") {
		t.Fatalf("errors = %+v", p.Errors)
	}
}

func TestSupplementInfoNotAwaiting(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusCollecting, collection.StatusDetails{})
	problemOf(t, e.supplement(t, id, contactBody, "", ""), http.StatusConflict, httpcmd.CodeCollectionNotAwaitingInput)
	problemOf(t, e.supplement(t, id, `{"responses":[{"requestId":"r1","status":200}]}`, "", ""), http.StatusConflict, httpcmd.CodeCollectionNotAwaitingInput)
}

func TestSupplementInfoNotFound(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusContactFormPending, collection.StatusDetails{})
	for name, tc := range map[string]struct{ id, key string }{
		"another client's": {id, globexKey},
		"unknown":          {uuid.NewString(), acmeKey},
		"not a uuid":       {"not-a-uuid", acmeKey},
		"braced":           {"{" + id + "}", acmeKey},
	} {
		t.Run(name, func(t *testing.T) {
			problemOf(t, e.supplement(t, tc.id, contactBody, tc.key, ""), http.StatusNotFound, httpcmd.CodeCollectionNotFound)
		})
	}
	// The other client's attempt changed nothing: the owner can still supply, and the id in
	// uppercase is the same collection.
	accepted(t, e.supplement(t, strings.ToUpper(id), contactBody, "", ""))
}

func TestSupplementInfoIdempotency(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusContactFormPending, collection.StatusDetails{})
	first := e.supplement(t, id, contactBody, "", "sup-1")
	accepted(t, first)
	n := e.events(id)
	// The same request respelled (member order, whitespace) is a retry.
	respelled := `{ "inputs": [ {"value":"a@b.se","type":"EMAIL"}, {"value":"46701234567","type":"MOBILE_PHONE_NUMBER"} ] }`
	retry := e.supplement(t, id, respelled, "", "sup-1")
	accepted(t, retry)
	if retry.Header().Get("Idempotent-Replayed") != "true" || retry.Body.String() != first.Body.String() || e.events(id) != n {
		t.Fatalf("retry = %d %v %q, events %d → %d", retry.Code, retry.Header(), retry.Body, n, e.events(id))
	}
	other := `{"inputs":[{"type":"EMAIL","value":"c@d.se"},{"type":"MOBILE_PHONE_NUMBER","value":"46701234567"}]}`
	problemOf(t, e.supplement(t, id, other, "", "sup-1"), http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused)
	// After the connector moved on, the retry still gets the first answer.
	e.changeStatus(t, id, collection.StatusCollecting, collection.StatusDetails{})
	late := e.supplement(t, id, contactBody, "", "sup-1")
	accepted(t, late)
	if late.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("late retry not marked as a replay: %v", late.Header())
	}
	problemOf(t, e.supplement(t, id, other, "", "sup-1"), http.StatusUnprocessableEntity, httpcmd.CodeIdempotencyKeyReused)
	problemOf(t, e.supplement(t, id, contactBody, "", strings.Repeat("k", 256)), http.StatusBadRequest, httpapi.CodeValidationFailed)
}

func TestDeleteCollectionIsRefused(t *testing.T) {
	e := newEnv(t, nil, nil)
	id := e.startIn(t, collection.StatusLogin, collection.StatusDetails{})
	for _, target := range []string{id, uuid.NewString(), "anything"} {
		r := httptest.NewRequest(http.MethodDelete, "/collections/"+target, nil)
		r.Header.Set(httpapi.HeaderAPIKey, acmeKey)
		w := httptest.NewRecorder()
		e.engine.ServeHTTP(w, r)
		problemOf(t, w, http.StatusMethodNotAllowed, httpcmd.CodeCollectionCannotBeCancelled)
		if allow, ok := w.Header()["Allow"]; !ok || len(allow) != 1 || allow[0] != "" {
			t.Fatalf("Allow = %q", w.Header().Get("Allow"))
		}
	}
	agg, _ := e.repo.Load(context.Background(), id)
	if agg.Status() != collection.StatusLogin {
		t.Fatalf("status = %s after DELETE", agg.Status())
	}
}

func TestPDFUploadRecordsTheDocument(t *testing.T) {
	e := newEnv(t, nil, nil)
	content := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte{0xff, 0x00}, 1000)...)
	body := v2Body("se-demo-insurer", "PDF_UPLOAD", `{"type":"PdfDocumentParameter","contentBase64":"`+
		base64.StdEncoding.EncodeToString(content)+`","fileName":"policy.pdf"}`)
	id := created(t, e.post(t, req{version: "2026-04-01", body: body}))["collectionId"].(string)
	stream := e.store.Events(collection.StreamName(id))
	if len(stream) != 2 || stream[1].Type != collection.EventDocumentUploaded || e.store.Appends() != 1 {
		t.Fatalf("stream = %d events, appends %d", len(stream), e.store.Appends())
	}
	agg, err := e.repo.Load(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	docs := agg.Documents()
	if len(docs) != 1 || docs[0].Personal.FileName != "policy.pdf" || !bytes.Equal(docs[0].Personal.Content, content) || docs[0].Size != len(content) {
		t.Fatalf("documents = %+v", docs)
	}
	// Without a file name the document still goes through.
	body = v2Body("se-demo-insurer", "PDF_UPLOAD", `{"type":"PdfDocumentParameter","contentBase64":"`+base64.StdEncoding.EncodeToString(content)+`"}`)
	id = created(t, e.post(t, req{version: "2026-04-01", body: body}))["collectionId"].(string)
	agg, _ = e.repo.Load(context.Background(), id)
	if docs := agg.Documents(); len(docs) != 1 || docs[0].Personal.FileName != "" {
		t.Fatalf("documents = %+v", docs)
	}
}
