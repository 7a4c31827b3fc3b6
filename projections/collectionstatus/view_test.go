package collectionstatus_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/collectionstatus/statustest"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// The view in front of the SQLite store passes the whole contract: the poll cannot tell it
// from the store, whether its row came from the projector's write or from a miss.
func TestCachedSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, func(ctx context.Context, db *sql.DB) (collectionstatus.Store, error) {
		s, err := collectionstatus.NewSQLite(ctx, db)
		if err != nil {
			return nil, err
		}
		return collectionstatus.Cached(s, collectionstatus.NewView(1000)), nil
	}, statustest.Run)
}

// A view of one row a shard, which drops rows all the time, still passes it: a dropped row is
// read back from the store.
func TestCachedSQLiteStoreEvicting(t *testing.T) {
	readdbtest.RunSQLite(t, func(ctx context.Context, db *sql.DB) (collectionstatus.Store, error) {
		s, err := collectionstatus.NewSQLite(ctx, db)
		if err != nil {
			return nil, err
		}
		return collectionstatus.Cached(s, collectionstatus.NewView(0)), nil
	}, statustest.Run)
}

// countingStore counts the reads that reach the durable store.
type countingStore struct {
	collectionstatus.Store
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, tenant, id string) (collectionstatus.Row, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, tenant, id)
}

