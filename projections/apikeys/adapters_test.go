package apikeys_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/samla/samla/domain/client"
	"github.com/samla/samla/projections/apikeys"
	"github.com/samla/samla/projections/apikeys/apikeystest"
	"github.com/samla/samla/projections/readdb"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, apikeys.NewSQLite, apikeystest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, apikeys.NewClickHouse, apikeystest.Run)
}

// The key tables as they were before retirements: opening a store adds the end column, and the
// keys from before have no end.
const (
	sqliteBeforeRetirements = `CREATE TABLE api_keys (key_hash TEXT NOT NULL PRIMARY KEY, client_id TEXT NOT NULL,
	key_id TEXT NOT NULL, revoked INTEGER NOT NULL, revision INTEGER NOT NULL) WITHOUT ROWID`
	clickhouseBeforeRetirements = `CREATE TABLE api_keys (key_hash String, client_id String, key_id String,
	revoked UInt8, revision UInt64) ENGINE = ReplacingMergeTree(revision) ORDER BY key_hash`
)

func checkUpgradedKeys(t *testing.T, s apikeys.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if row, err := s.Lookup(ctx, client.HashAPIKey("old-key"), now); err != nil || row.ClientID != "acme" || !row.ValidUntil.IsZero() {
		t.Fatalf("a key from before the upgrade = %+v, %v", row, err)
	}
	end := now.Add(time.Hour).Truncate(time.Millisecond)
	if err := s.Upsert(ctx, []apikeys.Row{{KeyHash: client.HashAPIKey("old-key"), ClientID: "acme", KeyID: "k1", ValidUntil: end, Revision: 3}}); err != nil {
		t.Fatal(err)
	}
	if row, err := s.Lookup(ctx, client.HashAPIKey("old-key"), now); err != nil || !row.ValidUntil.Equal(end) {
		t.Fatalf("after the upgrade = %+v, %v", row, err)
	}
	if _, err := s.Lookup(ctx, client.HashAPIKey("old-key"), end); !errors.Is(err, readdb.ErrNotFound) {
		t.Fatalf("past its end: %v", err)
	}
}

func TestSQLiteUpgradeAddsValidUntil(t *testing.T) {
	db := readdbtest.SQLite(t)
	for _, q := range []string{sqliteBeforeRetirements,
		`INSERT INTO api_keys VALUES ('` + client.HashAPIKey("old-key") + `', 'acme', 'k1', 0, 1)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := apikeys.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkUpgradedKeys(t, s)
	again, err := apikeys.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatalf("second migration: %v", err)
	}
	_ = again.Close()
}

func TestClickHouseUpgradeAddsValidUntil(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, clickhouseBeforeRetirements); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO api_keys (key_hash, client_id, key_id, revoked, revision)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(client.HashAPIKey("old-key"), "acme", "k1", uint8(0), uint64(1)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	s, err := apikeys.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	checkUpgradedKeys(t, s)
	if _, err := apikeys.NewClickHouse(ctx, conn); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}
