package collectionstatus

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/platform/shrink"
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
	evicted  func()       // counts evictions; nil: not counted
	now      func() int64 // Unix seconds; a test's clock in tests
}

type viewShard struct {
	mu   sync.RWMutex
	rows map[string]*viewSlot
	// removals counts the rows this shard dropped (evicted, swept, erased, forgotten). A fill
	// from the Store puts its row only if none was dropped since it read it: a row dropped in
	// between may have been newer (or erased), and the revision rule has nothing left to
	// compare against.
	removals uint64
	// peak is the most rows Sweep found since the map was last copied: a Go map keeps the
	// buckets of its largest size, so after a burst's rows are swept the shard copies its
	// rows into a new map (a 30 s POST load left ~1 MB of empty buckets behind).
	peak shrink.Peak
}

// shrinkShardFrom is the fewest rows a shard must have held for a sweep to copy it.
const shrinkShardFrom = 64

// viewSlot is one row of the view. Every change replaces the slot, so a pointer names one
// version of a row; only opened and verified change in place (under the shard's lock) and
// touched (atomically, under its read lock).
type viewSlot struct {
	viewEntry
	touched atomic.Int64 // Unix seconds of the last read or write
}

// viewEntry is a row and how far the view can vouch for it. A row the process wrote itself, or
// followed from the event stream revision by revision, is current (loaded 0). A row a follower
// read from the Store (Followed) may already be behind events the follower passed before it
// held the row: loaded says when it was read (Unix seconds), and it is read again once older
// than the follower's freshness bound, until an event confirms it. verified is when the row was
// last written, confirmed or read from the Store: a follower reads every row again once that is
// older than its bound, whatever it missed.
type viewEntry struct {
	row      Row
	loaded   int64
	verified int64
	// opened is row.Personal opened, once a poll has opened it: opening the sealed form (JSON,
	// AES-GCM, JSON again) was most of a poll's CPU for a status with a QR code. It lives and
	// dies with the slot: a new revision, an erasure or an eviction drops it, and the Reader
	// still asks the key store whether the subject was erased before it serves it.
	opened *collection.StatusPersonal
}

// viewShards spreads the lock over this many shards: the projector's writes and thousands of
// concurrent polls then rarely meet on one mutex.
const viewShards = 64

// DefaultViewCapacity is the row bound of the status view unless configured: about 1 KB each,
// so some hundreds of MB at most, for the collections of the last hours at a busy node.
const DefaultViewCapacity = 200_000

// NewView returns an empty view of at most capacity rows (at least one a shard).
func NewView(capacity int) *View {
	per := capacity / viewShards
	if per < 1 {
		per = 1
	}
	v := &View{seed: maphash.MakeSeed(), shards: make([]viewShard, viewShards), perShard: per,
		now: func() int64 { return time.Now().Unix() }}
	for i := range v.shards {
		v.shards[i].rows = make(map[string]*viewSlot)
		v.shards[i].peak.Floor = shrinkShardFrom
	}
	return v
}

// OnEvict sets a function called for every row dropped to make room (a metric); call it before
// the view is shared.
func (v *View) OnEvict(f func()) { v.evicted = f }

func (v *View) shard(id string) *viewShard {
	return &v.shards[maphash.String(v.seed, id)%viewShards]
}

