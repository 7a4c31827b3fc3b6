// Package readdbtest gives the read models' contract suites fresh, isolated databases: a SQLite
// file in the test's temporary directory, or a ClickHouse database of its own that is dropped
// when the test ends.
package readdbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/samla/samla/projections/readdb"
)

// Environment variables that control integration tests.
const (
	// EnvClickHouseDSN names a ClickHouse server to test against, e.g.
	// clickhouse://127.0.0.1:9000/default. Each test gets its own database on it.
	EnvClickHouseDSN = "SAMLA_CLICKHOUSE_DSN"
	// EnvRequireIntegration=1 (CI sets it) turns a missing server from a skip into a failure,
	// so that a misconfigured pipeline cannot pass by skipping its integration tests.
	EnvRequireIntegration = "SAMLA_REQUIRE_INTEGRATION"
)

// SQLite opens a fresh read-model database in t's temporary directory, closed at cleanup.
func SQLite(t testing.TB) *sql.DB {
	t.Helper()
	db, err := readdb.OpenSQLite(t.TempDir() + "/readmodel.db")
	if err != nil {
		t.Fatalf("open sqlite read model: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// ClickHouseDSN returns the DSN of the server to test against. Without SAMLA_CLICKHOUSE_DSN it
// skips the test, or fails it when SAMLA_REQUIRE_INTEGRATION=1.
func ClickHouseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvClickHouseDSN)
	if dsn != "" {
		return dsn
	}
	msg := EnvClickHouseDSN + " is not set: no ClickHouse server to run the ClickHouse read-model tests against " +
		"(e.g. " + EnvClickHouseDSN + "=clickhouse://127.0.0.1:9000/default)"
	if os.Getenv(EnvRequireIntegration) == "1" {
		t.Fatal(msg + "; " + EnvRequireIntegration + "=1 requires them to run")
	}
	t.Skip(msg)
	return ""
}

// ClickHouseDatabase returns the DSN of a fresh database with a random name on the test server
// (the database itself is created by whoever opens the DSN, as readdb.OpenClickHouse does). It
// is dropped at cleanup. It skips or fails as ClickHouseDSN does.
func ClickHouseDatabase(t testing.TB) string {
	t.Helper()
	dsn := ClickHouseDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvClickHouseDSN, err)
	}
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		t.Fatalf("random database name: %v", err)
	}
	database := "samla_test_" + hex.EncodeToString(suffix[:])
	u.Path = "/" + database
	// database=… in the query string would win over the path in ParseDSN.
	q := u.Query()
	q.Del("database")
	u.RawQuery = q.Encode()

	admin := *u
	admin.Path = "/default"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := readdb.OpenClickHouse(ctx, admin.String())
		if err != nil {
			t.Errorf("drop clickhouse test database %s: %v", database, err)
			return
		}
		defer func() { _ = conn.Close() }()
		// A rebuild's databases beside it go too: a test that stops a rebuild midway leaves
		// <database>_old or <database>_rebuild for the next open, which never comes.
		for _, db := range []string{database, database + "_old", database + "_rebuild"} {
			if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
				t.Errorf("drop clickhouse test database %s: %v", db, err)
			}
		}
	})
	return u.String()
}

// ClickHouse connects to a fresh database of its own on the test server (see
// ClickHouseDatabase); the connection is closed and the database dropped at cleanup.
func ClickHouse(t testing.TB) driver.Conn {
	t.Helper()
	dsn := ClickHouseDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := readdb.OpenClickHouse(ctx, dsn)
	if err != nil {
		t.Fatalf("open clickhouse test database: %v", err)
	}
	// Registered after ClickHouseDatabase's cleanup, so it runs first (cleanups run last in,
	// first out): the connection is closed before the database is dropped.
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
