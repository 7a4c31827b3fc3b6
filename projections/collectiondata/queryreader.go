package collectiondata

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/query"
)

// QueryReader serves the query side's port (query.DataReader) from a Store: it merges the
// personal columns back into the items they belong to. It lives with the read model because it is the one place that knows both shapes; the
// service wiring only constructs it.
type QueryReader struct {
	store Store
}

var _ query.DataReader = (*QueryReader)(nil)

// NewQueryReader returns the query.DataReader over store.
func NewQueryReader(store Store) *QueryReader { return &QueryReader{store: store} }

// GetData implements query.DataReader.
func (q *QueryReader) GetData(ctx context.Context, tenant, collectionID string) (query.DataView, error) {
	row, err := q.store.Get(ctx, tenant, collectionID)
	if errors.Is(err, ErrNotFound) {
		return query.DataView{}, fmt.Errorf("collection data %s: %w", collectionID, query.ErrNotFound)
	}
	if err != nil {
		return query.DataView{}, err
	}
	return View(row), nil
}

// GetDocument implements query.DataReader. The newest document of the kind wins (by time, then
// by the revision that recorded it): a company that returns the statement again returns a
// newer one.
func (q *QueryReader) GetDocument(ctx context.Context, tenant, collectionID, kind string) (query.DocumentView, error) {
	docs, err := q.store.Documents(ctx, tenant, collectionID)
	if err != nil {
		return query.DocumentView{}, err
	}
	var newest *Document
	for i := range docs {
		d := &docs[i]
		if d.Kind != kind {
			continue
		}
		if newest == nil || d.At.After(newest.At) || (d.At.Equal(newest.At) && d.Revision > newest.Revision) {
			newest = d
		}
	}
	if newest == nil {
		return query.DocumentView{}, fmt.Errorf("%s document of %s: %w", kind, collectionID, query.ErrNotFound)
	}
	doc, err := q.store.Document(ctx, tenant, collectionID, newest.DocumentID)
	if errors.Is(err, ErrNotFound) {
		return query.DocumentView{}, fmt.Errorf("%s document of %s: %w", kind, collectionID, query.ErrNotFound)
	}
	if err != nil {
		return query.DocumentView{}, err
	}
	if len(doc.Content) == 0 {
		// Erased, or never received: there is no file to serve.
		return query.DocumentView{}, fmt.Errorf("%s document of %s has no content: %w", kind, collectionID, query.ErrNotFound)
	}
	return query.DocumentView{
		DocumentID: doc.DocumentID, Kind: doc.Kind, ContentType: doc.ContentType, FileName: doc.FileName,
		Size: doc.Size, SHA256: doc.SHA256, At: doc.At, Content: doc.Content,
	}, nil
}

// View maps a row to the query side's view, putting each name back on its item. The records
// are the row's own; only insurances and pensions gain a name.
func View(r Row) query.DataView {
	v := query.DataView{
		CollectionID: r.CollectionID, Tenant: r.Tenant, Company: r.Company, Product: r.Product, Status: r.Status,
		Investments: r.Content.Investments, Loans: r.Content.Loans, Savings: r.Content.Savings,
		CheckingAccounts: r.Content.CheckingAccounts, SavingsAccounts: r.Content.SavingsAccounts,
		CreditCards: r.Content.CreditCards, PersonalInformation: r.Personal.PersonalInformation,
	}
	for _, i := range r.Content.Insurances {
		v.Insurances = append(v.Insurances, query.InsuranceView{Insurance: i, HolderName: name(r.Personal.HolderNames, i.ID)})
	}
	for _, p := range r.Content.Pensions {
		v.Pensions = append(v.Pensions, query.PensionView{Pension: p, InsuredPersonName: name(r.Personal.InsuredPersonNames, p.ID)})
	}
	return v
}

// name is the personal name recorded for an item, nil when none was (unknown, not "").
func name(names map[string]string, id string) *string {
	if n, ok := names[id]; ok && n != "" {
		return &n
	}
	return nil
}
