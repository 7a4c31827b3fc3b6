package collectionstatus

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/projections/readdb"
)

// View is the status read model in memory: the rows of the collections clients poll, so that
// the poll (the product's hottest path) reads a map instead of a database. It is a cache of
// the durable Store, never the other way round: a row enters it only once the Store holds it
// (Cached writes through, then remembers), so losing the view loses nothing, and a cold start
// fills it from the Store one miss at a time.
//
// It holds at most its capacity of rows. A full shard drops a row to take a new one (map
// iteration order: an arbitrary row, which on a miss is read back from the Store), and Sweep
// drops the rows nobody read or wrote for a while, so that the view shrinks back to what
// clients poll once a burst of collections has ended.
type View struct {
	seed     maphash.Seed
	shards   []viewShard
	perShard int
	evicted  func() // counts evictions; nil: not counted
	now      func() int64 // Unix seconds; a test's clock in tests
}

type viewShard struct {
	mu   sync.RWMutex
	rows map[string]*viewSlot
}

// viewSlot is an entry and when it was last read or written (Unix seconds), which a poll
// updates under the shard's read lock.
type viewSlot struct {
	viewEntry
	touched atomic.Int64
}

// viewEntry is a row and whether the view can vouch for it. A row the process wrote itself, or
// followed from the event stream revision by revision, is current (loaded zero). A row a
// follower read from the Store (Followed) may already be behind events the follower passed
// before it held the row: loaded says when it was read, and it is read again once older than
// the follower's freshness bound, until an event confirms it.
type viewEntry struct {
	row    Row
	loaded time.Time
	// opened is row.Personal opened, once a poll has opened it: opening the sealed form (JSON,
	// AES-GCM, JSON again) was most of a poll's CPU for a status with a QR code. It lives and
	// dies with the entry: a new revision, an erasure or an eviction drops it.
	opened *collection.StatusPersonal
}

// viewShards spreads the lock over this many shards: the projector's writes and thousands of
// concurrent polls then rarely meet on one mutex.
const viewShards = 64

// DefaultViewCapacity is the row bound of the status view unless configured: about 1 KB each,
// so some hundreds of MB at most, for the collections of the last hours at a busy node.
const DefaultViewCapacity = 200_000

// NewView returns an empty view of at most capacity rows (capacity < viewShards: one row a
// shard).
func NewView(capacity int) *View {
	per := capacity / viewShards
	if per < 1 {
		per = 1
	}
	v := &View{seed: maphash.MakeSeed(), shards: make([]viewShard, viewShards), perShard: per,
		now: func() int64 { return time.Now().Unix() }}
	for i := range v.shards {
		v.shards[i].rows = make(map[string]*viewSlot)
	}
	return v
}

// OnEvict sets a function called for every row dropped to make room (a metric); call it before
// the view is shared.
func (v *View) OnEvict(f func()) { v.evicted = f }

func (v *View) shard(id string) *viewShard {
	return &v.shards[maphash.String(v.seed, id)%viewShards]
}

// get returns the row of id, whatever its tenant.
func (v *View) get(id string) (Row, bool) {
	e, ok := v.entry(id)
	return e.row, ok
}

func (v *View) entry(id string) (viewEntry, bool) {
	sh := v.shard(id)
	sh.mu.RLock()
	slot, ok := sh.rows[id]
	var e viewEntry
	if ok {
		e = slot.viewEntry
		if now := v.now(); slot.touched.Load() != now {
			slot.touched.Store(now)
		}
	}
	sh.mu.RUnlock()
	return e, ok
}

// set puts e into sh, touched now; sh.mu is held.
func (sh *viewShard) set(e viewEntry, now int64) {
	slot := &viewSlot{viewEntry: e}
	slot.touched.Store(now)
	sh.rows[e.row.CollectionID] = slot
}