func sqliteStore(t *testing.T) collectionstatus.Store {
	t.Helper()
	s, err := collectionstatus.NewSQLite(context.Background(), readdbtest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func viewRow(id, tenant, status string, rev uint64) collectionstatus.Row {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	return collectionstatus.Row{CollectionID: id, Tenant: tenant, Company: "se-demo-insurer", Product: "INSURANCE",
		Status: status, CreatedAt: at, UpdatedAt: at.Add(time.Duration(rev) * time.Second), Revision: rev}
}

// A polled row the projector wrote is answered from memory: no read reaches the store, also
// not for another tenant, who gets the store's not-found.
func TestViewAnswersPollsWithoutTheStore(t *testing.T) {
	ctx := context.Background()
	durable := &countingStore{Store: sqliteStore(t)}
	s := collectionstatus.Cached(durable, collectionstatus.NewView(100))
	if err := s.Upsert(ctx, []collectionstatus.Row{viewRow("c-1", "acme", "RUNNING", 0)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if row, err := s.Get(ctx, "acme", "c-1"); err != nil || row.Status != "RUNNING" {
			t.Fatalf("Get = %v, %v", row.Status, err)
		}
	}
	if _, err := s.Get(ctx, "other", "c-1"); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("another tenant's Get = %v, want readdb.ErrNotFound", err)
	}
	if n := durable.gets.Load(); n != 0 {
		t.Fatalf("%d polls reached the store", n)
	}
	// A cold row is read once, then served from memory.
	if err := durable.Store.Upsert(ctx, []collectionstatus.Row{viewRow("c-cold", "acme", "LOGIN", 2)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if row, err := s.Get(ctx, "acme", "c-cold"); err != nil || row.Status != "LOGIN" {
			t.Fatalf("Get cold = %v, %v", row.Status, err)
		}
	}
	if n := durable.gets.Load(); n != 1 {
		t.Fatalf("%d reads of a cold row, want 1", n)
	}
}

// The view never holds more than its capacity, and says how many it dropped.
func TestViewIsBounded(t *testing.T) {
	ctx := context.Background()
	view := collectionstatus.NewView(640)
	var evicted atomic.Int64
	view.OnEvict(func() { evicted.Add(1) })
	s := collectionstatus.Cached(sqliteStore(t), view)
	rows := make([]collectionstatus.Row, 0, 5000)
	for i := 0; i < 5000; i++ {
		rows = append(rows, viewRow(fmt.Sprintf("c-%d", i), "acme", "RUNNING", 0))
	}
	if err := s.Upsert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if n := view.Len(); n > 640 || n < 320 {
		t.Fatalf("view holds %d rows, want at most its capacity of 640 (and not empty)", n)
	}
	if got := evicted.Load(); got != int64(5000-view.Len()) {
		t.Fatalf("%d evictions counted, %d rows dropped", got, 5000-view.Len())
	}
	// Every row is still answered: from memory or the store.
	for _, r := range rows[:200] {
		if _, err := s.Get(ctx, "acme", r.CollectionID); err != nil {
			t.Fatalf("Get %s after eviction: %v", r.CollectionID, err)
		}
	}
}

// The projector's writes and the polls' fills race; whatever the interleaving, the view ends
// at the store's latest revision, never an older one.
func TestViewNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	durable := sqliteStore(t)
	for round := 0; round < 20; round++ {
		view := collectionstatus.NewView(1000)
		s := collectionstatus.Cached(durable, view)
		id := fmt.Sprintf("c-race-%d", round)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for rev := uint64(0); rev < 30; rev++ {
				if err := s.Upsert(ctx, []collectionstatus.Row{viewRow(id, "acme", fmt.Sprintf("S%d", rev), rev)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 60; i++ {
				// A fresh view each time forces fills from the store that race the writes.
				_, _ = collectionstatus.Cached(durable, view).Get(ctx, "acme", id)
			}
		}()
		wg.Wait()
		row, err := s.Get(ctx, "acme", id)
		if err != nil || row.Revision != 29 || row.Status != "S29" {
			t.Fatalf("round %d: view ends at %s/%d, %v; want S29/29", round, row.Status, row.Revision, err)
		}
	}
}

// Erasing a user's personal parts drops that user's rows from the view: the next poll reads
// them from the store, erased.
func TestViewForgetsErasedUsers(t *testing.T) {
	ctx := context.Background()
	durable := &countingStore{Store: sqliteStore(t)}
	// Room for both rows in any shard: with one row a shard (a view of 100 in 64 shards) the two
	// collided once in 64 runs, and the fill of the erased row evicted the other.
	s := collectionstatus.Cached(durable, collectionstatus.NewView(1000))
	mine := viewRow("c-mine", "acme", "WAITING_FOR_USER_ACTION", 1)
	mine.UserUUID, mine.Personal = "u-1", []byte("sealed")
	theirs := viewRow("c-theirs", "acme", "RUNNING", 1)
	theirs.UserUUID = "u-2"
	if err := s.Upsert(ctx, []collectionstatus.Row{mine, theirs}); err != nil {
		t.Fatal(err)
	}
	if err := s.ErasePersonal(ctx, "acme", "u-1"); err != nil {
		t.Fatal(err)
	}
	row, err := s.Get(ctx, "acme", "c-mine")
	if err != nil || row.Personal != nil {
		t.Fatalf("erased user's row = %q, %v; want no personal part", row.Personal, err)
	}
	if _, err := s.Get(ctx, "acme", "c-theirs"); err != nil {
		t.Fatal(err)
	}
	if n := durable.gets.Load(); n != 1 {
		t.Fatalf("%d store reads, want 1 (the erased row only)", n)
	}
}

// The view keeps what a poll opened of a row's personal part (the QR secret) only while it
// holds that row: the erasure that follows the key's destruction takes it away with the row.
func TestViewForgetsOpenedPersonalPartsOnErasure(t *testing.T) {
	ctx := context.Background()
	keys := keystore.NewMemory()
	s := collectionstatus.Cached(sqliteStore(t), collectionstatus.NewView(100))
	row := viewRow("c-qr", "acme", "WAITING_FOR_USER_ACTION", 2)
	row.UserUUID = "u-qr"
	plain, _ := json.Marshal(collection.StatusPersonal{QRStartSecret: "secret"})
	sealed, err := eventschema.Seal(ctx, keys, collection.DataSubject(row.CollectionID, row.UserUUID), plain)
	if err != nil {
		t.Fatal(err)
	}
	row.Personal = sealed
	if err := s.Upsert(ctx, []collectionstatus.Row{row}); err != nil {
		t.Fatal(err)
	}
	reader := collectionstatus.NewReader(s, keys)
	for i := 0; i < 2; i++ { // opened, then kept
		if v, err := reader.Get(ctx, "acme", "c-qr"); err != nil || v.QRStartSecret != "secret" {
			t.Fatalf("poll %d: %q, %v", i, v.QRStartSecret, err)
		}
	}
	if err := keys.Destroy(ctx, collection.DataSubject(row.CollectionID, row.UserUUID)); err != nil {
		t.Fatal(err)
	}
	if err := s.ErasePersonal(ctx, "acme", "u-qr"); err != nil {
		t.Fatal(err)
	}
	if v, err := reader.Get(ctx, "acme", "c-qr"); err != nil || v.QRStartSecret != "" {
		t.Fatalf("after the erasure: %q, %v; want no secret", v.QRStartSecret, err)
	}
}

// Sweep drops the rows nobody polled for a while (a burst of collections that ended) and keeps
// the ones clients still poll; a dropped row is read from the store again on its next poll.
// sweepFixture is a view of capacity rows on a clock of its own, in front of a counting SQLite
// store, holding n COMPLETED rows c-0..c-(n-1) of tenant acme.
func sweepFixture(t *testing.T, capacity, n int) (*collectionstatus.View, *atomic.Int64, *countingStore, collectionstatus.Store) {
	t.Helper()
	view := collectionstatus.NewView(capacity)
	clock := new(atomic.Int64)
	clock.Store(1_000_000)
	collectionstatus.SetViewClock(view, clock.Load)
	durable := &countingStore{Store: sqliteStore(t)}
	s := collectionstatus.Cached(durable, view)
	var rows []collectionstatus.Row
	for i := 0; i < n; i++ {
		rows = append(rows, viewRow(fmt.Sprintf("c-%d", i), "acme", "COMPLETED", 3))
	}
	if err := s.Upsert(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	return view, clock, durable, s
}

// A sweep that leaves a shard with a quarter of its rows or fewer copies the shard's map (Go
// maps keep the buckets of their largest size), and the rows left are still served from memory.
func TestViewSweepCopiesDrainedShards(t *testing.T) {
	ctx := context.Background()
	view, clock, durable, s := sweepFixture(t, 100_000, 10_000)
	clock.Add(120)
	for i := 0; i < 100; i++ { // polled: kept by the sweep
		if _, err := s.Get(ctx, "acme", fmt.Sprintf("c-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := view.Sweep(time.Minute); n != 9_900 {
		t.Fatalf("swept %d rows, want 9900", n)
	}
	left, peaks := collectionstatus.ShardSizes(view)
	for i := range left {
		if peaks[i] != left[i] {
			t.Fatalf("shard %d: %d rows left of a peak of %d, want its map copied (the peak reset)", i, left[i], peaks[i])
		}
	}
	before := durable.gets.Load()
	for i := 0; i < 100; i++ {
		if row, err := s.Get(ctx, "acme", fmt.Sprintf("c-%d", i)); err != nil || row.Status != "COMPLETED" {
			t.Fatalf("c-%d after the copy: %v, %v", i, row.Status, err)
		}
	}
	if got := durable.gets.Load() - before; got != 0 {
		t.Fatalf("%d reads of the store for rows the view kept, want none", got)
	}
}

func TestViewSweepsIdleRows(t *testing.T) {
	ctx := context.Background()
	view, clock, durable, s := sweepFixture(t, 1000, 100)
	for tick := 0; tick < 3; tick++ { // c-0 is polled every minute, the others never again
		clock.Add(60)
		if _, err := s.Get(ctx, "acme", "c-0"); err != nil {
			t.Fatal(err)
		}
	}
	if n := view.Sweep(2 * time.Minute); n != 99 || view.Len() != 1 {
		t.Fatalf("swept %d, %d left; want the 99 idle rows swept and the polled one kept", n, view.Len())
	}
	before := durable.gets.Load()
	if row, err := s.Get(ctx, "acme", "c-7"); err != nil || row.Status != "COMPLETED" || durable.gets.Load() != before+1 {
		t.Fatalf("a swept row = %v, %v after %d reads; want it read again", row.Status, err, durable.gets.Load()-before)
	}
}
