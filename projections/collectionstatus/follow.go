package collectionstatus

import (
	"context"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
)

// A query process that does not run the collection-status projection keeps its view current by
// following the event stream itself (Follower, fed by a Kafka consumer of its own that starts
// at the end and commits nothing) and reads what the view lacks from the read model
// (Followed). The read model stays the durable copy and the cold start; the view only ever
// holds a row at a revision the read model had, or one the follower folded on top of it event
// by event.

// DefaultFollowFreshness bounds how long a follower serves a non-final row it read from the
// read model before any event confirmed it: the row may predate events the follower passed
// before it held the row.
const DefaultFollowFreshness = time.Second

// DefaultFollowMaxAge bounds how long a follower serves any row, current or final, without
// reading it again from the read model: the backstop for whatever its consumer may have
// skipped (a rejoin of its group starts it at the end of the stream) or an erasure it missed.
const DefaultFollowMaxAge = 30 * time.Second

// Followed returns durable with view in front, for a query process whose view a Follower keeps
// current: Get answers from memory when the view can vouch for the row, else reads the Store
// and remembers the row as read at that time. Every other method is durable's.
func Followed(durable Store, view *View, freshness, maxAge time.Duration) Store {
	return &followedStore{Store: durable, view: view,
		freshness: int64(freshness / time.Second), maxAge: int64(maxAge / time.Second)}
}

type followedStore struct {
	Store
	view              *View
	freshness, maxAge int64 // seconds
}

// Get serves the poll.
func (f *followedStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	slot, e, removals := f.view.lookup(collectionID)
	if slot != nil && f.vouches(e) {
		if e.row.Tenant != tenant {
			return Row{}, readdb.ErrNotFound
		}
		return e.row, nil
	}
	row, err := f.Store.Get(ctx, tenant, collectionID)
	if err != nil {
		return Row{}, err
	}
	if held := f.view.refresh(row, removals); held.row.Tenant == tenant {
		return held.row, nil // the Store's row, or the follower's when it is ahead
	}
	return row, nil
}

// vouches tells whether e may be served without reading the Store: verified within the
// maximum age, and current, final (a final status no longer changes what the poll shows), or
// read from the Store within the freshness bound.
func (f *followedStore) vouches(e viewEntry) bool {
	now := f.view.now()
	if now-e.verified >= f.maxAge {
		return false
	}
	return e.loaded == 0 || collection.Status(e.row.Status).IsFinal() || now-e.loaded < f.freshness
}

func (f *followedStore) memory() *View { return f.view }

// remember keeps row, read from the event store after holds returned removals, for the follower
// to take from revision to revision, as a row read from the Store (refresh): the follower
// leaves the collections the view does not hold to their polls.
func (f *followedStore) remember(row Row, removals uint64) { f.view.refresh(row, removals) }

// Upsert, ErasePersonal and Reset are the projection's, never a query process's; should one
// be called here, the rows it touches are forgotten so that the view cannot contradict it.
func (f *followedStore) Upsert(ctx context.Context, rows []Row) error {
	err := f.Store.Upsert(ctx, rows)
	for _, r := range rows {
		f.view.forget(r.CollectionID)
	}
	return err
}

func (f *followedStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	err := f.Store.ErasePersonal(ctx, tenant, userUUID)
	f.view.dropUser(tenant, userUUID)
	return err
}

func (f *followedStore) Reset(ctx context.Context) error {
	err := f.Store.Reset(ctx)
	f.view.dropAll()
	return err
}

// Follower folds the event stream into a view. It is a projections.Projector by shape (Name,
// Handle) but writes nothing durable; its consumer must start at the end and commit nothing.
type Follower struct {
	view    *View
	fold    *Projector
	dropped func(reason string) // counts rows dropped on a gap or an unfoldable event; nil: not counted
}

// Follower drop reasons, for OnDrop.
const (
	DropGap        = "gap"        // the row missed revisions: it was read before events the follower passed
	DropUnfoldable = "unfoldable" // the event could not be decoded, opened or folded onto the row
)

// OnDrop sets f to be told of every row the follower drops and why (DropGap, DropUnfoldable):
// the next poll reads such a row from the read model again, so a steady count of unfoldable
// events means every poll of those collections pays for a read. Call it before the follower runs.
func (f *Follower) OnDrop(fn func(reason string)) { f.dropped = fn }

func (f *Follower) drop(id, reason string) {
	f.view.forget(id)
	if f.dropped != nil {
		f.dropped(reason)
	}
}

// NewFollower returns the follower of view, decoding with reg and sealing personal parts with
// keys as the projector does (the view's rows are the read model's, sealed alike).
func NewFollower(reg *eventschema.Registry, view *View, keys eventschema.Keys) *Follower {
	return &Follower{view: view, fold: NewProjector(reg, nil, keys)}
}

// Rejoined tells the follower that its consumer joined its group again and may have skipped
// events (a follower's group has no committed offsets: it starts at the end again): every row
// is read again from the read model at its next poll.
func (f *Follower) Rejoined() { f.view.unverify() }

// Name names the follower in logs and metrics; its consumer group is unique to the process.
func (f *Follower) Name() string { return "collection-status-view" }

// Categories are those the follower folds: collections, and users for their erasure.
func (f *Follower) Categories() []string { return f.fold.Categories() }

// Handle folds each event of a collection the view holds into its row when it is the row's
// next revision. A collection the view does not hold is left to the first poll, which reads it
// from the read model. A gap (the row is older than the event's predecessor: it was read from
// the read model after the follower had passed events of it) or an event that cannot be folded
// drops the row, which the next poll reads again. A user.deleted drops the user's rows: the
// read model has their personal parts erased, or soon will. Handle never fails: the view is a
// cache, and the read model behind it has the truth.
func (f *Follower) Handle(ctx context.Context, batch []eventschema.Envelope) error {
	for _, env := range batch {
		if user, ok := readdb.DeletedUser(env); ok {
			f.view.dropUser(env.Tenant, user)
			continue
		}
		id, ok := foldKey(env)
		if !ok {
			continue
		}
		slot, e, _ := f.view.lookup(id)
		if slot == nil || env.Revision <= e.row.Revision {
			continue
		}
		if env.Revision != e.row.Revision+1 {
			f.drop(id, DropGap)
			continue
		}
		next, changed, err := f.fold.foldSealed(ctx, id, e.row, true, env)
		switch {
		case err != nil:
			f.drop(id, DropUnfoldable)
			continue
		case !changed:
			f.view.forget(id)
			continue
		}
		f.view.confirm(slot, stored(next))
	}
	return nil
}
