package collectionstatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/query"
)

// Reader serves the read model to its consumers through the ports they declare: the status
// endpoint's query.StatusReader, the command side's httpcmd.CollectionUsers (satisfied by
// CollectionUser's shape), and the connectors' list of collections still running (the worker's
// ActiveCollections, satisfied by ListNonFinal's shape). Neither the command side nor the worker
// is imported, as an adapter depends on the ports it serves and never on their consumers' code.
type Reader struct {
	store Store
	keys  eventschema.Keys
	// events, when set, answers for a collection the read model does not show yet.
	events *eventFallback
}

// StreamSource reads one collection's events from the event store, oldest first, sealed as
// stored: none, and no error, for a collection the store does not know.
type StreamSource func(ctx context.Context, collectionID string) ([]eventschema.Envelope, error)

// eventFallback folds a collection's events as the projector would, without writing anything.
type eventFallback struct {
	source StreamSource
	fold   *Projector
	now    func() time.Time
}

// youngFor is how long after its creation a collection's id counts as young: its status is
// then read from the event store when the status view does not hold it, without asking the
// read model first. A poll right after the 201 looked in the read model before the event
// store, and on ClickHouse that miss alone took tens of milliseconds (201 → visible p99 98 ms
// against 2-8 ms on SQLite). The projection writes a new collection within milliseconds of
// its 201, so a young id the view lacks is one the read model most likely lacks too; the event
// store has every collection, so its answer, 404 included, is as good as the read model's.
const youngFor = time.Minute

var _ query.StatusReader = Reader{}

// NewReader returns the reader over store, opening the rows' personal parts with keys.
func NewReader(store Store, keys eventschema.Keys) Reader { return Reader{store: store, keys: keys} }

// WithEventStore returns the reader with read-your-writes: a collection the read model does not
// show yet (the projection runs a few milliseconds behind the command's 201) is folded from its
// events in source, decoded with reg, so that a poll right after the 201 never answers 404. A
// 404 then means the collection does not exist, or is another tenant's. Only ids the read model
// lacks reach the event store, and the result is not written anywhere: the projection stays
// the only writer of the read model.
func (r Reader) WithEventStore(reg *eventschema.Registry, source StreamSource) Reader {
	r.events = &eventFallback{source: source, fold: NewProjector(reg, nil, r.keys), now: time.Now}
	return r
}

// young reports whether id is a time-ordered (version 7) UUID minted within youngFor of now
// (either side: the clocks of the command and query processes may differ). Ids made from an
// Idempotency-Key (version 5) carry no time and are never young.
func (f *eventFallback) young(id string) bool {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return false
	}
	age := f.now().Sub(time.Unix(u.Time().UnixTime()))
	return -youngFor < age && age < youngFor
}

// Get implements query.StatusReader: a collection the tenant cannot see is query.ErrNotFound.
func (r Reader) Get(ctx context.Context, tenant, collectionID string) (query.StatusView, error) {
	row, err := r.row(ctx, tenant, collectionID)
	if errors.Is(err, readdb.ErrNotFound) {
		return query.StatusView{}, fmt.Errorf("collection %s: %w", collectionID, query.ErrNotFound)
	}
	if err != nil {
		return query.StatusView{}, err
	}
	view := statusView(row)
	// Only a status that carries instructions or a QR secret has a personal part: the other
	// polls decrypt nothing, and a row in the status view is opened once, not at every poll.
	personal, err := r.openPersonal(ctx, row)
	if err != nil {
		// A lost key store must be loud, never an empty status (erased is no error).
		return query.StatusView{}, fmt.Errorf("collection status %s: %w", collectionID, err)
	}
	view.QRStartSecret = personal.QRStartSecret
	for _, in := range personal.Instructions {
		view.Instructions = append(view.Instructions, query.InstructionView{
			RequestID: in.RequestID, Method: in.Method, URL: in.URL, Headers: in.Headers, Body: in.Body})
	}
	return view, nil
}

// row is the collection's row: for a young id (eventFallback.young) the status view holds no
// row of, from the event store, remembered in the view as a read of the read model would be
// (later polls, and a follower, take it from there); else through the store (the view, and the
// read model when the view cannot answer), and from the event store when the read model lacks
// it. A row the view holds but no longer vouches for (a follower's, past its bounds) goes
// through the store like any other, so that the read refreshes it in the view.
func (r Reader) row(ctx context.Context, tenant, collectionID string) (Row, error) {
	if r.events != nil && r.events.young(collectionID) {
		if v, ok := r.store.(viewed); ok {
			if held, removals := v.memory().holds(collectionID); !held {
				row, err := r.events.row(ctx, tenant, collectionID)
				switch {
				case err == nil:
					v.remember(row, removals)
					return row, nil
				case errors.Is(err, readdb.ErrNotFound):
					return Row{}, err
				}
				// The event store failing is no reason to fail a poll the read model can answer.
			}
		}
	}
	row, err := r.store.Get(ctx, tenant, collectionID)
	if errors.Is(err, readdb.ErrNotFound) && r.events != nil {
		row, err = r.events.row(ctx, tenant, collectionID)
	}
	return row, err
}

// viewed is a Store with the status view in front (Cached, Followed).
type viewed interface {
	memory() *View
	// remember keeps a row read from the event store after the view's holds returned removals.
	remember(row Row, removals uint64)
}

