package collectiondata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
)

// sealingStore is a Store whose personal columns hold only ciphertext: see Sealing.
type sealingStore struct {
	Store
	keys eventschema.Keys
}

// Sealing wraps an adapter so that what it stores of personal data (a row's records and
// Personal, a document's Content) is sealed under the collection's data subject
// (collection.DataSubject of the row's id and user) and opened when it is read: the projector
// and the Reader see it plain, the database never does (its data_json is then "{}"). An erased
// subject reads as no records, no personal data and no content (the data endpoints then show
// empty lists and null); a lost key is an error. Rows written before sealing, whose columns hold
// plain text, are read as they are and sealed when next written; so are rows sealed before the
// records were (their sealed form holds Personal alone, and data_json the records).
//
// A document is sealed under its row's subject: the row written with it (as the projector
// does), else the stored one. A document of no row is refused: it names no user, and sealing a
// user's document under the collection's own subject would let it outlive the user's erasure.
func Sealing(s Store, keys eventschema.Keys) Store { return sealingStore{Store: s, keys: keys} }

func subject(r Row) string { return collection.DataSubject(r.CollectionID, r.UserUUID) }

// Upsert implements Store: it seals, then writes.
func (s sealingStore) Upsert(ctx context.Context, rows []Row, docs []Document) error {
	subjects := map[string]string{}
	sealedRows := make([]Row, len(rows))
	for i, r := range rows {
		subjects[r.CollectionID] = subject(r)
		read := r.Content.PSD2Read
		if !r.Personal.IsZero() || !r.Content.IsZero() {
			records := r.Content
			records.PSD2Read = nil
			plain, err := json.Marshal(sealedForm{Personal: r.Personal, Records: &records})
			if err != nil {
				return fmt.Errorf("collection data %s: encode: %w", r.CollectionID, err)
			}
			if r.sealed, err = s.seal(ctx, subject(r), plain); err != nil {
				return fmt.Errorf("collection data %s: %w", r.CollectionID, err)
			}
		}
		r.Personal, r.Content = Personal{}, Content{PSD2Read: read}
		sealedRows[i] = r
	}
	var rowless []string
	for _, d := range docs {
		if _, ok := subjects[d.CollectionID]; !ok && len(d.Content) > 0 {
			rowless = append(rowless, d.CollectionID)
		}
	}
	if len(rowless) > 0 {
		stored, err := s.Store.GetMany(ctx, rowless)
		if err != nil {
			return fmt.Errorf("collection documents: read their rows: %w", err)
		}
		for id, r := range stored {
			subjects[id] = subject(r)
		}
	}
	sealedDocs := make([]Document, len(docs))
	for i, d := range docs {
		if len(d.Content) > 0 {
			sub, ok := subjects[d.CollectionID]
			if !ok {
				return fmt.Errorf("collection document %s/%s: no row names its data subject", d.CollectionID, d.DocumentID)
			}
			var err error
			if d.Content, err = s.seal(ctx, sub, d.Content); err != nil {
				return fmt.Errorf("collection document %s/%s: %w", d.CollectionID, d.DocumentID, err)
			}
		}
		sealedDocs[i] = d
	}
	return s.Store.Upsert(ctx, sealedRows, sealedDocs)
}

// seal seals plain; an erased subject gets nothing stored (nil).
func (s sealingStore) seal(ctx context.Context, subject string, plain []byte) ([]byte, error) {
	sealed, err := eventschema.Seal(ctx, s.keys, subject, plain)
	if errors.Is(err, eventschema.ErrSubjectErased) {
		return nil, nil
	}
	return sealed, err
}

// sealedForm is what Sealing seals of a row: Personal's members, and the records beside them
// (nil in a row sealed before the records were, whose data_json still holds them).
type sealedForm struct {
	Personal
	Records *Content `json:"records,omitempty"`
}

// open opens a row's sealed personal data into Personal and Content.
func (s sealingStore) open(ctx context.Context, r Row) (Row, error) {
	if r.sealed == nil {
		return r, nil
	}
	plain, erased, err := eventschema.Open(ctx, s.keys, r.sealed)
	r.sealed = nil
	if err != nil {
		return Row{}, fmt.Errorf("collection data %s: %w", r.CollectionID, err)
	}
	if erased {
		r.Personal, r.Content = Personal{}, Content{}
		return r, nil
	}
	var form sealedForm
	if err := json.Unmarshal(plain, &form); err != nil {
		return Row{}, fmt.Errorf("collection data %s: decode personal data: %w", r.CollectionID, err)
	}
	r.Personal = form.Personal
	if form.Records != nil {
		read := r.Content.PSD2Read
		r.Content = *form.Records
		r.Content.PSD2Read = read
	}
	return r, nil
}

// GetMany implements Store.
func (s sealingStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	rows, err := s.Store.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	for id, r := range rows {
		if rows[id], err = s.open(ctx, r); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// Get implements Store.
func (s sealingStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	r, err := s.Store.Get(ctx, tenant, collectionID)
	if err != nil {
		return Row{}, err
	}
	return s.open(ctx, r)
}

// Document implements Store: an erased subject's document has no content.
func (s sealingStore) Document(ctx context.Context, tenant, collectionID, documentID string) (Document, error) {
	d, err := s.Store.Document(ctx, tenant, collectionID, documentID)
	if err != nil || len(d.Content) == 0 {
		return d, err
	}
	content, erased, err := eventschema.Open(ctx, s.keys, d.Content)
	if err != nil {
		return Document{}, fmt.Errorf("collection document %s/%s: %w", collectionID, documentID, err)
	}
	d.Content = content
	if erased {
		d.Content = nil
	}
	return d, nil
}

// Close closes the adapter when it holds resources of its own.
func (s sealingStore) Close() error {
	if c, ok := s.Store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
