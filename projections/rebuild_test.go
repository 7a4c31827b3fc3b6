package projections_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/platform/keystore"
	"github.com/samla/samla/projections"
	"github.com/samla/samla/projections/collectionstatus"
	"github.com/samla/samla/projections/internal/eventlog"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

// pagedReader serves the log and calls during(page) before it returns each page, while the
// rebuild is under way.
type pagedReader struct {
	log    *eventlog.Log
	pages  int
	during func(page int) error
}

func (r *pagedReader) ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	r.pages++
	if r.during != nil {
		if err := r.during(r.pages); err != nil {
			return nil, err
		}
	}
	return r.log.ReadAll(ctx, after, limit)
}

// servedModel is a read model that the rebuild must replace, or keep when it fails: the
// world's models plus a row no event produced, which only the old model holds.
func servedModel(t *testing.T, m *projections.ReadModels, log *eventlog.Log) world {
	t.Helper()
	w := buildWorld(log, 300)
	if _, err := projections.Rebuild(testCtx(t), log, m); err != nil {
		t.Fatalf("first rebuild: %v", err)
	}
	// Finished, so that it stays out of the running collections verify lists.
	junk := collectionstatus.Row{CollectionID: "c-old-only", Tenant: "acme", Status: "COMPLETED", Revision: 99}
	if err := m.Status.Upsert(testCtx(t), []collectionstatus.Row{junk}); err != nil {
		t.Fatal(err)
	}
	return w
}

// holdsOldRow tells whether m serves the row only the old model has. It does not stop the
// test, so that the rebuild's goroutines may call it.
func holdsOldRow(t *testing.T, m *projections.ReadModels) bool {
	t.Helper()
	_, err := m.Status.Get(testCtx(t), "acme", "c-old-only")
	if err != nil && !errors.Is(err, readdb.ErrNotFound) {
		t.Errorf("read the old model's row: %v", err)
	}
	return err == nil
}

// servesStatuses tells whether m serves every status of the world, as verify checks first; it
// does not stop the test either.
func servesStatuses(t *testing.T, m *projections.ReadModels, w world) bool {
	t.Helper()
	ids := make([]string, 0, len(w.statuses))
	for id := range w.statuses {
		ids = append(ids, id)
	}
	got, err := m.Status.GetMany(testCtx(t), ids)
	if err != nil {
		t.Errorf("GetMany: %v", err)
		return false
	}
	return reflect.DeepEqual(got, w.statuses)
}

// testRebuildIsAtomic: while a rebuild runs, the served models are the old ones, whole; a
// rebuild cancelled midway leaves them served as they were and its new tables gone; a rebuild
// that completes replaces them all at once.
func testRebuildIsAtomic(t *testing.T, m *projections.ReadModels, leftovers func() bool) {
	log := eventlog.New(t)
	w := servedModel(t, m, log)
	opts := projections.RebuildOptions{BatchSize: 100}

	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	reader := &pagedReader{log: log, during: func(page int) error {
		if page == 4 {
			// Three pages are being written into the new tables: the served ones have not moved.
			if !holdsOldRow(t, m) {
				t.Error("the old model's row is gone while the rebuild runs")
			}
			if !servesStatuses(t, m, w) {
				t.Error("the served statuses changed while the rebuild runs")
			}
			if !leftovers() {
				t.Error("the rebuild builds nothing beside the served models")
			}
			cancel()
			return ctx.Err()
		}
		return nil
	}}
	if _, err := projections.RebuildWith(ctx, reader, m, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled rebuild: %v", err)
	}
	if reader.pages != 4 {
		t.Fatalf("the rebuild read %d pages, want 4", reader.pages)
	}
	if !holdsOldRow(t, m) {
		t.Fatal("a cancelled rebuild replaced the served model")
	}
	verify(t, m, w)
	if leftovers() {
		t.Fatal("a cancelled rebuild left its tables behind")
	}

	var progress []projections.RebuildProgress
	opts.Progress = func(p projections.RebuildProgress) { progress = append(progress, p) }
	n, err := projections.RebuildWith(testCtx(t), &pagedReader{log: log}, m, opts)
	if err != nil || n != len(log.All()) {
		t.Fatalf("rebuild: %d events, %v; want %d", n, err, len(log.All()))
	}
	if holdsOldRow(t, m) {
		t.Fatal("the rebuilt model still holds the old model's row")
	}
	verify(t, m, w)
	if leftovers() {
		t.Fatal("a rebuild left its tables behind")
	}
	last := progress[len(progress)-1]
	if !last.Done || last.Events != n || last.ReadModels != len(m.Projectors()) {
		t.Fatalf("final progress %+v", last)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].Events <= progress[i-1].Events && !progress[i].Done {
			t.Fatalf("progress went from %d to %d events", progress[i-1].Events, progress[i].Events)
		}
	}
}