// openPersonal opens row's personal part, or takes it from the status view, which keeps what
// it opened while it holds the row at that revision.
func (r Reader) openPersonal(ctx context.Context, row Row) (collection.StatusPersonal, error) {
	if len(row.Personal) == 0 {
		return collection.StatusPersonal{}, nil
	}
	v, inView := r.store.(viewed)
	if inView {
		if p, ok := v.memory().openedPersonal(row.CollectionID, row.Revision); ok {
			// The subject's key decides, as it does for the sealed form: once it is destroyed
			// (an erasure), what the view kept is not served either (the key store caches
			// erasures, so this is a map lookup).
			_, err := r.keys.Get(ctx, collection.DataSubject(row.CollectionID, row.UserUUID))
			switch {
			case errors.Is(err, eventschema.ErrSubjectErased):
				return collection.StatusPersonal{}, nil
			case err == nil:
				return p, nil
			}
		}
	}
	personal, erased, err := OpenPersonal(ctx, r.keys, row.Personal)
	if err != nil || erased {
		return personal, err // erased: nothing to keep, the erasure drops the row
	}
	if inView {
		v.memory().keepOpenedPersonal(row.CollectionID, row.Revision, personal)
	}
	return personal, nil
}

// CollectionUser tells whose the tenant's collection is: the user it was started for, "" for
// none; found is false for a collection the tenant cannot see. It is the port the command side's
// session check of supplement-info declares (httpcmd.CollectionUsers, restated in statustest:
// a projection does not import the command side). It reads the row on every call and opens
// nothing; with the event store (WithEventStore), a collection the read model does not show yet
// is found there, as the status poll finds it.
func (r Reader) CollectionUser(ctx context.Context, tenant, collectionID string) (userUUID string, found bool, err error) {
	row, err := r.store.Get(ctx, tenant, collectionID)
	if errors.Is(err, readdb.ErrNotFound) && r.events != nil {
		row, err = r.events.row(ctx, tenant, collectionID)
	}
	switch {
	case errors.Is(err, readdb.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("whose is collection %s: %w", collectionID, err)
	case row.Tenant != tenant:
		return "", false, nil // a store that forgot the tenant must not leak another client's
	}
	return row.UserUUID, true, nil
}

// ListNonFinal returns the ids of up to limit collections (limit <= 0: all) that have not
// reached a final status, oldest first (by creation, then id), starting after the collection
// afterID created at afterCreatedAt (afterID "": from the oldest), and the creation time of the
// last id it returns: with that id, where the next page starts. The connectors page through it
// to re-arm their sessions (the worker's ActiveCollections). The position is two plain values,
// not a NonFinalPosition, so that the worker's port names no type of this package.
func (r Reader) ListNonFinal(ctx context.Context, afterCreatedAt time.Time, afterID string, limit int) (ids []string, lastCreatedAt time.Time, err error) {
	var after *NonFinalPosition
	if afterID != "" {
		after = &NonFinalPosition{CreatedAt: afterCreatedAt, CollectionID: afterID}
	}
	rows, err := r.store.ListNonFinal(ctx, after, limit)
	if err != nil {
		return nil, time.Time{}, err
	}
	ids, lastCreatedAt = readdb.PageIDs(rows, func(r Row) string { return r.CollectionID }, func(r Row) time.Time { return r.CreatedAt })
	return ids, lastCreatedAt, nil
}

func statusView(row Row) query.StatusView {
	view := query.StatusView{
		CollectionID: row.CollectionID, Tenant: row.Tenant, Company: row.Company, Product: row.Product,
		LoginMethod: row.LoginMethod, APIVersion: row.APIVersion, UserUUID: row.UserUUID, Status: row.Status,
		ExtraInformation: row.ExtraInformation, RequiredInputTypes: row.RequiredInputTypes, Message: row.Message,
		CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt,
	}
	if o := row.EIDOrder; o != nil {
		view.EIDOrder = &query.EIDOrderView{QRStartToken: o.QRStartToken, AutoStartToken: o.AutoStartToken, StartedAt: o.StartedAt}
	}
	return view
}

// row folds the collection's events into the row the projector would write, or
// readdb.ErrNotFound when the store has none or they are another tenant's.
func (f *eventFallback) row(ctx context.Context, tenant, collectionID string) (Row, error) {
	events, err := f.source(ctx, collectionID)
	if err != nil {
		return Row{}, fmt.Errorf("collection %s from the event store: %w", collectionID, err)
	}
	// Another client's collection is not found before anything of it is opened: its events'
	// personal parts (and whether they open at all) are none of this client's business.
	if len(events) > 0 && events[0].Tenant != "" && events[0].Tenant != tenant {
		return Row{}, readdb.ErrNotFound
	}
	var (
		row    Row
		exists bool
	)
	for _, env := range events {
		next, changed, err := f.fold.foldSealed(ctx, collectionID, row, exists, env)
		if err != nil {
			return Row{}, fmt.Errorf("collection %s from the event store: %w", collectionID, err)
		}
		if changed {
			row, exists = next, true
		}
	}
	if !exists || row.Tenant != tenant {
		return Row{}, readdb.ErrNotFound
	}
	return stored(row), nil
}