// lookup returns the slot of id and a copy of its entry, touching it, and the shard's removals
// so far (for a fill that follows a miss).
func (v *View) lookup(id string) (slot *viewSlot, e viewEntry, removals uint64) {
	sh := v.shard(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	slot = sh.rows[id]
	if slot != nil {
		e = slot.viewEntry
		if now := v.now(); slot.touched.Load() != now {
			slot.touched.Store(now)
		}
	}
	return slot, e, sh.removals
}

// holds reports whether the view has a row for id, whoever's, current or not (without touching
// it), and the shard's removals so far (for a fill or refresh that follows).
func (v *View) holds(id string) (held bool, removals uint64) {
	sh := v.shard(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	_, held = sh.rows[id]
	return held, sh.removals
}

// setLocked puts e into sh as a new slot, touched now; sh.mu is held.
func (sh *viewShard) setLocked(e viewEntry, now int64) {
	slot := &viewSlot{viewEntry: e}
	slot.touched.Store(now)
	sh.rows[e.row.CollectionID] = slot
}

// removeLocked drops the row of id; sh.mu is held.
func (sh *viewShard) removeLocked(id string) {
	if _, ok := sh.rows[id]; ok {
		delete(sh.rows, id)
		sh.removals++
	}
}

// makeRoomLocked drops an arbitrary row when sh is full; sh.mu is held.
func (v *View) makeRoomLocked(sh *viewShard) {
	if len(sh.rows) < v.perShard {
		return
	}
	for id := range sh.rows {
		sh.removeLocked(id)
		if v.evicted != nil {
			v.evicted()
		}
		return
	}
}

// write remembers row as current, written by the process that writes the Store, unless the
// view holds the collection at the same or a later revision.
func (v *View) write(row Row) {
	sh := v.shard(row.CollectionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := v.now()
	if old, ok := sh.rows[row.CollectionID]; ok {
		if old.row.Revision >= row.Revision {
			return
		}
	} else {
		v.makeRoomLocked(sh)
	}
	sh.setLocked(viewEntry{row: row, verified: now}, now)
}

// fill remembers row, read from the Store after lookup returned removals, as current: the
// Store's row is current where the process writes every change through the view (Cached). It
// does nothing when the shard dropped a row since, or holds the collection at the same or a
// later revision.
func (v *View) fill(row Row, removals uint64) {
	sh := v.shard(row.CollectionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.removals != removals {
		return
	}
	if _, ok := sh.rows[row.CollectionID]; ok {
		return // written meanwhile: at the same revision or a later one
	}
	now := v.now()
	v.makeRoomLocked(sh)
	sh.setLocked(viewEntry{row: row, verified: now}, now)
}

// refresh takes row, which a follower read from the Store after lookup returned removals, and
// returns the entry to serve. The Store's row replaces an older one, unconfirmed (read now); at
// the same revision it is the truth (an erasure blanks a row's personal part at its revision)
// and keeps the entry's confirmation; an entry ahead of the Store (the follower is ahead of the
// projection) stays. Every case counts as verified now. A shard that dropped a row since the
// read keeps nothing new: the row may have been dropped for its user's erasure.
func (v *View) refresh(row Row, removals uint64) viewEntry {
	sh := v.shard(row.CollectionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := v.now()
	fresh := viewEntry{row: row, loaded: now, verified: now}
	old, ok := sh.rows[row.CollectionID]
	switch {
	case sh.removals != removals:
		return fresh
	case !ok:
		v.makeRoomLocked(sh)
	case old.row.Revision > row.Revision:
		old.verified = now
		return old.viewEntry
	case old.row.Revision == row.Revision:
		fresh.loaded = old.loaded
	}
	sh.setLocked(fresh, now)
	return fresh
}

// confirm replaces slot, which lookup returned, with next, current: the follower folded the
// event right after slot's revision into it. A slot replaced meanwhile (a re-read, an erasure)
// is left alone; the next event, or the next re-read, will do.
func (v *View) confirm(slot *viewSlot, next Row) {
	sh := v.shard(next.CollectionID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.rows[next.CollectionID] == slot {
		now := v.now()
		sh.setLocked(viewEntry{row: next, verified: now}, now)
	}
}

// unverify makes every row due to be read again from the Store by a follower: its consumer
// may have skipped events (a group rejoin starts a follower at the end of the stream).
func (v *View) unverify() {
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		for _, slot := range sh.rows {
			slot.verified = 0
		}
		sh.mu.Unlock()
	}
}

// openedPersonal returns the opened personal part of id's row at revision, if a poll kept it.
func (v *View) openedPersonal(id string, revision uint64) (collection.StatusPersonal, bool) {
	sh := v.shard(id)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	slot := sh.rows[id]
	if slot == nil || slot.opened == nil || slot.row.Revision != revision {
		return collection.StatusPersonal{}, false
	}
	return *slot.opened, true
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
	sh.removeLocked(id)
	sh.mu.Unlock()
}

// drop forgets the rows for which match is true. Every shard counts it as a removal, whether
// it held such a row or not: a fill in flight may have read one of them (before an erasure)
// and must not put it in.
func (v *View) drop(match func(Row) bool) {
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		for id, slot := range sh.rows {
			if match(slot.row) {
				delete(sh.rows, id)
			}
		}
		sh.removals++
		sh.mu.Unlock()
	}
}

// dropUser forgets the rows of tenant's user userUUID (its erasure); a collection of no user is
// never one of them.
func (v *View) dropUser(tenant, userUUID string) {
	if userUUID != "" {
		v.drop(func(r Row) bool { return r.Tenant == tenant && r.UserUUID == userUUID })
	}
}

// dropAll forgets every row.
func (v *View) dropAll() { v.drop(func(Row) bool { return true }) }

// Sweep drops the rows nobody read or wrote in the last idle, and returns how many. A row of a
// collection clients still poll is touched every poll and stays. A shard left with a quarter of
// the rows it held at its fullest sweep or fewer is copied into a map of its size.
func (v *View) Sweep(idle time.Duration) int {
	cutoff := v.now() - int64(idle/time.Second)
	n := 0
	for i := range v.shards {
		sh := &v.shards[i]
		sh.mu.Lock()
		sh.peak.Saw(len(sh.rows))
		for id, slot := range sh.rows {
			if slot.touched.Load() < cutoff {
				sh.removeLocked(id)
				n++
			}
		}
		if sh.peak.Due(len(sh.rows)) {
			sh.rows = shrink.Map(sh.rows)
			sh.peak.Reset(len(sh.rows))
		}
		sh.mu.Unlock()
	}
	return n
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

// Cached returns durable with view in front: a Store whose Get answers from memory when it
// can, and whose writes go to durable first and into the view once durable has them. Only a
// process that writes every status change through it (the one that runs the collection-status
// projection, alone in its consumer group) may use it: the view is kept current by those
// writes alone. The projector's own reads (GetMany) go to durable: the rows it folds onto are
// the durable ones, whatever the view holds.
func Cached(durable Store, view *View) Store { return &cachedStore{Store: durable, view: view} }

type cachedStore struct {
	Store
	view *View
}

// Get serves the poll: from the view without I/O, else from the Store, remembering the row.
func (c *cachedStore) Get(ctx context.Context, tenant, collectionID string) (Row, error) {
	slot, e, removals := c.view.lookup(collectionID)
	if slot != nil {
		if e.row.Tenant != tenant {
			return Row{}, readdb.ErrNotFound
		}
		return e.row, nil
	}
	row, err := c.Store.Get(ctx, tenant, collectionID)
	if err != nil {
		return Row{}, err
	}
	c.view.fill(row, removals)
	return row, nil
}

func (c *cachedStore) memory() *View { return c.view }

// remember keeps row, read from the event store after holds returned removals: as current, as
// a row read from the Store would be (fill).
func (c *cachedStore) remember(row Row, removals uint64) { c.view.fill(row, removals) }

// Upsert writes to the Store, then remembers the rows as the Store now holds them.
func (c *cachedStore) Upsert(ctx context.Context, rows []Row) error {
	if err := c.Store.Upsert(ctx, rows); err != nil {
		return err
	}
	for _, row := range rows {
		c.view.write(stored(row))
	}
	return nil
}

// ErasePersonal erases in the Store and forgets the user's rows, which the next read takes
// from the Store without their personal part.
func (c *cachedStore) ErasePersonal(ctx context.Context, tenant, userUUID string) error {
	if err := c.Store.ErasePersonal(ctx, tenant, userUUID); err != nil {
		return err
	}
	c.view.dropUser(tenant, userUUID)
	return nil
}

// Reset empties the Store and the view.
func (c *cachedStore) Reset(ctx context.Context) error {
	err := c.Store.Reset(ctx)
	c.view.dropAll()
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
