package collectiondata

import (
	"context"
	"errors"
	"fmt"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/query"
)

// Reader serves the data endpoints' port (query.DataReader) from a Store: it merges the personal
// columns back into the items they belong to and tells which documents the collection has. It
// lives with the read model because it is the one place that knows both shapes; the composition
// root only constructs it.
type Reader struct {
	store Store
}

var _ query.DataReader = Reader{}

// NewReader returns the query.DataReader over store.
func NewReader(store Store) Reader { return Reader{store: store} }

// GetData implements query.DataReader. A wealth collection's data names its newest career
// statement, so that a client learns from the data that the PDF exists; one whose content is
// not held (its user's erasure blanked it) is not named, as GetDocument would not serve it.
func (r Reader) GetData(ctx context.Context, tenant, collectionID string) (query.DataView, error) {
	row, err := r.store.Get(ctx, tenant, collectionID)
	if errors.Is(err, readdb.ErrNotFound) {
		return query.DataView{}, fmt.Errorf("collection data %s: %w", collectionID, query.ErrNotFound)
	}
	if err != nil {
		return query.DataView{}, err
	}
	v := View(row)
	// Only wealth companies return documents; an insurance read skips the second query.
	if row.Product == string(collection.ProductWealth) {
		docs, err := r.store.Documents(ctx, tenant, collectionID)
		if err != nil {
			return query.DataView{}, err
		}
		if d := newest(docs, collection.DocumentFrenchCareerStatement); d != nil && d.HasContent {
			v.CareerStatement = &query.DocumentInfo{Kind: d.Kind, ContentType: d.ContentType, FileName: d.FileName,
				Size: d.Size, At: d.At}
		}
	}
	return v, nil
}

// GetDocument implements query.DataReader: the newest document of the kind, as GetData names it.
func (r Reader) GetDocument(ctx context.Context, tenant, collectionID, kind string) (query.DocumentView, error) {
	docs, err := r.store.Documents(ctx, tenant, collectionID)
	if err != nil {
		return query.DocumentView{}, err
	}
	found := newest(docs, kind)
	if found == nil {
		return query.DocumentView{}, fmt.Errorf("%s document of %s: %w", kind, collectionID, query.ErrNotFound)
	}
	doc, err := r.store.Document(ctx, tenant, collectionID, found.DocumentID)
	if errors.Is(err, readdb.ErrNotFound) {
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

// newest is the newest document of a kind, nil when there is none: by time, then by the revision
// that recorded it, since a company that returns the statement again returns a newer one.
func newest(docs []Document, kind string) *Document {
	var found *Document
	for i := range docs {
		d := &docs[i]
		if d.Kind != kind {
			continue
		}
		if found == nil || d.At.After(found.At) || (d.At.Equal(found.At) && d.Revision > found.Revision) {
			found = d
		}
	}
	return found
}

// View maps a row to the query side's view, putting each name back on its item. The records
// are the row's own; only insurances and pensions gain a name.
func View(r Row) query.DataView {
	v := query.DataView{
		CollectionID: r.CollectionID, Tenant: r.Tenant, Company: r.Company, Product: r.Product, Status: r.Status,
		Investments: r.Content.Investments, Loans: r.Content.Loans, Savings: r.Content.Savings,
		CheckingAccounts: r.Content.CheckingAccounts, SavingsAccounts: r.Content.SavingsAccounts,
		CreditCards: r.Content.CreditCards, PSD2Read: r.Content.PSD2Read, PersonalInformation: r.Personal.PersonalInformation,
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
