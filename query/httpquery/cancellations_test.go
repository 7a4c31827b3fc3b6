package httpquery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/samla/samla/domain/company/companytest"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/httpapi/httpapitest"
	"github.com/samla/samla/query"
	"github.com/samla/samla/query/httpquery"
)

const (
	signedDoc  = "0197c0a1-3333-7e5f-8a9b-000000000001"
	pendingDoc = "0197c0a1-3333-7e5f-8a9b-000000000002"
	globexDoc  = "0197c0a1-3333-7e5f-8a9b-000000000003"
)

// fakeCancellations is a tenant-scoped cancellations read model; leakyRead ignores the tenant,
// as a buggy reader would.
type fakeCancellations struct {
	all       []query.CancellationView
	pdfs      map[string][]byte
	leakyRead bool
}

func (f *fakeCancellations) Cancellation(_ context.Context, tenant, id string) (query.CancellationView, error) {
	for _, v := range f.all {
		if v.DocumentID == id && (f.leakyRead || v.Tenant == tenant) {
			return v, nil
		}
	}
	return query.CancellationView{}, query.ErrNotFound
}

func (f *fakeCancellations) CollectionCancellations(_ context.Context, tenant, collectionID string) ([]query.CancellationView, error) {
	var out []query.CancellationView
	for _, v := range f.all {
		if v.CollectionID == collectionID && (f.leakyRead || v.Tenant == tenant) {
			out = append(out, v)
		}
	}
	return out, nil
}

func (f *fakeCancellations) SignedDocument(ctx context.Context, tenant, id string) ([]byte, error) {
	if _, err := f.Cancellation(ctx, tenant, id); err != nil {
		return nil, err
	}
	if pdf, ok := f.pdfs[id]; ok {
		return pdf, nil
	}
	return nil, query.ErrNoSignedDocument
}

func TestCancellationQueries(t *testing.T) {
	created := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	signed := created.Add(5 * time.Minute)
	f := &fakeCancellations{all: []query.CancellationView{
		{DocumentID: signedDoc, Tenant: "acme", CollectionID: acmeID, Company: "se-demo-insurer", InsuranceID: "i1",
			Status: "CLOSED", IsSignedAndSealed: true, CreatedAt: created, SignedAt: &signed},
		{DocumentID: pendingDoc, Tenant: "acme", CollectionID: acmeID, Company: "se-demo-insurer", InsuranceID: "i2",
			Status: "PENDING", CreatedAt: created},
		{DocumentID: globexDoc, Tenant: "globex", CollectionID: acmeID, Company: "se-demo-insurer", InsuranceID: "i3",
			Status: "PENDING", CreatedAt: created},
	}, pdfs: map[string][]byte{signedDoc: []byte("%PDF-1.7 signed")}}
	e := newEnv(t)
	eng := httpapi.NewEngine(httpapi.Options{Keys: httpapitest.Keys{acmeKey: "acme", globexKey: "globex"}})
	httpquery.RegisterRoutes(eng, httpquery.Deps{Status: e.status, History: e.history, Companies: companytest.Catalog(), Cancellations: f})
	get := func(path, key string) (int, []byte, http.Header) {
		w := httpapitest.Get(eng, path, key, "2025-01-01")
		return w.Code, w.Body.Bytes(), w.Header()
	}

	code, body, _ := get("/cancellations/"+signedDoc, acmeKey)
	want := `{"documentId":"` + signedDoc + `","insuranceId":"i1","collectionId":"` + acmeID + `","company":"se-demo-insurer",` +
		`"status":"CLOSED","isSignedAndSealed":true,"createdAt":"2026-11-25T10:00:00.000Z","signedAt":"2026-11-25T10:05:00.000Z"}`
	if code != http.StatusOK || string(body) != want {
		t.Fatalf("GET = %d %s\nwant %s", code, body, want)
	}
	if code, body, h := get("/cancellations/"+signedDoc+"/pdf", acmeKey); code != http.StatusOK ||
		string(body) != "%PDF-1.7 signed" || h.Get("Content-Type") != "application/pdf" {
		t.Fatalf("PDF = %d %s %v", code, body, h)
	}
	if code := problemCode(t, httpapitest.Get(eng, "/cancellations/"+pendingDoc+"/pdf", acmeKey, ""), http.StatusConflict); code != httpquery.CodeNotSigned {
		t.Fatalf("a pending cancellation's PDF: %s", code)
	}
	for _, path := range []string{"/cancellations/" + globexDoc, "/cancellations/" + globexDoc + "/pdf", "/cancellations/nope"} {
		if code := problemCode(t, httpapitest.Get(eng, path, acmeKey, ""), http.StatusNotFound); code != httpquery.CodeCancellationNotFound {
			t.Errorf("%s: %s", path, code)
		}
	}
	code, body, _ = get("/collections/"+acmeID+"/cancellations", acmeKey)
	var list struct {
		Cancellations []struct{ DocumentID, Status string }
	}
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Cancellations) != 2 ||
		list.Cancellations[0].DocumentID != signedDoc || list.Cancellations[1].Status != "PENDING" {
		t.Fatalf("the collection's list = %d %s", code, body)
	}
	// Another client's collection does not exist for it, whatever cancellations it has.
	if code := problemCode(t, httpapitest.Get(eng, "/collections/"+acmeID+"/cancellations", globexKey, ""), http.StatusNotFound); code != httpquery.CodeCollectionNotFound {
		t.Fatalf("globex's list: %s", code)
	}
	t.Run("a reader that leaks another tenant's rows shows none of them", func(t *testing.T) {
		f.leakyRead = true
		defer func() { f.leakyRead = false }()
		if code := problemCode(t, httpapitest.Get(eng, "/cancellations/"+globexDoc, acmeKey, ""), http.StatusNotFound); code != httpquery.CodeCancellationNotFound {
			t.Fatalf("leaked: %s", code)
		}
		_, body, _ := get("/collections/"+acmeID+"/cancellations", acmeKey)
		if json.Unmarshal(body, &list) != nil || len(list.Cancellations) != 2 {
			t.Fatalf("leaked list %s", body)
		}
	})
}