// Sweep drops the rows nobody read or wrote in the last idle, and returns how many. A row of a
// collection clients still poll is touched every poll and stays.
func (v *View) Sweep(idle time.Duration) int {
	cutoff := v.now() - int64(idle/time.Second)
	n := 0
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		for id, slot := range sh.rows {
			if slot.touched.Load() < cutoff {
				delete(sh.rows, id)
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// put remembers row as current unless the view holds the same collection at the same or a
// later revision: the projector's write and a poll's fill from the Store may race, and the
// older of the two must never win.
func (v *View) put(row Row) { v.store(viewEntry{row: row}, false) }

// store remembers e under the revision rule of put; with replaceEqual, an entry of the same
// revision takes e's loaded time (a follower's re-read refreshes it, a confirmation clears it).
// It returns the entry the view holds afterwards.
func (v *View) store(e viewEntry, replaceEqual bool) viewEntry {
	row := e.row
	sh := v.shard(row.CollectionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if slot, ok := sh.rows[row.CollectionID]; ok {
		old := slot.viewEntry
		if old.row.Revision > row.Revision || (old.row.Revision == row.Revision && !replaceEqual) {
			return old
		}
		if old.row.Revision == row.Revision && old.loaded.IsZero() {
			return old // current already: a re-read cannot make it less so
		}
	} else if len(sh.rows) >= v.perShard {
		for id := range sh.rows {
			delete(sh.rows, id)
			if v.evicted != nil {
				v.evicted()
			}
			break
		}
	}
	sh.set(e, v.now())
	return e
}

// confirm replaces the row of id, which the view holds at revision from, with next, current:
// the follower folded the event right after from into it. A row that moved meanwhile (a
// re-read) is left alone; the next event will do.
func (v *View) confirm(from uint64, next Row) {
	sh := v.shard(next.CollectionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.rows[next.CollectionID]; ok && old.row.Revision == from {
		sh.set(viewEntry{row: next}, v.now())
	}
}

// openedPersonal returns the opened personal part of id's row at revision, if a poll kept it.
func (v *View) openedPersonal(id string, revision uint64) (collection.StatusPersonal, bool) {
	e, ok := v.entry(id)
	if !ok || e.opened == nil || e.row.Revision != revision {
		return collection.StatusPersonal{}, false
	}
	return *e.opened, true
}

// keepOpenedPersonal keeps p as the opened personal part of id's row while the view holds the
// row at revision.
func (v *View) keepOpenedPersonal(id string, revision uint64, p collection.StatusPersonal) {
	sh := v.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if slot, ok := sh.rows[id]; ok && slot.row.Revision == revision && len(slot.row.Personal) > 0 {
		slot.opened = &p
	}
}

// forget drops the row of id.
func (v *View) forget(id string) {
	sh := v.shard(id)
	sh.mu.Lock()
	delete(sh.rows, id)
	sh.mu.Unlock()
}

// drop forgets the rows for which match is true.
func (v *View) drop(match func(Row) bool) {
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		for id, slot := range sh.rows {
			if match(slot.row) {
				delete(sh.rows, id)
			}
		}
		sh.mu.Unlock()
	}
}

// Len is how many rows the view holds.
func (v *View) Len() int {
	n := 0
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.RLock()
		n += len(sh.rows)
		sh.mu.RUnlock()
	}
	return n
}

// Cached returns durable with view in front: a Store whose Get and GetMany answer from memory
// when they can, and whose writes go to durable first and into the view once durable has them.
// Only a process that writes every status change through it (the one that runs the
// collection-status projection) may use it: the view is kept current by those writes alone.
func Cached(durable Store, view *View) Store { return &cachedStore{Store: durable, view: view} }

type cachedStore struct {
	Store
	view *View
}

// Get serves the poll: from the view without I/O, else from the Store, remembering the row.
func (c *cachedStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	if row, ok := c.view.get(collectionID); ok {
		if row.Tenant != tenant {
			return Row{}, readdb.ErrNotFound
		}
		return row, nil
	}
	row, err := c.Store.Get(ctx, tenant, collectionID)
	if err != nil {
		return Row{}, err
	}
	c.view.put(row)
	return row, nil
}

// GetMany serves the projector: the rows the view holds, the others from the Store.
func (c *cachedStore) GetMany(ctx context.Context, ids []string) (map[string]Row, error) {
	out := make(map[string]Row, len(ids))
	var missing []string
	for _, id := range ids {
		if row, ok := c.view.get(id); ok {
			out[id] = row
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	stored, err := c.Store.GetMany(ctx, missing)
	if err != nil {
		return nil, err
	}
	for id, row := range stored {
		out[id] = row
		c.view.put(row)
	}
	return out, nil
}

func (c *cachedStore) memory() *View { return c.view }

// Upsert writes to the Store, then remembers the rows as the Store now holds them.
func (c *cachedStore) Upsert(ctx context.Context, rows []Row) error {
	if err := c.Store.Upsert(ctx, rows); err != nil {
		return err
	}
	for _, row := range rows {
		c.view.put(stored(row))
	}
	return nil
}

// ErasePersonal erases in the Store and forgets the user's rows, which the next read takes
// from the Store without their personal part.
func (c *cachedStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if err := c.Store.ErasePersonal(ctx, tenant, userUUID); err != nil {
		return err
	}
	if userUUID != "" {
		c.view.drop(func(r Row) bool { return r.Tenant == tenant && r.UserUUID == userUUID })
	}
	return nil
}

// Reset empties the Store and the view.
func (c *cachedStore) Reset(ctx context.Context) error {
	err := c.Store.Reset(ctx)
	c.view.drop(func(Row) bool { return true })
	return err
}

// stored is row as the adapters give it back: timestamps at millisecond precision in UTC, an
// empty list as nil, the EID order's and deadline's times in UTC. The view must answer exactly
// what the Store would, or a poll would change its answer when its row was evicted.
func stored(row Row) Row {
	row.CreatedAt = row.CreatedAt.UTC().Truncate(time.Millisecond)
	row.UpdatedAt = row.UpdatedAt.UTC().Truncate(time.Millisecond)
	row.RequiredInputTypes = nilIfEmpty(row.RequiredInputTypes)
	if len(row.Personal) == 0 {
		row.Personal = nil
	}
	if row.EIDOrder != nil {
		order := *row.EIDOrder
		order.StartedAt = order.StartedAt.UTC()
		row.EIDOrder = &order
	}
	if row.Deadline != nil {
		deadline := *row.Deadline
		deadline.DueAt = deadline.DueAt.UTC()
		row.Deadline = &deadline
	}
	return row
}
