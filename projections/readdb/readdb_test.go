package readdb_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestOpenSQLiteSetsPragmasOnEveryConnection(t *testing.T) {
	db, err := readdb.OpenSQLite(filepath.Join(t.TempDir(), "rm.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(3)
	ctx := context.Background()
	// Hold three connections at once so that the pragmas are checked on more than the first.
	var conns []interface{ Close() error }
	for range 3 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var mode string
		var sync, busy int
		if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 1 || busy != 5000 {
			t.Fatalf("journal_mode=%s synchronous=%d busy_timeout=%d; want wal, 1 (NORMAL), 5000", mode, sync, busy)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	if _, err := readdb.OpenSQLite(filepath.Join(t.TempDir(), "a?b.db")); err == nil {
		t.Fatal("a path with '?' was accepted")
	}
}

func TestOpenClickHouseCreatesTheDatabase(t *testing.T) {
	dsn := readdbtest.ClickHouseDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 { // the second open finds the database
		conn, err := readdb.OpenClickHouse(ctx, dsn)
		if err != nil {
			t.Fatalf("OpenClickHouse: %v", err)
		}
		var db string
		if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		if len(db) < len("samla_test_") || db[:len("samla_test_")] != "samla_test_" {
			t.Fatalf("connected to %q, want the test database", db)
		}
		_ = conn.Close()
	}
	if _, err := readdb.OpenClickHouse(ctx, "clickhouse://127.0.0.1:1/bad-name;DROP"); err == nil {
		t.Fatal("an unsafe database name was accepted")
	}
}

// TestOpenSQLiteKeepsItsConnections: the pool keeps as many idle connections as it opens, so
// that a burst of reads does not open (and parse the schema on) a new connection per read.
func TestOpenSQLiteKeepsItsConnections(t *testing.T) {
	db, err := readdb.OpenSQLite(filepath.Join(t.TempDir(), "rm.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	size := readdb.SQLitePoolSize()
	if size < 4 || db.Stats().MaxOpenConnections != size {
		t.Fatalf("pool of %d (max open %d), want at least 4, all kept", size, db.Stats().MaxOpenConnections)
	}
	ctx := context.Background()
	hold := func() {
		var conns []*sql.Conn
		for range size {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
	hold()
	hold()
	if st := db.Stats(); st.OpenConnections != size || st.Idle != size || st.MaxIdleClosed != 0 {
		t.Fatalf("after two bursts: %+v, want %d connections kept idle and none closed", st, size)
	}
}

// TestStatementsPrepareOnceAndClose: a bad statement fails Err after the good ones were
// prepared, and closes them; prepared statements serve reads until Close.
func TestStatementsPrepareOnceAndClose(t *testing.T) {
	db := readdbtest.SQLite(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (key TEXT PRIMARY KEY); INSERT INTO t VALUES ('a'), ('b')`); err != nil {
		t.Fatal(err)
	}
	var bad readdb.Statements
	good := bad.Prepare(ctx, db, `SELECT key FROM t WHERE key = ?`)
	if bad.Prepare(ctx, db, `SELECT nope FROM missing`) != nil || bad.Prepare(ctx, db, `SELECT key FROM t`) != nil {
		t.Fatal("Prepare returned a statement after a failure")
	}
	if err := bad.Err(); err == nil {
		t.Fatal("Err = nil after a failed Prepare")
	}
	if _, err := good.QueryContext(ctx, "a"); err == nil {
		t.Fatal("a statement prepared before the failure is still open")
	}

	var stmts readdb.Statements
	get := stmts.Prepare(ctx, db, `SELECT key FROM t WHERE key = ?`)
	if err := stmts.Err(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "a"} {
		var got []string
		if err := readdb.SQLiteStmtEach(ctx, get, "t", func(r readdb.Rows) (string, error) {
			var k string
			return k, r.Scan(&k)
		}, func(k string) { got = append(got, k) }, key); err != nil || len(got) != 1 || got[0] != key {
			t.Fatalf("read %s = %v, %v", key, got, err)
		}
	}
	if err := stmts.Close(); err != nil {
		t.Fatal(err)
	}
	if err := stmts.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestOpenClickHouseKeepsItsConnections: without pool settings in the DSN the pool keeps as many
// idle connections as it opens; a DSN that sizes one side gets the other to match.
func TestOpenClickHouseKeepsItsConnections(t *testing.T) {
	dsn := readdbtest.ClickHouseDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		query string
		want  int
	}{{"", readdb.ClickHousePoolSize}, {"max_open_conns=3", 3}, {"max_idle_conns=7", 7}} {
		u := dsn
		if tc.query != "" {
			u += "?" + tc.query
		}
		conn, err := readdb.OpenClickHouse(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		st := conn.Stats()
		_ = conn.Close()
		if st.MaxOpenConns != tc.want || st.MaxIdleConns != tc.want {
			t.Errorf("%q: max open %d, max idle %d; want both %d", tc.query, st.MaxOpenConns, st.MaxIdleConns, tc.want)
		}
	}
}

func TestMillis(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_999_999, time.FixedZone("X", 7200))
	if got := readdb.FromMillis(readdb.Millis(at)); !got.Equal(at.Truncate(time.Millisecond)) || got.Location() != time.UTC {
		t.Fatalf("round trip = %v", got)
	}
	if got := readdb.FromUMillis(readdb.UMillis(at)); !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("unsigned round trip = %v", got)
	}
	if readdb.Millis(time.Time{}) != 0 || !readdb.FromMillis(0).IsZero() || readdb.UMillis(time.Time{}) != 0 {
		t.Fatal("the zero time must be stored as 0 and come back as the zero time")
	}
	if readdb.UMillis(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)) != 0 {
		t.Fatal("a time before 1970 must not wrap around")
	}
}

func TestValidClickHouseIdentifier(t *testing.T) {
	for _, ok := range []string{"default", "samla", "samla_test_0a1b", "_x"} {
		if err := readdb.ValidClickHouseIdentifier(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "1abc", "a-b", "a b", "a;DROP", "a`b", "ä"} {
		if err := readdb.ValidClickHouseIdentifier(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestChunksAndPlaceholders(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	got := readdb.Chunks(ids, 2)
	if len(got) != 3 || len(got[2]) != 1 || got[2][0] != "e" {
		t.Fatalf("Chunks = %v", got)
	}
	if readdb.Chunks(nil, 2) != nil {
		t.Fatal("Chunks(nil) not empty")
	}
	if readdb.Placeholders(3) != "?, ?, ?" || readdb.Placeholders(0) != "" {
		t.Fatalf("Placeholders = %q", readdb.Placeholders(3))
	}
}
