package readdb_test

import (
	"context"
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
