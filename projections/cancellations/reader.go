package cancellations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/query"
)

// Reader serves the read model to its consumers through the ports they declare: the cancellation
// endpoints' query.CancellationReader, the connectors' list of cancellations that still need the
// signing provider and the user erasure's list of a user's cancellations (both satisfied by
// shape: an adapter depends on the ports it serves, never on their consumers' code).
type Reader struct {
	store Store
	keys  eventschema.Keys
}

var _ query.CancellationReader = Reader{}

// NewReader returns the reader over store, opening the signed PDFs with keys.
func NewReader(store Store, keys eventschema.Keys) Reader {
	if keys == nil {
		panic("cancellations.NewReader: keys are required to open the signed documents")
	}
	return Reader{store: store, keys: keys}
}

// Cancellation implements query.CancellationReader: a cancellation the tenant cannot see is
// query.ErrNotFound.
func (r Reader) Cancellation(ctx context.Context, tenant, documentID string) (query.CancellationView, error) {
	row, err := r.get(ctx, tenant, documentID)
	if err != nil {
		return query.CancellationView{}, err
	}
	return view(row), nil
}

// CollectionCancellations implements query.CancellationReader.
func (r Reader) CollectionCancellations(ctx context.Context, tenant, collectionID string) ([]query.CancellationView, error) {
	rows, err := r.store.ListByCollection(ctx, tenant, collectionID, query.MaxCollectionCancellations)
	if err != nil {
		return nil, err
	}
	out := make([]query.CancellationView, 0, len(rows))
	for _, row := range rows {
		if row.Tenant != tenant || row.CollectionID != collectionID {
			continue // a store that forgot a filter must not leak another's cancellation
		}
		out = append(out, view(row))
	}
	return out, nil
}

// SignedDocument implements query.CancellationReader. Only a signed and sealed cancellation has a
// document to open; an erased one (its document blanked, or its key destroyed before the blanking
// reached the read model) has none, which is query.ErrNoSignedDocument; a lost key is an error of
// its own, never an absence.
func (r Reader) SignedDocument(ctx context.Context, tenant, documentID string) ([]byte, error) {
	row, err := r.get(ctx, tenant, documentID)
	if err != nil {
		return nil, err
	}
	if !row.IsSignedAndSealed {
		return nil, fmt.Errorf("cancellation %s is %s, not signed and sealed: %w", documentID, row.Status, query.ErrNoSignedDocument)
	}
	doc, err := r.store.Document(ctx, tenant, documentID)
	if errors.Is(err, readdb.ErrNotFound) || (err == nil && doc.Content.IsZero()) {
		return nil, fmt.Errorf("cancellation %s: the signed document is erased: %w", documentID, query.ErrNoSignedDocument)
	}
	if err != nil {
		return nil, err
	}
	plain, erased, err := doc.Content.Open(ctx, r.keys)
	if err != nil {
		return nil, fmt.Errorf("cancellation %s: %w", documentID, err)
	}
	if erased || len(plain) == 0 {
		return nil, fmt.Errorf("cancellation %s: the signed document is erased: %w", documentID, query.ErrNoSignedDocument)
	}
	return plain, nil
}

// ListNeedingProvider returns the ids of up to limit cancellations (limit <= 0: all) that still
// need the signing provider (PREPARATION, PENDING, and CLOSED ones whose sealed PDF is not
// recorded yet), oldest first (by request, then id), starting after the cancellation afterID
// requested at afterRequestedAt (afterID "": from the oldest), and the request time of the last
// id it returns: with that id, where the next page starts. The connectors page through it to
// re-arm their cancellation processes (the worker's OpenCancellations). The position is two
// plain values, not a Position, so that the worker's port names no type of this package.
func (r Reader) ListNeedingProvider(ctx context.Context, afterRequestedAt time.Time, afterID string, limit int) (ids []string, lastRequestedAt time.Time, err error) {
	var after *Position
	if afterID != "" {
		after = &Position{RequestedAt: afterRequestedAt, DocumentID: afterID}
	}
	rows, err := r.store.ListNeedingProvider(ctx, after, limit)
	if err != nil {
		return nil, time.Time{}, err
	}
	ids, lastRequestedAt = readdb.PageIDs(rows, func(r Row) string { return r.DocumentID }, func(r Row) time.Time { return r.RequestedAt })
	return ids, lastRequestedAt, nil
}

// userCancellationsPage is how many of a user's cancellations UserCancellationIDs reads at once.
const userCancellationsPage = 500

// UserCancellationIDs returns the ids of every one of tenant's cancellations of userUUID, oldest
// first, final ones included: the cancellations a user's erasure withdraws, each that the event
// store shows live.
func (r Reader) UserCancellationIDs(ctx context.Context, tenant, userUUID string) ([]string, error) {
	var (
		ids   []string
		after *Position
	)
	for {
		rows, err := r.store.ListByUser(ctx, tenant, userUUID, after, userCancellationsPage)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if row.Tenant == tenant && row.UserUUID == userUUID {
				ids = append(ids, row.DocumentID)
			}
		}
		if len(rows) < userCancellationsPage {
			return ids, nil
		}
		last := rows[len(rows)-1]
		after = &Position{RequestedAt: last.RequestedAt, DocumentID: last.DocumentID}
	}
}

// get is tenant's row, or query.ErrNotFound.
func (r Reader) get(ctx context.Context, tenant, documentID string) (Row, error) {
	row, err := r.store.Get(ctx, tenant, documentID)
	if errors.Is(err, readdb.ErrNotFound) {
		return Row{}, fmt.Errorf("cancellation %s: %w", documentID, query.ErrNotFound)
	}
	if err != nil {
		return Row{}, err
	}
	return row, nil
}

// view is a row as the query side sees it.
func view(row Row) query.CancellationView {
	v := query.CancellationView{DocumentID: row.DocumentID, Tenant: row.Tenant, CollectionID: row.CollectionID,
		UserUUID: row.UserUUID, Company: row.Company, InsuranceID: row.InsuranceID, Status: row.Status,
		IsSignedAndSealed: row.IsSignedAndSealed, CreatedAt: row.RequestedAt, UpdatedAt: row.UpdatedAt}
	if !row.SignedAt.IsZero() {
		at := row.SignedAt
		v.SignedAt = &at
	}
	return v
}
