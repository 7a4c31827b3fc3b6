package eventhistory_test

import (
	"context"
	"testing"

	"github.com/samla/samla/projections/eventhistory"
	"github.com/samla/samla/projections/eventhistory/historytest"
	"github.com/samla/samla/projections/readdb/readdbtest"
)

func TestSQLiteStore(t *testing.T) {
	readdbtest.RunSQLite(t, eventhistory.NewSQLite, historytest.Run)
}

func TestClickHouseStore(t *testing.T) {
	readdbtest.RunClickHouse(t, eventhistory.NewClickHouse, historytest.Run)
}

// The first history table kept whole payloads (minus "personal"), which still held account
// numbers, balances, file names and request hashes. Opening a store on a database that has it
// drops it, so that no old payload is served or kept; the new projection refills the history.
const (
	legacyPayload    = `{"requestHash":"9f2c","insuranceNumber":"H-123"}`
	clickhouseLegacy = `CREATE TABLE event_history (tenant String, stream String, revision UInt64, position UInt64,
	event_id String, type String, schema_version UInt32, occurred_at_ms UInt64, correlation_id String,
	causation_id String, actor String, payload String) ENGINE = ReplacingMergeTree ORDER BY (stream, revision)`
)

func TestClickHouseDropsTheTableThatKeptPayloads(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, clickhouseLegacy); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO event_history (tenant, stream, revision, position, event_id, type,
		schema_version, occurred_at_ms, correlation_id, causation_id, actor, payload)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("acme", "collection-c1", uint64(0), uint64(1), "e1", "collection.started", uint32(2),
		uint64(1000), "", "", "", legacyPayload); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	s, err := eventhistory.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, `SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'event_history'`).
		Scan(&n); err != nil || n != 0 {
		t.Fatalf("event_history still exists (%d, %v)", n, err)
	}
	if rows, err := s.List(ctx, "acme", "collection-c1", nil, 0); err != nil || len(rows) != 0 {
		t.Fatalf("the new history serves %v, %v", rows, err)
	}
}

// The history tables as they were before the columns that record whose personal data an event
// held: opening a store adds them, and the rows from before read as holding none (a rebuild
// projects them again).
const (
	sqliteBeforePersonalData = `CREATE TABLE event_history_v2 (stream TEXT NOT NULL, revision INTEGER NOT NULL,
	tenant TEXT NOT NULL, position INTEGER NOT NULL, event_id TEXT NOT NULL, type TEXT NOT NULL,
	schema_version INTEGER NOT NULL, occurred_at_ms INTEGER NOT NULL, correlation_id TEXT NOT NULL,
	causation_id TEXT NOT NULL, actor TEXT NOT NULL, summary TEXT NOT NULL, PRIMARY KEY (stream, revision))`
	sqliteOldHistoryRow = `INSERT INTO event_history_v2 (stream, revision, tenant, position, event_id, type, schema_version,
	occurred_at_ms, correlation_id, causation_id, actor, summary)
	VALUES ('collection-c1', 0, 'acme', 1, 'e1', 'collection.claimed', 1, 1000, '', '', '', '{"claimedAt":"x"}')`
	clickhouseBeforePersonalData = `CREATE TABLE event_history_v2 (tenant String, stream String, revision UInt64,
	position UInt64, event_id String, type String, schema_version UInt32, occurred_at_ms UInt64,
	correlation_id String, causation_id String, actor String, summary String,
	occurred_at DateTime MATERIALIZED toDateTime(intDiv(occurred_at_ms, 1000))
	) ENGINE = ReplacingMergeTree ORDER BY (stream, revision)`
)

func checkUpgradedHistory(t *testing.T, s eventhistory.Store) {
	t.Helper()
	ctx := context.Background()
	rows, err := s.List(ctx, "acme", "collection-c1", nil, 0)
	if err != nil || len(rows) != 1 || rows[0].PersonalData != "" || rows[0].DataSubject != "" || string(rows[0].Summary) != `{"claimedAt":"x"}` {
		t.Fatalf("a row from before the upgrade = %+v, %v", rows, err)
	}
	next := eventhistory.Row{Tenant: "acme", Stream: "collection-c1", Revision: 1, Position: 2, EventID: "e2",
		Type: "collection.started", SchemaVersion: 2, Summary: []byte(`{}`), PersonalData: eventhistory.PersonalSealed,
		DataSubject: "user-u1"}
	if err := s.Insert(ctx, []eventhistory.Row{next}); err != nil {
		t.Fatal(err)
	}
	rows, err = s.List(ctx, "acme", "collection-c1", nil, 0)
	if err != nil || len(rows) != 2 || rows[1].PersonalData != eventhistory.PersonalSealed || rows[1].DataSubject != "user-u1" {
		t.Fatalf("after the upgrade = %+v, %v", rows, err)
	}
}

func TestSQLiteUpgradeAddsPersonalDataColumns(t *testing.T) {
	db := readdbtest.SQLite(t)
	for _, q := range []string{sqliteBeforePersonalData, sqliteOldHistoryRow} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := eventhistory.NewSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	checkUpgradedHistory(t, s)
	if _, err := eventhistory.NewSQLite(context.Background(), db); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}

func TestClickHouseUpgradeAddsPersonalDataColumns(t *testing.T) {
	conn := readdbtest.ClickHouse(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, clickhouseBeforePersonalData); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO event_history_v2 (tenant, stream, revision, position, event_id, type,
		schema_version, occurred_at_ms, correlation_id, causation_id, actor, summary)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append("acme", "collection-c1", uint64(0), uint64(1), "e1", "collection.claimed", uint32(1),
		uint64(1000), "", "", "", `{"claimedAt":"x"}`); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	s, err := eventhistory.NewClickHouse(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	checkUpgradedHistory(t, s)
	if _, err := eventhistory.NewClickHouse(ctx, conn); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}
