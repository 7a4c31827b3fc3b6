package readdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/samla/samla/projections/readdb"
)

type upsertRow struct {
	key string
	rev int
	val string
}

// upsertTable opens a database with open in the test's directory, closed when the test ends,
// and creates the table t of upsertRow in it.
func upsertTable(t *testing.T, open func(path string) (*sql.DB, error)) *sql.DB {
	t.Helper()
	db, err := open(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (k TEXT PRIMARY KEY, rev INTEGER NOT NULL, val TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// rowCount is how many rows t holds.
func rowCount(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExecEachMultiRowUpsertIsPerRow: ExecEach and ExecBulk write an INSERT's items as multi-row
// statements; the upsert-if-newer must come out as if each item were its own statement, also for
// items of one key inside one statement (a newer one after an older, an older one after a
// newer), and for a count of items that is no multiple of the rows per statement. ExecBulk's
// statements, prepared once, serve batch after batch.
func TestExecEachMultiRowUpsertIsPerRow(t *testing.T) {
	for _, writer := range []string{"ExecEach", "ExecBulk"} {
		t.Run(writer, func(t *testing.T) { testMultiRowUpsertIsPerRow(t, writer == "ExecBulk") })
	}
}

func testMultiRowUpsertIsPerRow(t *testing.T, bulk bool) {
	const upsert = `INSERT INTO t (k, rev, val) VALUES (?, ?, ?)
		ON CONFLICT (k) DO UPDATE SET rev = excluded.rev, val = excluded.val WHERE excluded.rev > t.rev`
	var items []upsertRow
	for i := range 2000 {
		key := fmt.Sprintf("k%03d", i%97)
		// Revisions go up and down within a key: only a newer one may overwrite.
		items = append(items, upsertRow{key, (i * 7919) % 13, fmt.Sprintf("v%d", i)})
	}
	want := map[string]upsertRow{}
	for _, it := range items {
		if old, ok := want[it.key]; !ok || it.rev > old.rev {
			want[it.key] = it
		}
	}
	values := func(r upsertRow) ([]any, error) { return []any{r.key, r.rev, r.val}, nil }
	for _, n := range []int{1, 2, 129, 1000, 2000} {
		db := upsertTable(t, readdb.OpenSQLite)
		ctx := context.Background()
		var prepared readdb.Statements
		b := prepared.Bulk(ctx, db, upsert)
		if err := prepared.Err(); err != nil {
			t.Fatal(err)
		}
		// In batches of up to 37 items, one transaction each, as a projection writes, and all
		// at once, as a rebuild does.
		per := 37
		if n == 2000 {
			per = n
		}
		for from := 0; from < n; from += per {
			batch := items[from:min(from+per, n)]
			err := readdb.InTx(ctx, db, func(tx *sql.Tx) error {
				if bulk {
					return readdb.ExecBulk(ctx, tx, b, batch, readdb.AppendValues(values))
				}
				return readdb.ExecEach(ctx, tx, upsert, batch, values)
			})
			if err != nil {
				t.Fatalf("%d items: %v", n, err)
			}
		}
		if err := prepared.Close(); err != nil {
			t.Fatal(err)
		}
		wantN := map[string]upsertRow{}
		for _, it := range items[:n] {
			if old, ok := wantN[it.key]; !ok || it.rev > old.rev {
				wantN[it.key] = it
			}
		}
		got := map[string]upsertRow{}
		rows, err := db.Query(`SELECT k, rev, val FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var r upsertRow
			if err := rows.Scan(&r.key, &r.rev, &r.val); err != nil {
				t.Fatal(err)
			}
			got[r.key] = r
		}
		_ = rows.Close()
		if !reflect.DeepEqual(got, wantN) {
			t.Fatalf("%d items: %d rows, want %d: %v", n, len(got), len(wantN), got)
		}
	}
	if len(want) != 97 {
		t.Fatalf("fixture has %d keys", len(want))
	}
}

// TestExecEachOtherStatements: a statement that is no one-row INSERT of placeholders runs once
// per item.
func TestExecEachOtherStatements(t *testing.T) {
	db, err := readdb.OpenSQLite(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "a", "c", "a"}
	err = readdb.InTx(ctx, db, func(tx *sql.Tx) error {
		// A literal in the row: not repeated as a multi-row INSERT.
		if err := readdb.ExecEach(ctx, tx, `INSERT INTO t (k, n) VALUES (?, 1) ON CONFLICT (k) DO UPDATE SET n = n + 1`,
			keys, func(k string) ([]any, error) { return []any{k}, nil }); err != nil {
			return err
		}
		return readdb.ExecEach(ctx, tx, `UPDATE t SET n = n * 10 WHERE k = ?`, []string{"a", "b"},
			func(k string) ([]any, error) { return []any{k}, nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c int
	if err := db.QueryRow(`SELECT (SELECT n FROM t WHERE k = 'a'), (SELECT n FROM t WHERE k = 'b'), (SELECT n FROM t WHERE k = 'c')`).Scan(&a, &b, &c); err != nil {
		t.Fatal(err)
	}
	if a != 30 || b != 10 || c != 1 {
		t.Fatalf("a=%d b=%d c=%d, want 30 10 1", a, b, c)
	}
}

// TestExecEachAppendCountsEachRowsValues: ExecEachAppend checks the values each item appends
// against the row's columns, not the arguments appended so far.
func TestExecEachAppendCountsEachRowsValues(t *testing.T) {
	db := upsertTable(t, readdb.OpenSQLite)
	ctx := context.Background()
	items := []upsertRow{{"a", 1, "x"}, {"b", 2, "y"}, {"c", 3, "z"}}
	err := readdb.InTx(ctx, db, func(tx *sql.Tx) error {
		return readdb.ExecEachAppend(ctx, tx, `INSERT INTO t (k, rev, val) VALUES (?, ?, ?)`, items,
			func(args []any, r upsertRow) ([]any, error) {
				if r.key == "b" {
					return append(args, r.key, r.rev), nil
				}
				return append(args, r.key, r.rev, r.val), nil
			})
	})
	if err == nil || err.Error() != "row 2 of 3: 2 values for 3 columns" {
		t.Fatalf("err = %v, want the second item's 2 values for 3 columns", err)
	}
	err = readdb.InTx(ctx, db, func(tx *sql.Tx) error {
		return readdb.ExecEachAppend(ctx, tx, `INSERT INTO t (k, rev, val) VALUES (?, ?, ?)`, items,
			func(args []any, r upsertRow) ([]any, error) { return append(args, r.key, r.rev, r.val), nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := rowCount(t, db); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

// TestBulkRefusesOtherStatements: a Bulk is an INSERT of one row of placeholders that prepares;
// anything else is a failure Err reports when the store opens, before any batch.
func TestBulkRefusesOtherStatements(t *testing.T) {
	db, err := readdb.OpenSQLite(filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	for _, stmt := range []string{
		`INSERT INTO t (k, n) VALUES (?, 1)`,
		`UPDATE t SET n = ? WHERE k = ?`,
		`INSERT INTO missing (k, n) VALUES (?, ?)`,
	} {
		var prepared readdb.Statements
		if b := prepared.Bulk(context.Background(), db, stmt); b != nil || prepared.Err() == nil {
			t.Fatalf("%s: a Bulk (%v), err %v", stmt, b, prepared.Err())
		}
	}
}

// TestExecBulkCountsEachRowsValues: ExecBulk checks the values each item appends against the
// row's columns; the rows it ran before the refused one go with the transaction's rollback.
func TestExecBulkCountsEachRowsValues(t *testing.T) {
	db := upsertTable(t, readdb.OpenSQLite)
	ctx := context.Background()
	b := insertBulk(t, db)
	items := []upsertRow{{"a", 1, "x"}, {"b", 2, "y"}, {"c", 3, "z"}}
	err := readdb.InTx(ctx, db, func(tx *sql.Tx) error {
		return readdb.ExecBulk(ctx, tx, b, items, func(args []any, r upsertRow) ([]any, error) {
			if r.key == "c" {
				return append(args, r.key, r.rev), nil
			}
			return append(args, r.key, r.rev, r.val), nil
		})
	})
	if err == nil || err.Error() != "row 3 of 3: 2 values for 3 columns" {
		t.Fatalf("err = %v, want the third item's 2 values for 3 columns", err)
	}
	if n := rowCount(t, db); n != 0 {
		t.Fatalf("%d rows after a refused batch, want 0", n)
	}
}

// TestExecBulkInsideALargeRebuildTransaction: a rebuild's journal-less database holds an
// exclusive lock once a transaction's writes spill past its page cache; ExecBulk must then run
// on the transaction's connection alone (found in review: a size first prepared on the database
// waited out the busy timeout on a second connection and failed the rebuild).
func TestExecBulkInsideALargeRebuildTransaction(t *testing.T) {
	db := upsertTable(t, readdb.OpenSQLiteBulk)
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE blobs (n INTEGER PRIMARY KEY, b BLOB NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	b := insertBulk(t, db)
	blob := make([]byte, 1<<20)
	started := time.Now()
	err := readdb.InTx(ctx, db, func(tx *sql.Tx) error {
		for n := range 24 { // past the bulk database's page cache (2 MiB)
			if _, err := tx.ExecContext(ctx, `INSERT INTO blobs (n, b) VALUES (?, ?)`, n, blob); err != nil {
				return err
			}
		}
		return readdb.ExecBulk(ctx, tx, b, []upsertRow{{"a", 1, "x"}, {"b", 2, "y"}, {"c", 3, "z"}},
			func(args []any, r upsertRow) ([]any, error) { return append(args, r.key, r.rev, r.val), nil })
	})
	if err != nil {
		t.Fatalf("after %s: %v", time.Since(started).Round(time.Millisecond), err)
	}
	if n := rowCount(t, db); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

// insertBulk is the Bulk of a plain insert into t, closed when the test ends.
func insertBulk(t *testing.T, db *sql.DB) *readdb.Bulk {
	t.Helper()
	var prepared readdb.Statements
	t.Cleanup(func() { _ = prepared.Close() })
	b := prepared.Bulk(context.Background(), db, `INSERT INTO t (k, rev, val) VALUES (?, ?, ?)`)
	if err := prepared.Err(); err != nil {
		t.Fatal(err)
	}
	return b
}