func TestSQLiteRebuildIsAtomic(t *testing.T) {
	dir := t.TempDir()
	m, err := projections.OpenSQLiteReadModels(dir, keystore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	testRebuildIsAtomic(t, m, func() bool {
		_, err := os.Stat(filepath.Join(dir, projections.SQLiteDir+".rebuild"))
		return err == nil
	})
}

func TestClickHouseRebuildIsAtomic(t *testing.T) {
	dsn := readdbtest.ClickHouseDatabase(t)
	m, err := projections.OpenClickHouseReadModels(testCtx(t), dsn, keystore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	conn, err := readdb.OpenClickHouse(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	testRebuildIsAtomic(t, m, func() bool {
		var n uint64
		if err := conn.QueryRow(testCtx(t), `SELECT count() FROM system.databases
			WHERE name IN (concat(currentDatabase(), '_rebuild'), concat(currentDatabase(), '_old'))`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// TestSQLiteRebuildKilled: a rebuild killed before it had marked its new databases complete
// leaves them behind, which the next open removes, serving the old models; one killed after it
// had (between the mark and the swap) is swapped in by the next open.
func TestSQLiteRebuildKilled(t *testing.T) {
	dir := t.TempDir()
	keys := keystore.NewMemory()
	m, err := projections.OpenSQLiteReadModels(dir, keys)
	if err != nil {
		t.Fatal(err)
	}
	log := eventlog.New(t)
	w := servedModel(t, m, log)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, projections.SQLiteDir)
	build := live + ".rebuild"

	// Killed while writing: a half-written database, no mark.
	if err := os.MkdirAll(build, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "collection_status.db"), []byte("half a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err = projections.OpenSQLiteReadModels(dir, keys)
	if err != nil {
		t.Fatalf("open after a killed rebuild: %v", err)
	}
	if _, err := os.Stat(build); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the killed rebuild's directory is still there: %v", err)
	}
	if !holdsOldRow(t, m) {
		t.Fatal("the served model changed")
	}
	verify(t, m, w)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Killed after the mark, before the swap: the complete models are in build; here a copy
	// of the served ones without the old-only row stands in for them.
	if err := os.CopyFS(build, os.DirFS(live)); err != nil {
		t.Fatal(err)
	}
	db, err := readdb.OpenSQLite(filepath.Join(build, "collection_status.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM collection_status WHERE collection_id = 'c-old-only'`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "REBUILD-COMPLETE"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err = projections.OpenSQLiteReadModels(dir, keys)
	if err != nil {
		t.Fatalf("open after a rebuild killed in its swap: %v", err)
	}
	defer func() { _ = m.Close() }()
	if holdsOldRow(t, m) {
		t.Fatal("the complete rebuild was not swapped in")
	}
	verify(t, m, w)
	for _, left := range []string{build, live + ".old", filepath.Join(live, "REBUILD-COMPLETE")} {
		if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", left, err)
		}
	}
}

// TestSQLiteRebuildSwapFinishedOnceAmongConcurrentOpens: the roles of a service open the read
// models at once after a rebuild was killed in its swap; one of them finishes the swap and the
// others find it done, so that no interleaving renames a model away (found in review).
func TestSQLiteRebuildSwapFinishedOnceAmongConcurrentOpens(t *testing.T) {
	dir := t.TempDir()
	keys := keystore.NewMemory()
	m, err := projections.OpenSQLiteReadModels(dir, keys)
	if err != nil {
		t.Fatal(err)
	}
	w := servedModel(t, m, eventlog.New(t))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, projections.SQLiteDir)
	build := live + ".rebuild"
	if err := os.CopyFS(build, os.DirFS(live)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "REBUILD-COMPLETE"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const opens = 4
	opened := make(chan *projections.ReadModels, opens)
	errs := make(chan error, opens)
	for range opens {
		go func() {
			m, err := projections.OpenSQLiteReadModels(dir, keys)
			if err != nil {
				errs <- err
				return
			}
			opened <- m
		}()
	}
	for range opens {
		select {
		case err := <-errs:
			t.Fatalf("a concurrent open: %v", err)
		case m := <-opened:
			verify(t, m, w)
			_ = m.Close()
		}
	}
	for _, left := range []string{build, live + ".old"} {
		if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", left, err)
		}
	}
}

// TestClickHouseOpenRestoresWhatASwapSetAside: a swap that died midway (ClickHouse renames the
// tables of one statement one by one) left a served table in <db>_old and none in its place;
// the next open moves it back before it would create an empty one (found in review).
func TestClickHouseOpenRestoresWhatASwapSetAside(t *testing.T) {
	dsn := readdbtest.ClickHouseDatabase(t)
	keys := keystore.NewMemory()
	m, err := projections.OpenClickHouseReadModels(testCtx(t), dsn, keys)
	if err != nil {
		t.Fatal(err)
	}
	w := servedModel(t, m, eventlog.New(t))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := readdb.OpenClickHouse(testCtx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var db string
	if err := conn.QueryRow(testCtx(t), `SELECT currentDatabase()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE DATABASE IF NOT EXISTS ` + db + `_old`,
		`RENAME TABLE ` + db + `.collection_status TO ` + db + `_old.collection_status`} {
		if err := conn.Exec(testCtx(t), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+db+`_old`) })
	m, err = projections.OpenClickHouseReadModels(testCtx(t), dsn, keys)
	if err != nil {
		t.Fatalf("open after a swap died midway: %v", err)
	}
	defer func() { _ = m.Close() }()
	if !holdsOldRow(t, m) {
		t.Fatal("the served table set aside did not come back")
	}
	verify(t, m, w)
}

// endAppender serves the log and, the first time a read finds nothing more, appends one event,
// as a command would right after the rebuild read the store's end.
type endAppender struct {
	log    *eventlog.Log
	append func()
	done   bool
}

func (r *endAppender) ReadAll(ctx context.Context, after uint64, limit int) ([]eventschema.Envelope, error) {
	batch, err := r.log.ReadAll(ctx, after, limit)
	if err == nil && len(batch) == 0 && !r.done {
		r.done = true
		r.append()
	}
	return batch, err
}

// TestRebuildFoldsWhatWasAppendedMeanwhile: an event appended after the rebuild read the
// store's end (which a projection elsewhere may have written into the tables the swap replaces)
// is in the rebuilt models (found in review).
func TestRebuildFoldsWhatWasAppendedMeanwhile(t *testing.T) {
	m, err := projections.OpenSQLiteReadModels(t.TempDir(), keystore.NewMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close() }()
	log := eventlog.New(t)
	w := buildWorld(log, 20)
	t0 := time.Date(2026, 5, 2, 8, 0, 0, 0, time.UTC)
	reader := &endAppender{log: log, append: func() {
		log.Append("acme", collection.StreamName("c-late"), t0, collection.Started{CollectionID: "c-late", ClientID: "acme",
			Company: "se-demo-insurer", Product: collection.ProductInsurance, LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE",
			APIVersion: "2026-04-01", StartedAt: t0})
		// Final, so that it stays out of the running collections verify lists.
		log.Append("acme", collection.StreamName("c-late"), t0, collection.StatusChanged{From: collection.StatusRunning,
			To: collection.StatusFailed, ChangedAt: t0})
	}}
	n, err := projections.Rebuild(testCtx(t), reader, m)
	if err != nil || n != len(log.All()) {
		t.Fatalf("rebuild: %d events, %v; want all %d", n, err, len(log.All()))
	}
	if _, err := m.Status.Get(testCtx(t), "acme", "c-late"); err != nil {
		t.Fatalf("the collection started during the rebuild: %v", err)
	}
	verify(t, m, w)
}
