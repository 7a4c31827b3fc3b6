package readdb_test

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestLatestPerKeyKeepsFirstHighestRevisionInFirstOrder(t *testing.T) {
	items := []versioned{
		{key: "a", rev: 1, payload: "a1"}, {key: "b", rev: 2, payload: "b2"}, {key: "a", rev: 3, payload: "a3"},
		{key: "a", rev: 3, payload: "a3-again"}, {key: "b", rev: 1, payload: "b1"},
	}
	got := readdb.LatestPerKey(items, func(v versioned) string { return v.key }, func(v versioned) uint64 { return v.rev })
	want := []versioned{{key: "a", rev: 3, payload: "a3"}, {key: "b", rev: 2, payload: "b2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LatestPerKey = %v, want %v", got, want)
	}
}

func scanKey(rows readdb.Rows) (string, error) {
	var k string
	err := rows.Scan(&k)
	return k, err
}

// absentKeys returns more absent keys than two IN lists of max hold.
func absentKeys(max int) []string {
	var keys []string
	for i := range 2*max + 1 {
		keys = append(keys, fmt.Sprint("absent", i))
	}
	return keys
}

func TestByKeysReadsEveryChunk(t *testing.T) {
	present := []string{"a", "b", "c"}
	t.Run("SQLite", func(t *testing.T) {
		db := readdbtest.SQLite(t)
		ctx := readdbtest.Context(t)
		if _, err := db.ExecContext(ctx, `CREATE TABLE t (key TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		// Keys that JSON escapes travel in the bound array unchanged.
		stored := append([]string{`quote"back\slash`, "tab\tnew\nline", "ctl\x01", "åäö €"}, present...)
		for _, k := range stored {
			if _, err := db.ExecContext(ctx, `INSERT INTO t (key) VALUES (?)`, k); err != nil {
				t.Fatal(err)
			}
		}
		stmt, err := db.PrepareContext(ctx, `SELECT key FROM t WHERE key `+readdb.SQLiteInKeys)
		if err != nil {
			t.Fatal(err)
		}
		defer stmt.Close()
		// The present keys go last, so they fall into the last chunk.
		keys := absentKeys(readdb.SQLiteMaxIn)
		keys = append(keys, present...)
		var got []string
		if err := readdb.SQLiteByKeys(ctx, stmt, "t", scanKey, func(k string) { got = append(got, k) }, keys); err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, present) {
			t.Fatalf("SQLiteByKeys = %v, want %v", got, present)
		}
		// Every stored key, a key twice, an absent one and none at all.
		all, err := readdb.SQLiteMapByKeys(ctx, stmt, "t", scanKey, func(k string) string { return k }, append(stored, "a", "absent"))
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(stored) {
			t.Fatalf("SQLiteMapByKeys(every stored key) = %d rows %v, want %d", len(all), all, len(stored))
		}
		for _, k := range stored {
			if all[k] != k {
				t.Fatalf("SQLiteMapByKeys misses %q: %v", k, all)
			}
		}
		if none, err := readdb.SQLiteMapByKeys(ctx, stmt, "t", scanKey, func(k string) string { return k }, nil); err != nil || len(none) != 0 {
			t.Fatalf("SQLiteMapByKeys(no keys) = %v, %v", none, err)
		}
		bad := errors.New("bad row")
		err = readdb.SQLiteEach(ctx, db, "t", func(readdb.Rows) (string, error) { return "", bad }, func(string) {},
			`SELECT key FROM t`)
		if !errors.Is(err, bad) {
			t.Fatalf("SQLiteEach returned %v, want the scan's error", err)
		}
	})
	t.Run("ClickHouse", func(t *testing.T) {
		conn := readdbtest.ClickHouse(t)
		ctx := readdbtest.Context(t)
		if err := conn.Exec(ctx, `CREATE TABLE t (key String) ENGINE = MergeTree ORDER BY key`); err != nil {
			t.Fatal(err)
		}
		if err := readdb.InsertBatch(ctx, conn, "t", "key", present, func(k string) ([]any, error) { return []any{k}, nil }); err != nil {
			t.Fatal(err)
		}
		keys := absentKeys(readdb.ClickHouseMaxIn)
		keys = append(keys, present...)
		var got []string
		if err := readdb.ClickHouseByKeys(ctx, conn, "t", scanKey, func(k string) { got = append(got, k) },
			`SELECT key FROM t WHERE key IN`, keys); err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, present) {
			t.Fatalf("ClickHouseByKeys = %v, want %v", got, present)
		}
		bad := errors.New("bad row")
		err := readdb.ClickHouseEach(ctx, conn, "t", func(readdb.Rows) (string, error) { return "", bad }, func(string) {},
			`SELECT key FROM t`)
		if !errors.Is(err, bad) {
			t.Fatalf("ClickHouseEach returned %v, want the scan's error", err)
		}
	})
}
