package readdb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/samla/samla/eventschema"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

type versioned struct {
	key, sub string
	rev      uint64
	payload  string
}

func TestKeepNewerDropsStoredOrOlderRevisions(t *testing.T) {
	items := []versioned{{key: "a", rev: 3}, {key: "b", rev: 2}, {key: "c", rev: 1}, {key: "d", rev: 7}}
	stored := map[string]uint64{"a": 3, "b": 1, "d": 9}
	got := readdb.KeepNewer(items, stored, func(v versioned) string { return v.key }, func(v versioned) uint64 { return v.rev })
	want := []versioned{{key: "b", rev: 2}, {key: "c", rev: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("KeepNewer = %v, want %v", got, want)
	}
}

func TestFoldStreamsFoldsOnlyNewerEventsOfItsKeys(t *testing.T) {
	type row struct {
		id     string
		events []string
		rev    uint64
	}
	batch := []eventschema.Envelope{
		{Stream: "x-1", Type: "t", Revision: 4}, // at the stored revision: already folded
		{Stream: "y-1", Type: "t", Revision: 0}, // not this read model's
		{Stream: "x-2", Type: "t", Revision: 0},
		{Stream: "x-1", Type: "t", Revision: 5},
		{Stream: "x-3", Type: "skip", Revision: 0}, // apply changes nothing
		{Stream: "x-2", Type: "t", Revision: 1},
	}
	var loaded []string
	load := func(_ context.Context, ids []string) (map[string]row, error) {
		loaded = ids
		return map[string]row{"1": {id: "1", rev: 4}}, nil
	}
	key := func(env eventschema.Envelope) (string, bool) {
		if env.Stream[0] != 'x' {
			return "", false
		}
		return env.Stream[2:], true
	}
	apply := func(id string, r row, exists bool, env eventschema.Envelope) (row, bool, error) {
		if env.Type == "skip" {
			return r, false, nil
		}
		r.id, r.rev = id, env.Revision
		r.events = append(r.events, fmt.Sprintf("%s@%d", env.Stream, env.Revision))
		return r, true, nil
	}
	got, err := readdb.FoldStreams(context.Background(), batch, key, load, func(r row) uint64 { return r.rev }, apply)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1", "2", "3"}; !reflect.DeepEqual(loaded, want) {
		t.Fatalf("loaded %v, want %v", loaded, want)
	}
	want := []row{
		{id: "2", rev: 1, events: []string{"x-2@0", "x-2@1"}},
		{id: "1", rev: 5, events: []string{"x-1@5"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FoldStreams = %+v, want %+v", got, want)
	}

	boom := errors.New("boom")
	_, err = readdb.FoldStreams(context.Background(), batch, key,
		func(context.Context, []string) (map[string]row, error) { return nil, boom },
		func(r row) uint64 { return r.rev }, apply)
	if !errors.Is(err, boom) {
		t.Fatalf("load error = %v, want boom", err)
	}
	none, err := readdb.FoldStreams(context.Background(), batch[1:2], key, load, func(r row) uint64 { return r.rev }, apply)
	if err != nil || len(none) != 0 {
		t.Fatalf("a batch without the read model's events gave %v, %v", none, err)
	}
}

func TestClickHouseRevisionHelpers(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := readdbtest.Context(t)
	if err := conn.Exec(ctx, `CREATE TABLE t (key String, sub String, revision UInt64)
		ENGINE = ReplacingMergeTree(revision) ORDER BY (key, sub)`); err != nil {
		t.Fatal(err)
	}
	values := func(v versioned) ([]any, error) { return []any{v.key, v.sub, v.rev}, nil }
	if err := readdb.InsertBatch(ctx, conn, "t", "key, sub, revision", []versioned(nil), values); err != nil {
		t.Fatalf("empty InsertBatch: %v", err)
	}
	rows := []versioned{{"a", "1", 1, ""}, {"a", "1", 3, ""}, {"a", "2", 2, ""}, {"b", "1", 5, ""}}
	if err := readdb.InsertBatch(ctx, conn, "t", "key, sub, revision", rows, values); err != nil {
		t.Fatalf("InsertBatch: %v", err)
	}
	bad := errors.New("bad row")
	err := readdb.InsertBatch(ctx, conn, "t", "key, sub, revision", rows,
		func(versioned) ([]any, error) { return nil, bad })
	if !errors.Is(err, bad) {
		t.Fatalf("InsertBatch returned %v, want the row's error", err)
	}

	// More keys than one IN list holds, so the chunks are read and merged.
	keys := []string{"a", "b", "missing"}
	for i := range readdb.ClickHouseMaxIn {
		keys = append(keys, fmt.Sprint("k", i))
	}
	got, err := readdb.StoredRevisions(ctx, conn, "t", "key", keys)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]uint64{"a": 3, "b": 5}; !reflect.DeepEqual(got, want) {
		t.Fatalf("StoredRevisions = %v, want %v", got, want)
	}
	sub, err := readdb.StoredSubRevisions(ctx, conn, "t", "key", "sub", []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[[2]string]uint64{{"a", "1"}: 3, {"a", "2"}: 2}; !reflect.DeepEqual(sub, want) {
		t.Fatalf("StoredSubRevisions = %v, want %v", sub, want)
	}
}

func TestEnsureClickHouseColumnsAddsOnlyMissingColumns(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := readdbtest.Context(t)
	if err := conn.Exec(ctx, `CREATE TABLE t (key String, old String) ENGINE = MergeTree ORDER BY key`); err != nil {
		t.Fatal(err)
	}
	if err := readdb.InsertBatch(ctx, conn, "t", "key, old", []string{"k"},
		func(k string) ([]any, error) { return []any{k, "o"}, nil }); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second run finds every column
		if err := readdb.EnsureClickHouseColumns(ctx, conn, "t", []string{"old", "n1", "n2"}, "String DEFAULT ''"); err != nil {
			t.Fatal(err)
		}
	}
	var key, old, n1, n2 string
	if err := conn.QueryRow(ctx, `SELECT key, old, n1, n2 FROM t`).Scan(&key, &old, &n1, &n2); err != nil {
		t.Fatal(err)
	}
	if key != "k" || old != "o" || n1 != "" || n2 != "" {
		t.Fatalf("row after migration = %q %q %q %q", key, old, n1, n2)
	}
}

func TestSQLiteHelpers(t *testing.T) {
	db := readdbtest.SQLite(t)
	ctx := readdbtest.Context(t)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (key TEXT PRIMARY KEY, revision INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := readdb.EnsureSQLiteColumns(ctx, db, "t", []string{"revision", "extra"}, "TEXT NOT NULL DEFAULT ''"); err != nil {
		t.Fatal(err)
	}
	if err := readdb.EnsureSQLiteColumns(ctx, db, "t", []string{"extra"}, "TEXT NOT NULL DEFAULT ''"); err != nil {
		t.Fatal(err)
	}
	const upsert = `INSERT INTO t (key, revision, extra) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET revision = excluded.revision, extra = excluded.extra
		WHERE excluded.revision > t.revision`
	values := func(v versioned) ([]any, error) { return []any{v.key, int64(v.rev), v.payload}, nil }
	write := func(items ...versioned) error {
		return readdb.InTx(ctx, db, func(tx *sql.Tx) error { return readdb.ExecEach(ctx, tx, upsert, items, values) })
	}
	if err := write(versioned{key: "a", rev: 2, payload: "a2"}, versioned{key: "b", rev: 1, payload: "b1"}); err != nil {
		t.Fatal(err)
	}
	if err := write(versioned{key: "a", rev: 1, payload: "a1"}, versioned{key: "b", rev: 2, payload: "b2"}); err != nil {
		t.Fatal(err)
	}
	// A failing row rolls back the whole transaction.
	bad := errors.New("bad row")
	err := readdb.InTx(ctx, db, func(tx *sql.Tx) error {
		return readdb.ExecEach(ctx, tx, upsert, []versioned{{key: "c", rev: 1}, {key: "d"}}, func(v versioned) ([]any, error) {
			if v.key == "d" {
				return nil, bad
			}
			return values(v)
		})
	})
	if !errors.Is(err, bad) {
		t.Fatalf("InTx returned %v, want the row's error", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT key || '=' || extra FROM t`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	_ = rows.Close()
	sort.Strings(got)
	if want := []string{"a=a2", "b=b2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rows = %v, want %v", got, want)
	}
}
