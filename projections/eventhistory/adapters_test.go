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
